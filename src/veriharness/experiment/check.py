"""One check of an experiment's definition before any session: the config files, every task,
condition and prompt module, and the catalog and taxonomy files they name.

Every problem found is reported, not the first: each is a `Problem`, one line naming the file,
the field, the value, what is expected and, where one exists, a suggestion (a close key or file
name, the form a value takes). The verb `check` prints them, and so does the workflow's start
(`common.smk`, before Snakemake's own schema validation, which then covers anything this check
does not), so a user's mistake never ends in a traceback or a schema dump.

A config is checked as layers: the files it was merged from, in order, and the command line's
values; a problem is attributed to the last layer that sets its key. Only the definition is read
here (no git, no model lookup, no run folder): the start check (`check-experiment`) does those.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from veriharness._util.yaml_text import load_yaml
from veriharness.experiment.catalog import CatalogError, load_catalog
from veriharness.experiment.config import (
    WRAPPED_CONFIG_KINDS,
    ConditionSpec,
    ConfigError,
    ExperimentConfig,
    TaskSpec,
    config_schema,
    deep_merge,
    is_placeholder_model,
    load_task,
)
from veriharness.experiment.definition import (
    DEFAULT_CONFIG,
    INTERACTIVE_TASK_MODULES,
    cell_modules,
    missing_prices,
)
from veriharness.experiment.json_schema import plain_schema
from veriharness.experiment.prompts import PromptError, assemble
from veriharness.experiment.record import EFFECTIVE_CONFIG
from veriharness.experiment.taxonomy import load_taxonomy

__all__ = [
    "Layer",
    "Problem",
    "check_definition",
    "config_layers",
    "config_problems",
    "effective_config_layers",
    "exit_on_problems",
    "merged_config",
    "project_layers",
    "problem_lines",
    "report",
    "task_problems",
]

_MAX_VALUE = 80
_ID_FORM = "an id: letters, digits, '_', '.' or '-', starting with a letter or a digit"
_HINTS = {
    # The field that preceded `interactions` (P-41): only its null is read.
    ("task.yaml", "interaction"): "the field is no longer read: delete it, and state each "
    "requirement under `interactions:` (docs/task-format.md)",
}


class Problem(BaseModel):
    """One mistake in the definition, as one line."""

    model_config = ConfigDict(frozen=True)
    file: str
    field: str
    problem: str
    value: str | None = None
    expected: str | None = None
    suggestion: str | None = None

    def line(self) -> str:
        head = f"{self.file}: {self.field}"
        if self.value is not None:
            head += f" = {self.value}"
        parts = [f"{head}: {self.problem}"]
        if self.expected:
            parts.append(f"expected {self.expected}")
        if self.suggestion:
            parts.append(self.suggestion)
        return "; ".join(parts)


Layer = tuple[str, Mapping[str, Any]]
"""A config's source (a file's name as the user wrote it, or `--config`) and what it sets."""

FileOf = Callable[[Sequence[str | int]], str]


def problem_lines(problems: Sequence[Problem]) -> list[str]:
    return [p.line() for p in problems]


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 3] + "..."


def _dotted(path: Sequence[str | int]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _types(node: Mapping[str, Any]) -> list[str]:
    kind = node.get("type")
    return [kind] if isinstance(kind, str) else list(kind or [])


def _expected(node: Mapping[str, Any]) -> str:
    """What a schema node accepts, in words."""
    if "const" in node:
        return _shown(node["const"])
    if "enum" in node:
        return "one of " + ", ".join(_shown(v) for v in node["enum"])
    if "anyOf" in node:
        return " or ".join(dict.fromkeys(_expected(option) for option in node["anyOf"]))
    words = []
    for kind in _types(node):
        if kind == "object" and node.get("properties"):
            words.append("a mapping with keys " + ", ".join(node["properties"]))
        elif kind == "array":
            items = node.get("items")
            words.append("a list" + (f" of {_expected(items)}" if items else ""))
        elif kind == "integer":
            words.append("a whole number" + _bounds(node))
        elif kind == "number":
            words.append("a number" + _bounds(node))
        elif kind == "string":
            words.append(_string_form(node))
        else:
            words.append(
                {"boolean": "true or false", "null": "null", "object": "a mapping"}.get(kind, kind)
            )
    return " or ".join(words) or "a value this field accepts"


def _bounds(node: Mapping[str, Any]) -> str:
    if "minimum" in node:
        return f" of at least {node['minimum']}"
    if "exclusiveMinimum" in node:
        return f" above {node['exclusiveMinimum']}"
    return ""


def _string_form(node: Mapping[str, Any]) -> str:
    pattern = node.get("pattern")
    if isinstance(pattern, str) and pattern.startswith("^[A-Za-z0-9][A-Za-z0-9_"):
        return _ID_FORM
    if isinstance(pattern, str):
        return f"text matching {pattern}"
    return "non-empty text" if node.get("minLength") else "text"


def _keys_everywhere(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every key path a schema names."""
    if not isinstance(node, dict):
        return
    for key, spec in (node.get("properties") or {}).items():
        yield (*path, key)
        yield from _keys_everywhere(spec, (*path, key))
    for option in node.get("anyOf") or []:
        yield from _keys_everywhere(option, path)
    yield from _keys_everywhere(node.get("items"), path)


