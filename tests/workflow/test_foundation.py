"""The package's set-up files agree with each other."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from veriharness._util.programs import CLAUDE_CODE_VERSION

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[]", requirement, maxsplit=1)[0].lower()


def test_claude_version_pinned_once() -> None:
    assert _pyproject()["tool"]["veriharness"]["claude-code-version"] == CLAUDE_CODE_VERSION


def test_environment_yml_lists_every_pyproject_requirement_with_the_same_bounds() -> None:
    project = _pyproject()["project"]
    wanted = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        wanted.extend(extra)
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda_pins = {_name(r): r for r in pip_section if not r.startswith("-e")}
    for requirement in wanted:
        assert conda_pins.get(_name(requirement)) == requirement, requirement
    assert len(conda_pins) == len(wanted)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert f"\n{ci}\n" in readme


def test_every_registered_verb_imports_and_declares_arguments() -> None:
    import argparse
    import importlib

    from veriharness.cli import VERBS

    for name, verb in VERBS.items():
        module = importlib.import_module(f"veriharness.{verb.package}.verbs")
        suffix = name.replace("-", "_")
        add, run = getattr(module, f"add_{suffix}_arguments"), getattr(module, f"run_{suffix}")
        add(argparse.ArgumentParser())
        assert callable(run)
        # A verbs module holds only its package's verbs: two functions a verb, nothing else.
        verbs_of_package = [v for v, of in VERBS.items() if of.package == verb.package]
        expected = {
            f"{kind}_{v.replace('-', '_')}{end}"
            for v in verbs_of_package
            for kind, end in (("add", "_arguments"), ("run", ""))
        }
        assert set(module.__all__) == expected, (name, module.__all__)


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_python_code_is_ruff_clean(command: list[str]) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "src", "tests", "bench"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]


def test_workflow_files_are_snakefmt_clean() -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "Snakefile", "workflow/rules"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


def test_stage_packages_keep_their_import_contracts() -> None:
    """The layers and the forbidden imports declared in pyproject.toml ([tool.importlinter])."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]
    assert "0 broken" in result.stdout


def _runtime(path: Path) -> str:
    """A module's text without its `if TYPE_CHECKING:` blocks, which never run (import-linter
    still sees those imports, so they keep to the layers)."""
    return re.sub(
        r"^if TYPE_CHECKING:.*\n(?:[ \t]+.*\n|\n)*", "", path.read_text(), flags=re.MULTILINE
    )


def test_the_import_layers_hold_every_package_with_no_exception_and_no_hidden_cycle() -> None:
    """No contract ignores an import, every package sits in a layer, and the package imports
    itself inside a function only where the module says why (not to get round a cycle)."""
    contracts = _pyproject()["tool"]["importlinter"]["contracts"]
    assert [c["name"] for c in contracts if c.get("ignore_imports")] == []
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    declared = {name.strip() for layer in layers for name in layer.split("|")}
    source = ROOT / "src" / "veriharness"
    packages = {f"veriharness.{p.name}" for p in source.iterdir() if (p / "__init__.py").is_file()}
    assert packages - declared == set()
    deferred = sorted(
        path.relative_to(source).as_posix()
        for path in source.rglob("*.py")
        if re.search(r"^[ \t]+(from|import) veriharness\b", _runtime(path), re.MULTILINE)
        # A verb loads its own modules when it runs, so a job imports only its stage.
        and path.name != "verbs.py"
    )
    # The model annotator's client (httpx, the image code) is loaded only when a model annotates;
    # the offline model loads its image analysis (scipy) on its first CallMLLM request.
    assert deferred == ["annotate/command.py", "offline/server.py"]


def test_the_package_type_checks_strictly() -> None:
    """mypy --strict over src/veriharness and every test body, as configured in pyproject.toml."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]
