"""Each config setting has its default in one place: the config models.

A model elsewhere that carries a setting of the config (the session plan's `infra_retries`, the
ledger's `max_usd`, ...) either has no default of its own, so whoever builds it must pass the
config's value, or has the config's default. A restated default that differs (the session plan
once defaulted `infra_retries` to 0 against the config's 2) fails here, naming the field.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from pydantic import BaseModel

import veriharness
from veriharness.agent.plan import SessionPlan
from veriharness.experiment.config import (
    AgentSettings,
    AnnotationSettings,
    ExecutionSettings,
    ExperimentConfig,
)

_CONFIG_MODELS = (AgentSettings, AnnotationSettings, ExecutionSettings, ExperimentConfig)
# Fields that share a setting's name but hold something else, each with what it holds.
_OTHER_MEANING = {
    "veriharness.experiment.catalog.ProviderSettings.api_key_env": "a profile's key variable",
    "veriharness.runfolder.agent_requests.AgentRequest.model": "the model a request named",
    "veriharness.runfolder.render.RenderRecord.limits": "the renderer's own limits",
}


def _config_defaults() -> dict[str, list[Any]]:
    """Setting name -> its defaults in the config models (a name may be in two sections)."""
    defaults: dict[str, list[Any]] = {}
    for model in _CONFIG_MODELS:
        for name, field in model.model_fields.items():
            if not field.is_required() and not isinstance(field.default, BaseModel):
                defaults.setdefault(name, []).append(field.get_default(call_default_factory=True))
    return defaults


def _models_of_the_package() -> list[type[BaseModel]]:
    for info in pkgutil.walk_packages(veriharness.__path__, "veriharness."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    found, todo = [], list(BaseModel.__subclasses__())
    while todo:
        model = todo.pop()
        todo.extend(model.__subclasses__())
        if model.__module__.startswith("veriharness.") and not issubclass(model, _CONFIG_MODELS):
            found.append(model)
    return found


def _comparable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def test_no_model_restates_a_config_default_with_another_value() -> None:
    defaults = _config_defaults()
    differing = []
    for model in _models_of_the_package():
        for name, field in model.model_fields.items():
            where = f"{model.__module__}.{model.__name__}.{name}"
            if name not in defaults or field.is_required() or where in _OTHER_MEANING:
                continue
            own = _comparable(field.get_default(call_default_factory=True))
            if own not in [_comparable(d) for d in defaults[name]]:
                differing.append(f"{where} = {own!r}")
    assert not differing, f"defaults that differ from the config's: {differing}"


def test_the_session_plan_takes_every_config_setting_from_the_config() -> None:
    settings = set(AgentSettings.model_fields) | set(ExecutionSettings.model_fields)
    restated = [
        name
        for name, field in SessionPlan.model_fields.items()
        if name in settings and not field.is_required()
    ]
    assert restated == [], f"SessionPlan fields with a default of their own: {restated}"
