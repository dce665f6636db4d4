"""Importing one task's external answer into a run folder (`veriharness import-answer`).

Design notes:

- The run folder is `<experiment>/external:<name>/<task>/r1/`: one replicate, since an external
  answer is a fixed file, not a sample. Its `answer/` is a copy, so the render and score stages
  read it exactly as they read a session's answer, and later edits of the source cannot change a
  scored run unnoticed: `outcome.json` records the sha256 of every file imported and their digest.
- A task the set has no answer for is not an error: the run gets status `missing_answer` with the
  path that was looked for, an empty `answer/`, and is listed as such in the tables. The rest of
  the set is scored as usual.
- A folder set copies everything under `<dir>/<task>/` (the audit flags files outside `assets/`);
  the task-references set copies `reference.html` as `answer.html` and the task's `assets/`.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, NamedTuple

from veriharness._util.hashing import sha256_file, sha256_json
from veriharness.experiment.config import (
    EXTERNAL_PREFIX,
    ConfigError,
    ExperimentConfig,
    ExternalAnswers,
)
from veriharness.runfolder.outcome import EXTERNAL_OUTCOME, ExternalOutcome

__all__ = [
    "AnswerSource",
    "answer_source",
    "external_set",
    "external_answer_files",
    "import_answer",
]


class AnswerSource(NamedTuple):
    """Where one task's external answer is: its HTML file and the files that travel with it
    (relative path in `answer/` -> source path)."""

    html: Path
    extra: dict[str, Path]


def external_set(config: ExperimentConfig, name: str) -> ExternalAnswers:
    for answers in config.external_answers:
        if answers.name == name:
            return answers
    known = [a.name for a in config.external_answers]
    raise ConfigError(f"--set {name!r} is not one of external_answers {known}")


def _files_under(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    return {
        p.relative_to(folder).as_posix(): p
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    }


def answer_source(answers: ExternalAnswers, root: Path, tasks_dir: Path, task: str) -> AnswerSource:
    """The files of `task`'s answer in the set (the HTML file may not exist)."""
    if answers.source == "task_references":
        folder = tasks_dir / task
        assets = {f"assets/{k}": v for k, v in _files_under(folder / "assets").items()}
        return AnswerSource(folder / "reference.html", assets)
    folder = root / str(answers.dir) / task
    extra = {k: v for k, v in _files_under(folder).items() if k != "answer.html"}
    return AnswerSource(folder / "answer.html", extra)


def external_answer_files(config: dict[str, Any], name: str, task: str) -> list[str]:
    """For the workflow (paths relative to the project root): the files `import-answer` copies
    for one task of a set; none when the set has no answer for the task (the import then records
    it as missing, and reruns when the answer appears)."""
    listed = {a["name"]: a for a in config.get("external_answers") or []}
    if name not in listed:
        raise ConfigError(f"external:{name} is not one of external_answers {sorted(listed)}")
    answers = ExternalAnswers(**listed[name])
    source = answer_source(answers, Path("."), Path(config["tasks_dir"]), task)
    if not source.html.is_file():
        return []
    return [str(source.html), *(str(p) for p in source.extra.values())]


def import_answer(
    answers: ExternalAnswers, root: Path, tasks_dir: Path, task: str, run_dir: Path
) -> ExternalOutcome:
    """Copy the answer into `run_dir/answer/` and write `run_dir/outcome.json`; returns it."""
    source = answer_source(answers, root, tasks_dir, task)
    answer_dir = run_dir / "answer"
    if answer_dir.exists():
        shutil.rmtree(answer_dir)
    answer_dir.mkdir(parents=True)
    present = source.html.is_file()
    files: dict[str, str] = {}
    if present:
        for relative, path in {"answer.html": source.html, **source.extra}.items():
            target = answer_dir / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            files[relative] = sha256_file(target)
    shown_source = (
        f"{tasks_dir.as_posix()}/<task>/reference.html"
        if answers.source == "task_references"
        else f"{answers.dir}/<task>/answer.html"
    )
    outcome = ExternalOutcome(
        status="ok" if present else "missing_answer",
        set=answers.name,
        condition=EXTERNAL_PREFIX + answers.name,
        task=task,
        source=answers.source,
        source_path=shown_source,
        answer_present=present,
        files=files,
        answer_sha256=sha256_json(files) if present else None,
        error=None if present else f"the set has no answer for this task ({source.html})",
    )
    EXTERNAL_OUTCOME.write(run_dir, outcome)
    return outcome