def _key_suggestion(key: str, known: Sequence[str], schema: Mapping[str, Any]) -> str | None:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f"did you mean `{close[0]}`?"
    elsewhere = sorted({".".join(p) for p in _keys_everywhere(schema) if p[-1] == key})
    if elsewhere:
        return "did you mean " + " or ".join(f"`{p}`" for p in elsewhere) + "?"
    return None


def _mapping_form(field: str, value: Any, node: Mapping[str, Any]) -> str | None:
    """For a list given where a mapping is expected, the mapping it likely meant."""
    keys = list(node.get("required") or [])
    if not (isinstance(value, list) and keys and len(value) == len(keys)):
        return None
    pairs = ", ".join(
        f"{k}: {json.dumps(v, default=str)}" for k, v in zip(keys, value, strict=True)
    )
    return f"write `{field.rsplit('.', 1)[-1]}: {{{pairs}}}`"


def _schema_error_problems(
    error: jsonschema.ValidationError, root_schema: Mapping[str, Any], file_of: FileOf, kind: str
) -> list[Problem]:
    path = list(error.absolute_path)
    node: Mapping[str, Any] = error.schema if isinstance(error.schema, dict) else {}
    validator, instance = error.validator, error.instance
    if validator in ("anyOf", "oneOf") and error.context:
        deeper = [e for e in error.context if len(e.absolute_path) > len(error.absolute_path)]
        if deeper:  # the option of the value's type: its deepest problem names the mistake
            best = max(deeper, key=lambda e: len(e.absolute_path))
            return _schema_error_problems(best, root_schema, file_of, kind)
    if validator == "additionalProperties" and isinstance(instance, dict):
        known = list(node.get("properties") or {})
        return [
            Problem(
                file=file_of([*path, key]),
                field=_dotted([*path, key]),
                value=_shown(instance[key]),
                problem="unknown key",
                expected=None
                if (s := _key_suggestion(str(key), known, root_schema))
                else ("one of the keys " + ", ".join(known)),
                suggestion=s,
            )
            for key in instance
            if key not in known
        ]
    if validator == "required" and isinstance(instance, dict):
        properties = node.get("properties") or {}
        return [
            Problem(
                file=file_of(path),
                field=_dotted([*path, key]),
                problem="missing (required)",
                expected=_expected(properties.get(key, {})),
            )
            for key in node.get("required") or []
            if key not in instance
        ]
    field = _dotted(path)
    words = {
        "type": "not the right type",
        "enum": "not an allowed value",
        "const": "not the allowed value",
        "pattern": "not in the expected form",
        "minimum": "too small",
        "exclusiveMinimum": "too small",
        "minLength": "empty" if node.get("minLength") == 1 else "too short",
        "minItems": "empty" if node.get("minItems") == 1 else "too few items",
        "uniqueItems": "lists an item more than once",
    }
    expected = _expected(node)
    if validator == "uniqueItems":
        expected = "each item once"
    elif validator == "minItems":
        expected = f"at least {node.get('minItems')} item(s)"
    suggestion = _HINTS.get((kind, field))
    if validator == "type" and "object" in _types(node):
        suggestion = suggestion or _mapping_form(field, instance, node)
    return [
        Problem(
            file=file_of(path),
            field=field,
            value=_shown(instance),
            problem=words.get(str(validator), error.message),
            expected=expected,
            suggestion=suggestion,
        )
    ]


