"""`load_yaml` reads every YAML file the project ships as PyYAML's safe loader does, and a
broken document raises PyYAML's own error, which shows the line and names the fault."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from veriharness._util.yaml_text import load_yaml

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(
    path
    for folder in ("config", "conditions", "prompts", "tasks", "workflow", "profiles")
    for path in (ROOT / folder).rglob("*.y*ml")
)


def test_every_shipped_yaml_file_reads_as_the_safe_loader_reads_it() -> None:
    assert len(SHIPPED) >= 10, SHIPPED  # config, conditions, tasks, schemas, profiles
    for path in SHIPPED:
        text = path.read_text(encoding="utf-8")
        assert load_yaml(text) == yaml.safe_load(text), path


def test_the_scalars_yaml_1_1_resolves_come_out_the_same() -> None:
    text = "d: 2024-01-01\no: 0o17\nn: 1_000\nb: yes\nf: .inf\ns: '007'\nnull_value: ~\n"
    assert load_yaml(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("\tkey: 1\n", "found character '\\t' that cannot start any token"),
        ("a: [1, 2\nb: 3\n", "expected ',' or ']', but got ':'"),
    ],
)
def test_a_broken_document_raises_pyyamls_error_with_its_line(text: str, named: str) -> None:
    with pytest.raises(yaml.YAMLError) as raised:
        load_yaml(text)
    message = str(raised.value)
    assert named in message and "line 1" in message and "^" in message
