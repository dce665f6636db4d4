"""No module outside `runfolder/` parses a run-folder file itself: each reads through its
run-folder module (the models and the lenient reading are there, once).

The check reads the package's source: a call that parses (`json.load(s)`,
`model_validate_json`, `read_text`, `read_bytes`, or the old helpers' names) and whose own text
names a run file is reported with its place.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "veriharness"
RUN_FILES = (
    "run.json",
    "outcome.json",
    "mllm_trace.jsonl",
    "agent_requests.jsonl",
    "transcript.jsonl",
    "render.json",
    "dom.json",
    "audit.json",
    "metrics.json",
    "spend.jsonl",
    "budget_stop.json",
    "inferred_tags.json",
    "attempt.json",
    "finished.json",
    "preregistration.json",
)
PARSERS = {
    "load",
    "loads",
    "model_validate_json",
    "read_text",
    "read_bytes",
    "read_jsonl",
    "load_json",
    "_read_json",
}


def _name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def raw_reads(source: str) -> list[tuple[int, str]]:
    """The parsing calls of `source` whose text names a run file: (line, file)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _name(node) in PARSERS:
            text = ast.get_source_segment(source, node) or ""
            found += [
                (node.lineno, name)
                for name in RUN_FILES
                if f'/{name}"' in text or f'"{name}"' in text
            ]
    return found


def test_no_module_outside_runfolder_parses_a_run_file() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("runfolder/"):
            continue
        for line, name in raw_reads(path.read_text(encoding="utf-8")):
            offenders.append(f"{relative}:{line} parses {name}")
    assert offenders == []


def test_the_check_finds_the_forms_a_raw_read_takes() -> None:
    source = "\n".join(
        [
            'a = json.loads((run_dir / "outcome.json").read_text(encoding="utf-8"))',
            'b = Model.model_validate_json((run / "render" / "dom.json").read_bytes())',
            'c = read_jsonl(run_dir / "mllm_trace.jsonl", "mllm_trace.jsonl", [])',
            'd = (run_dir / "answer" / "answer.html").read_text()',
            "e = OUTCOME.read(run_dir, errors)",
        ]
    )
    assert {line for line, _ in raw_reads(source)} == {1, 2, 3}