def _model_problems(
    data: Mapping[str, Any],
    schema: Mapping[str, Any],
    model: type[BaseModel],
    file_of: FileOf,
    kind: str,
) -> list[Problem]:
    """`data` against the model's schema (every structural mistake), then, when that holds,
    against the model itself (the rules across fields)."""
    validator = jsonschema.Draft202012Validator(schema)
    problems = [
        problem
        for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.path)))
        for problem in _schema_error_problems(error, schema, file_of, kind)
    ]
    if problems:
        return problems
    try:
        model(**data)
    except ValidationError as error:
        for item in error.errors():
            loc = [p for p in item["loc"] if isinstance(p, str | int)]
            value = item.get("input")
            problems.append(
                Problem(
                    file=file_of(loc),
                    field=_dotted(loc),
                    value=None if isinstance(value, dict) else _shown(value),
                    problem=str(item["msg"]).removeprefix("Value error, "),
                )
            )
    return problems


@cache
def _task_schema() -> dict[str, Any]:
    return plain_schema(TaskSpec, {})


@cache
def _condition_schema() -> dict[str, Any]:
    return plain_schema(ConditionSpec, {})


# The config: layers and attribution


def _sets(data: Mapping[str, Any], path: Sequence[str | int]) -> bool:
    node: Any = data
    for part in path:
        if isinstance(part, int):
            if not (isinstance(node, list) and part < len(node)):
                return False
        elif not (isinstance(node, Mapping) and part in node):
            return False
        node = node[part]
    return True


def _file_of(layers: Sequence[Layer]) -> FileOf:
    def file_of(path: Sequence[str | int]) -> str:
        for index in range(len(path), 0, -1):
            for name, data in reversed(layers):
                if _sets(data, path[:index]):
                    return name
        return layers[-1][0] if layers else "config"

    return file_of


