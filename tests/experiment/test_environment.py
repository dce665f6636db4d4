"""Environment facts: resolved from what the machine offers, alike in every condition, refused
when not true, and the stated command works inside a session's sandbox."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from PIL import Image

from veriharness._util.programs import find_bwrap
from veriharness.agent.isolation import sandboxed
from veriharness.experiment.config import ConfigError, load_config
from veriharness.experiment.definition import Definition, cell_identity, load_definition
from veriharness.experiment.environment import NETWORK_VALUES
from veriharness.experiment.prompts import SEPARATOR, PromptError, load_module

ROOT = Path(__file__).resolve().parents[2]
ENV, B3 = "env-facts-v0.1", "b3-verification-v0.2"


def _definition(root: Path = ROOT, **overrides: object) -> Definition:
    config = load_config(root / "config" / "config.yaml", {"allow_uncommitted": True, **overrides})
    return load_definition(config, root)


def _module(identity: dict[str, Any], module_id: str) -> dict[str, Any]:
    return next(m for m in identity["prompts"]["modules"] if m["id"] == module_id)


def test_the_example_conditions_share_the_facts_and_differ_by_exactly_the_b3_block() -> None:
    defn = _definition()
    b3 = load_module(ROOT / "prompts", B3).template
    for task in defn.task_ids:
        absent, absent_prompt = cell_identity(defn, "b3-absent", task)
        present, present_prompt = cell_identity(defn, "b3-present", task)
        facts_absent = next(m for m in absent_prompt.modules if m.id == ENV)
        facts_present = next(m for m in present_prompt.modules if m.id == ENV)
        assert facts_absent.text.encode() == facts_present.text.encode()
        assert _module(absent, ENV) == _module(present, ENV)
        assert present_prompt.text == absent_prompt.text.rstrip("\n") + SEPARATOR + b3 + "\n"
        width, height = Image.open(ROOT / "tasks" / task / "reference.png").size
        assert f"--window-size={width},{height} " in facts_absent.text
        assert _module(absent, ENV)["value"]["NETWORK"] == NETWORK_VALUES["none"]


def test_the_facts_follow_the_run_network_and_change_the_identity() -> None:
    closed, _ = cell_identity(_definition(), "b3-absent", "article")
    opened, prompt = cell_identity(_definition(agent={"network": "open"}), "b3-absent", "article")
    assert f"Network access: {NETWORK_VALUES['open']}." in prompt.text
    assert _module(closed, ENV)["resolved_sha256"] != _module(opened, ENV)["resolved_sha256"]


def test_a_chromium_the_sandbox_cannot_show_is_refused_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private = tmp_path / "chrome"
    private.write_text("#!/bin/sh\n")
    private.chmod(0o755)
    monkeypatch.setenv("VERIHARNESS_CHROMIUM", str(private))
    with pytest.raises(PromptError, match=r"\{\{CHROMIUM\}\}.*" + re.escape(str(private))):
        cell_identity(_definition(), "b3-absent", "article")
    # Without the sandbox the session runs the machine's programs, so the path is the fact.
    _, prompt = cell_identity(
        _definition(agent={"isolation": "none", "network": "open"}), "b3-absent", "article"
    )
    assert f"installed as `{private}`" in prompt.text
    monkeypatch.setenv("VERIHARNESS_CHROMIUM", str(tmp_path / "missing"))
    with pytest.raises(PromptError, match=r"\{\{CHROMIUM\}\} cannot be resolved: Chromium not"):
        cell_identity(_definition(), "b3-absent", "article")


def test_a_viewport_other_than_the_reference_size_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "project"
    for part in ("config", "prompts", "conditions"):
        shutil.copytree(ROOT / part, root / part)
    shutil.copytree(ROOT / "tasks" / "signup-form", root / "tasks" / "signup-form")
    spec = root / "tasks" / "signup-form" / "task.yaml"
    spec.write_text(
        yaml.safe_dump(
            yaml.safe_load(spec.read_text()) | {"viewport": {"width": 400, "height": 844}}
        )
    )
    (root / "config" / "config.yaml").write_text("tasks: [signup-form]\n")
    defn = _definition(root)
    with pytest.raises(PromptError, match=r"viewport 400x844 .* reference\.png is 390x844"):
        cell_identity(defn, "b3-absent", "signup-form")
    # A condition without the facts module needs no fact.
    (root / "conditions" / "plain.yaml").write_text(
        "id: plain\ndescription: B1 and B2 only.\n"
        "modules: [b1-callmllm-v0.1, b2-image-to-code-v0.1]\n"
    )
    plain = _definition(root, conditions=["plain"], compare=None)
    assert cell_identity(plain, "plain", "signup-form")[1].text


def test_a_condition_naming_an_unknown_module_is_refused_with_the_field(tmp_path: Path) -> None:
    root = tmp_path / "project"
    for part in ("config", "prompts", "conditions", "tasks"):
        shutil.copytree(ROOT / part, root / part)
    (root / "conditions" / "b3-absent.yaml").write_text(
        "id: b3-absent\ndescription: x\nmodules: [b1-callmllm-v0.1, env-facts-v9]\n"
    )
    with pytest.raises(ConfigError, match=r"condition 'b3-absent'.*modules.*'env-facts-v9'"):
        _definition(root)


def test_the_stated_command_makes_a_picture_of_the_viewport_inside_the_sandbox(
    tmp_path: Path,
) -> None:
    """What the facts say is what a session without network really has: the command line, run
    as given in bubblewrap with its own network namespace, writes a PNG of the task's size."""
    _, prompt = cell_identity(_definition(), "b3-absent", "signup-form")
    facts = next(m for m in prompt.modules if m.id == ENV).text
    command = next(line.strip() for line in facts.splitlines() if "--screenshot=" in line)
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    (workspace / "answer.html").write_text("<body style='background:#369'><h1>Sign up</h1>")
    wrapped = sandboxed(
        ["sh", "-c", command],
        bwrap=find_bwrap(),
        readable=[],
        writable=[workspace, home],
        workdir=workspace,
        home=home,
        own_network=True,
    )
    done = subprocess.run(
        wrapped, capture_output=True, text=True, timeout=120, env={"PATH": os.environ["PATH"]}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with Image.open(workspace / "page.png") as picture:
        assert picture.size == (390, 844)
        assert picture.convert("RGB").getpixel((5, 400)) == (0x33, 0x66, 0x99)