def _unwrapped(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        return {}
    if data.get("kind") in WRAPPED_CONFIG_KINDS:
        inner = data.get("config")
        return dict(inner) if isinstance(inner, dict) else {}
    return data


def _shown_path(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _read_layer(path: Path, root: Path) -> tuple[Layer | None, Problem | None]:
    name = _shown_path(path, root)
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else load_yaml(text)
    except FileNotFoundError:
        return None, Problem(file=name, field="(file)", problem="no such file")
    except (OSError, ValueError, yaml.YAMLError) as error:
        detail = " ".join(str(error).split())
        return None, Problem(file=name, field="(file)", problem=f"cannot be read: {detail}")
    if data is not None and not isinstance(data, dict):
        return None, Problem(
            file=name,
            field="(file)",
            problem=f"holds a {type(data).__name__}",
            expected="a mapping of config keys",
        )
    return (name, _unwrapped(data or {})), None


def config_layers(
    files: Sequence[str | Path], root: Path, overrides: Mapping[str, Any] | None = None
) -> tuple[list[Layer], list[Problem]]:
    """The config files, in order, with `overrides` (the command line's values) last."""
    layers, problems = [], []
    for file in files:
        layer, problem = _read_layer(Path(file), root)
        if layer is not None:
            layers.append(layer)
        if problem is not None:
            problems.append(problem)
    if overrides:
        layers.append(("--config", dict(overrides)))
    return layers, problems


def project_layers(
    files: Sequence[str | Path], root: Path, overrides: Mapping[str, Any] | None = None
) -> tuple[list[Layer], list[Problem]]:
    """What Snakemake reads: the project's config/config.yaml, then each --configfile."""
    return config_layers([root / DEFAULT_CONFIG, *files], root, overrides)


def effective_config_layers(path: Path, root: Path) -> tuple[list[Layer], list[Problem]]:
    """The workflow's merged config (config.effective.json) as the files it names, with the
    merged values last (they hold the command line's); any other config file as itself."""
    layer, problem = _read_layer(path, root)
    try:
        wrapper = json.loads(path.read_text(encoding="utf-8")) if path.suffix == ".json" else {}
    except (OSError, ValueError):
        wrapper = {}
    if layer is None or not isinstance(wrapper, dict) or wrapper.get("kind") != EFFECTIVE_CONFIG:
        return ([layer] if layer else []), ([problem] if problem else [])
    sources = [Path(str(s)) for s in wrapper.get("sources") or []]
    layers, problems = config_layers([s for s in sources if s.is_file()], root)
    return [*layers, ("--config", layer[1])], problems


def merged_config(layers: Sequence[Layer]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for _, data in layers:
        merged = deep_merge(merged, data)
    return merged


def config_problems(
    layers: Sequence[Layer], merged: Mapping[str, Any] | None = None
) -> list[Problem]:
    """The merged config's problems (`merged`, or the layers merged), each attributed to the
    layer that set its key."""
    merged = merged_config(layers) if merged is None else merged
    return _model_problems(merged, config_schema(), ExperimentConfig, _file_of(layers), "config")


# The definition: tasks, conditions, prompt modules, catalog, taxonomy


def _default(key: str) -> Any:
    return ExperimentConfig.model_fields[key].default


def _text(merged: Mapping[str, Any], key: str) -> str:
    value = merged.get(key)
    return value if isinstance(value, str) and value else str(_default(key))


def _close(name: str, known: Sequence[str]) -> str | None:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None


def _mapping_file(path: Path, shown: str, expected: str) -> dict[str, Any] | Problem:
    """A YAML file's mapping, or the problem reading it."""
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        detail = " ".join(str(error).split())
        return Problem(file=shown, field="(file)", problem=f"cannot be read: {detail}")
    if not isinstance(data, dict):
        return Problem(file=shown, field="(file)", problem="holds no mapping", expected=expected)
    return data


def task_problems(
    tasks_dir: Path, task_id: str, root: Path
) -> tuple[list[Problem], TaskSpec | None]:
    """One task folder's problems, and its spec when it has none."""
    folder = tasks_dir / task_id
    shown = _shown_path(folder / "task.yaml", root)
    data = _mapping_file(folder / "task.yaml", shown, "task fields (docs/task-format.md)")
    if isinstance(data, Problem):
        return [data], None
    problems = _model_problems(data, _task_schema(), TaskSpec, lambda _: shown, "task.yaml")
    if data.get("id") != task_id and "id" in data:
        problems.append(
            Problem(
                file=shown,
                field="id",
                value=_shown(data.get("id")),
                problem="differs from the task's folder name",
                expected=_shown(task_id),
            )
        )
    if not (folder / "reference.png").is_file():
        render = f"veriharness render-reference {_shown_path(folder, root)}"
        problems.append(
            Problem(
                file=_shown_path(folder, root),
                field="reference.png",
                problem="missing",
                expected="the reference screenshot at the task's viewport",
                suggestion=f"write it with `{render}`"
                if (folder / "reference.html").is_file()
                else None,
            )
        )
    if problems:
        return problems, None
    try:
        return [], load_task(tasks_dir, task_id)
    except ConfigError as error:
        return [Problem(file=_shown_path(folder, root), field="(task)", problem=str(error))], None


def _task_ids(
    merged: Mapping[str, Any], tasks_dir: Path, root: Path, file_of: FileOf
) -> tuple[list[str], list[Problem]]:
    if not tasks_dir.is_dir():
        return [], [
            Problem(
                file=file_of(["tasks_dir"]),
                field="tasks_dir",
                value=_shown(str(merged.get("tasks_dir", _default("tasks_dir")))),
                problem="not a folder",
                expected="a folder of task folders, relative to the project root",
            )
        ]
    present = sorted(p.name for p in tasks_dir.iterdir() if (p / "task.yaml").is_file())
    tasks = merged.get("tasks", "all")
    if not isinstance(tasks, list):
        if not present:
            return [], [
                Problem(
                    file=file_of(["tasks_dir"]),
                    field="tasks_dir",
                    value=_shown(_shown_path(tasks_dir, root)),
                    problem="holds no task folder with a task.yaml",
                    expected="one folder per task (docs/task-format.md)",
                )
            ]
        return present, []
    problems = [
        Problem(
            file=file_of(["tasks", index]),
            field=f"tasks[{index}]",
            value=_shown(task),
            problem=f"no task {_shown_path(tasks_dir / str(task), root)}/task.yaml",
            suggestion=_close(str(task), present),
        )
        for index, task in enumerate(tasks)
        if str(task) not in present
    ]
    return [str(t) for t in tasks if str(t) in present], problems


class _AnyValue(Mapping[str, str]):
    """Every placeholder's value, for checking a module list's form without a task."""

    def __getitem__(self, key: str) -> str:
        return ""

    def __contains__(self, key: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _condition_problems(
    condition_id: str,
    where: tuple[str, str],
    conditions_dir: Path,
    prompts_dir: Path,
    root: Path,
    interactive: TaskSpec | None,
) -> list[Problem]:
    path = conditions_dir / f"{condition_id}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in conditions_dir.glob("*.yaml"))
        return [
            Problem(
                file=where[0],
                field=where[1],
                value=_shown(condition_id),
                problem=f"no condition file {_shown_path(path, root)}",
                suggestion=_close(condition_id, known),
            )
        ]
    shown = _shown_path(path, root)
    data = _mapping_file(path, shown, "a mapping of id, description and modules")
    if isinstance(data, Problem):
        return [data]
    problems = _model_problems(data, _condition_schema(), ConditionSpec, lambda _: shown, "cond")
    if "id" in data and data["id"] != condition_id:
        problems.append(
            Problem(
                file=shown,
                field="id",
                value=_shown(data["id"]),
                problem="differs from the file's name",
                expected=_shown(condition_id),
            )
        )
    modules = data.get("modules")
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        return problems
    known = sorted(p.stem for p in prompts_dir.glob("*.md"))
    missing = False
    for index, module in enumerate(modules):
        if not (prompts_dir / f"{module}.md").is_file():
            missing = True
            problems.append(
                Problem(
                    file=shown,
                    field=f"modules[{index}]",
                    value=_shown(module),
                    problem=f"no prompt module {_shown_path(prompts_dir / module, root)}.md",
                    suggestion=_close(module, known),
                )
            )
    if missing or problems:
        return problems
    spec = ConditionSpec(**data)
    lists = [spec.modules]
    if interactive is not None:
        try:
            lists.append(cell_modules(spec, interactive))
        except ConfigError as error:
            problems.append(
                Problem(
                    file=shown,
                    field="modules",
                    problem=str(error),
                    expected=f"one of {sorted(INTERACTIVE_TASK_MODULES)}",
                )
            )
    for listed in lists:
        try:
            assemble(prompts_dir, listed, _AnyValue())
        except PromptError as error:
            problems.append(Problem(file=shown, field="modules", problem=str(error)))
    return problems


def _file_problems(
    merged: Mapping[str, Any], key: str, root: Path, file_of: FileOf
) -> tuple[Path | None, list[Problem]]:
    value = _text(merged, key)
    path = root / value
    if path.is_file():
        return path, []
    return None, [
        Problem(
            file=file_of([key]),
            field=key,
            value=_shown(value),
            problem="no such file",
            expected="a file, relative to the project root",
        )
    ]


def check_definition(
    layers: Sequence[Layer], root: Path, merged: Mapping[str, Any] | None = None
) -> list[Problem]:
    """Every problem of the config `layers` make (or of `merged`, the layers only naming where
    each key was set) and of the tasks, conditions, prompt modules, catalog and taxonomy it
    names, each read as far as its own problems allow."""
    root = root.resolve()
    merged = _unwrapped(dict(merged_config(layers) if merged is None else merged))
    problems = config_problems(layers, merged)
    file_of = _file_of(layers)
    try:
        config: ExperimentConfig | None = ExperimentConfig(**merged)
    except (ValidationError, TypeError):
        config = None
    tasks_dir = root / _text(merged, "tasks_dir")
    ids, found = _task_ids(merged, tasks_dir, root, file_of)
    problems += found
    specs = []
    for task_id in ids:
        found, spec = task_problems(tasks_dir, task_id, root)
        problems += found
        specs.append(spec)
    interactive = next((s for s in specs if s is not None and s.interactive), None)
    conditions = merged.get("conditions", list(_default("conditions")))
    for index, condition in enumerate(conditions if isinstance(conditions, list) else []):
        where = (file_of(["conditions", index]), f"conditions[{index}]")
        problems += _condition_problems(
            str(condition),
            where,
            root / _text(merged, "conditions_dir"),
            root / _text(merged, "prompts_dir"),
            root,
            interactive,
        )
    catalog_path, found = _file_problems(merged, "model_catalog", root, file_of)
    problems += found
    if catalog_path is not None:
        shown = _shown_path(catalog_path, root)
        try:
            catalog = load_catalog(catalog_path)
        except CatalogError as error:
            problems.append(Problem(file=shown, field="(catalog)", problem=str(error)))
        else:
            problems += [
                Problem(
                    file=shown,
                    field=f"profiles[{i}].model",
                    value=_shown(p.provider.model),
                    problem="a placeholder",
                    expected="a real model name",
                )
                for i, p in enumerate(catalog.profiles)
                if is_placeholder_model(p.provider.model)
            ]
            if config is not None and (
                config.execution.max_usd or config.execution.max_usd_per_run
            ):
                problems += [
                    Problem(
                        file=file_of(["prices"]),
                        field=name.split(" ")[0],
                        problem="no price, and a spending cap needs one for every model",
                        expected="input, output, cache_read, cache_write (USD per million tokens)",
                    )
                    for name in missing_prices(config, catalog)
                ]
    taxonomy_path, found = _file_problems(merged, "taxonomy", root, file_of)
    problems += found
    if taxonomy_path is not None:
        try:
            load_taxonomy(taxonomy_path)
        except (OSError, ValueError, TypeError, yaml.YAMLError) as error:
            detail = " ".join(str(error).split())[:300]
            problems.append(
                Problem(
                    file=_shown_path(taxonomy_path, root),
                    field="(taxonomy)",
                    problem=f"cannot be read: {detail}",
                )
            )
    if config is not None:
        for index, answers in enumerate(config.external_answers):
            if answers.source == "folder" and not (root / str(answers.dir)).is_dir():
                problems.append(
                    Problem(
                        file=file_of(["external_answers", index, "dir"]),
                        field=f"external_answers[{index}].dir",
                        value=_shown(answers.dir),
                        problem="not a folder",
                        expected="a folder under the project "
                        "holding one <task>/answer.html per task",
                    )
                )
    return problems


def exit_on_problems(
    merged: Mapping[str, Any],
    configfiles: Sequence[str | Path],
    command_line: Sequence[str | Path],
    overrides: Mapping[str, Any] | None,
    root: Path,
) -> None:
    """The workflow's start: Snakemake's merged config and the definition it names checked;
    every problem printed on standard error, then exit 2 (no traceback, no schema dump).
    `configfiles` are all the files read, `command_line` those of `--configfile` (which override
    the Snakefile's own whatever their order), `overrides` the `--config` values."""
    given = {Path(f).resolve() for f in command_line}
    ordered = [
        *(f for f in configfiles if Path(f).resolve() not in given),
        *(f for f in configfiles if Path(f).resolve() in given),
    ]
    layers, problems = config_layers(ordered, root, overrides)
    problems += check_definition(layers, root, merged)
    if problems:
        report(problems, "snakemake")
        raise SystemExit(2)


def report(problems: Sequence[Problem], who: str) -> None:
    """Print each problem on its own line, and how many there are, on standard error."""
    for line in problem_lines(problems):
        print(line, file=sys.stderr)
    print(
        f"{who}: {len(problems)} problem(s) in the experiment's definition; nothing was run "
        "(docs/task-format.md describes task.yaml, workflow/schemas/config.schema.yaml the "
        "config)",
        file=sys.stderr,
    )
