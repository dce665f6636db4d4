"""check-experiment through the real command: git refusal, model lookups, rerun from record."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from experiment.test_config import git, make_project
from support.cli import veriharness
from veriharness.experiment.offline_model import OFFLINE_AGENT_MODEL


def vh(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return veriharness(*args, cwd=None, env=env, timeout=120)


def check(
    root: Path, *extra: str, config: str = "config/config.yaml", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return vh(
        "check-experiment",
        "--config",
        str(root / config),
        "--project-root",
        str(root),
        "--out",
        str(root / "results" / "t" / "experiment.json"),
        *extra,
        env=env,
    )


def test_writes_a_complete_experiment_record(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    proc = check(root)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((root / "results" / "t" / "experiment.json").read_text())
    assert record["kind"] == "experiment_record"
    assert record["config"]["execution"]["results_dir"] == "results"  # defaults written out
    assert record["config"]["agent"]["model"] == OFFLINE_AGENT_MODEL
    assert set(record["cells"]) == {"b3-absent", "b3-present"}
    assert set(record["cells"]["b3-absent"]) == {"alpha", "beta"}
    assert len({h for c in record["cells"].values() for h in c.values()}) == 4
    assert record["matrix"] == {
        "conditions": ["b3-absent", "b3-present"],
        "tasks": ["alpha", "beta"],
        "replicates": 1,
        "external": ["external:reference"],  # the default set: the tasks' own references
    }
    assert record["provenance"]["uncommitted_changes"] is False
    assert record["provenance"]["git_commit"] == git(root, "rev-parse", "HEAD").strip()
    assert record["offline"] is True
    assert record["model_check"]["checked"] is True
    assert record["shared"]["tool_schema_version"] == "callmllm-request-v0.3"


def test_the_declared_analysis_is_recorded_and_a_design_that_cannot_reach_alpha_is_warned(
    tmp_path: Path,
) -> None:
    root = make_project(tmp_path)  # two tasks
    proc = check(root)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((root / "results" / "t" / "experiment.json").read_text())
    assert record["config"]["analysis"]["primary"] == ["metric_ssim"]
    assert (
        "check-experiment: WARNING: the primary family (1 outcome(s)) cannot reach alpha 0.05 "
        "with 2 task(s): the smallest possible p is 0.5 and the smallest p(Holm) 0.5; it needs "
        "at least 6 tasks" in proc.stderr
    )
    assert "the secondary family (8 outcome(s)) cannot reach alpha 0.05" in proc.stderr
    hashes = record["cells"]
    loose = check(root, "--config-json", '{"analysis": {"alpha": 0.9, "secondary": []}}')
    assert loose.returncode == 0 and "WARNING" not in loose.stderr, loose.stderr
    again = json.loads((root / "results" / "t" / "experiment.json").read_text())
    assert again["cells"] == hashes  # declaring outcomes changes no run's identity
    bad = check(root, "--config-json", '{"analysis": {"primary": []}}')
    assert bad.returncode == 2 and "analysis.primary" in bad.stderr, bad.stderr


def test_record_fed_back_as_config_reproduces_identity(tmp_path: Path) -> None:
    root = make_project(
        tmp_path, config={"experiment": "t", "replicates": 2, "execution": {"retries": 3}}
    )
    assert check(root).returncode == 0
    first = json.loads((root / "results" / "t" / "experiment.json").read_text())
    (root / "rerun.json").write_text(json.dumps(first))
    git(root, "add", "rerun.json")
    git(root, "commit", "-q", "-m", "keep the record")
    # Execution settings given on top of the record change the record, never the identity.
    proc = check(
        root, "--config-json", '{"execution": {"retries": 1, "debug": true}}', config="rerun.json"
    )
    assert proc.returncode == 0, proc.stderr
    second = json.loads((root / "results" / "t" / "experiment.json").read_text())
    assert second["identity_hash"] == first["identity_hash"]
    assert second["cells"] == first["cells"]
    assert second["execution"]["retries"] == 1
    assert second["config"]["agent"] == first["config"]["agent"]
    proc = check(root, "--config-json", '{"agent": {"max_turns": "many"}}', config="rerun.json")
    assert proc.returncode == 2 and "agent.max_turns" in proc.stderr and "'many'" in proc.stderr


def test_a_start_that_changes_the_record_keeps_the_earlier_one_for_record_diff(
    tmp_path: Path,
) -> None:
    root = make_project(tmp_path)
    record = root / "results" / "t" / "experiment.json"
    kept = root / "results" / "t" / "records"
    assert check(root).returncode == 0
    first = record.read_bytes()
    same = check(root)  # nothing changed but the time: the record is left as it is
    assert same.returncode == 0 and "the earlier one is kept" not in same.stdout, same.stdout
    assert record.read_bytes() == first and not kept.exists()

    task = root / "tasks" / "alpha" / "task.yaml"
    task.write_text(task.read_text().replace("A small test page.", "A smaller test page."))
    git(root, "commit", "-qam", "edit a task")
    changed = check(root)
    assert changed.returncode == 0, changed.stderr
    earlier = kept / "experiment-1.json"
    assert earlier.read_bytes() == first
    told = f"the earlier one is kept as {earlier} (`veriharness record diff {earlier} {record}`"
    assert told in changed.stdout, changed.stdout
    diff = vh("record", "diff", str(earlier), str(record))
    assert diff.returncode == 1, diff.stderr
    assert diff.stdout.startswith("hashed   cells.b3-absent.alpha: "), diff.stdout
    assert "recorded provenance.git_commit: " in diff.stdout
    assert vh("record", "diff", str(record), str(record)).returncode == 0

    second = record.read_bytes()
    assert check(root, "--config-json", '{"execution": {"retries": 3}}').returncode == 0
    assert (kept / "experiment-2.json").read_bytes() == second
    assert sorted(p.name for p in kept.iterdir()) == ["experiment-1.json", "experiment-2.json"]


def test_a_task_folder_the_manifest_does_not_list_is_warned_at_the_start(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    manifest = {"name": "mine", "description": "Two.", "version": "1", "tasks": ["alpha", "gamma"]}
    (root / "tasks" / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    git(root, "add", ".")
    git(root, "commit", "-qm", "a manifest")
    proc = check(root)
    assert proc.returncode == 0, proc.stderr
    listed = root / "tasks" / "manifest.yaml"
    assert (
        f"check-experiment: WARNING: {listed}: tasks lists 2 task(s) but {root / 'tasks' / 'beta'} "
        "is a task folder too; add 'beta' to its tasks" in proc.stderr
    )
    assert f"{listed}: tasks lists 'gamma', which has no folder" in proc.stderr
    manifest["tasks"] = ["alpha", "beta"]
    listed.write_text(yaml.safe_dump(manifest))
    git(root, "commit", "-qam", "the manifest lists both")
    assert "manifest.yaml" not in check(root).stderr


def test_uncommitted_inputs_are_refused_and_named_unless_allowed(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    with open(root / "prompts" / "b3-verification-v0.2.md", "a") as handle:
        handle.write("\nA late note.\n")
    (root / "tasks" / "alpha" / "notes.txt").write_text("untracked")
    proc = check(root)
    assert proc.returncode == 2
    assert "prompts/b3-verification-v0.2.md" in proc.stderr
    assert "tasks/alpha/notes.txt" in proc.stderr
    assert not (root / "results" / "t" / "experiment.json").exists()
    proc = check(root, "--allow-uncommitted")
    assert proc.returncode == 0, proc.stderr
    record = json.loads((root / "results" / "t" / "experiment.json").read_text())
    assert record["provenance"]["uncommitted_changes"] is True
    assert record["execution"]["allow_uncommitted"] is True
    assert "tasks/alpha/notes.txt" in record["provenance"]["git_dirty_files"]


def test_inputs_git_cannot_vouch_for_are_refused_and_named(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    # A config file kept outside the project starts: the record holds every value it set (P-58).
    outside = tmp_path / "my-experiment.yaml"
    outside.write_text((root / "config" / "config.yaml").read_text())
    start = ("--project-root", str(root), "--out", str(root / "results" / "t" / "experiment.json"))
    proc = vh("check-experiment", "--config", str(outside), *start)
    assert proc.returncode == 0, proc.stderr
    # Any other input outside it is refused, with what to do.
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text((root / "config" / "model-catalog.offline.yaml").read_text())
    outside.write_text(f"{outside.read_text()}\nmodel_catalog: {catalog}\n")
    proc = vh("check-experiment", "--config", str(outside), *start)
    assert proc.returncode == 2
    assert (
        f"{catalog} (outside the project, so not under its git: move it under the project and "
        "commit it)" in proc.stderr
    )
    assert "`--config allow_uncommitted=true` on the snakemake command line" in proc.stderr
    (root / ".gitignore").write_text("*.tmp\n")
    git(root, "add", ".gitignore")
    git(root, "commit", "-qm", "ignore tmp files")
    (root / "tasks" / "alpha" / "scratch.tmp").write_text("ignored, yet hashed with the task")
    proc = check(root)
    assert proc.returncode == 2 and "tasks/alpha/scratch.tmp" in proc.stderr


def test_a_project_outside_git_is_refused(tmp_path: Path) -> None:
    root = make_project(tmp_path, commit=False)
    proc = check(root)
    assert proc.returncode == 2 and "not a git repository" in proc.stderr


def test_offline_names_must_be_the_offline_models(tmp_path: Path) -> None:
    root = make_project(tmp_path, config={"experiment": "t", "agent": {"model": "claude-x"}})
    proc = check(root)
    assert proc.returncode == 2
    assert "agent model 'claude-x'" in proc.stderr and OFFLINE_AGENT_MODEL in proc.stderr
    assert check(root, "--skip-model-check").returncode == 0


def test_placeholder_model_in_catalog_is_refused(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    path = root / "config" / "model-catalog.offline.yaml"
    path.write_text(path.read_text().replace("veriharness-offline-vision-1", "TODO"))
    proc = check(root, "--allow-uncommitted", "--skip-model-check")
    assert proc.returncode == 2
    assert "profile 'default' has a placeholder model 'TODO'" in proc.stderr


class _Provider(BaseHTTPRequestHandler):
    known = {
        "/v1/models/agent-model-1": "agent-model-1-20260101",
        "/v1/models/vision-b": "vision-b",
        "/models/vision-a": "vision-a",
    }
    seen: list[tuple[str, dict[str, str]]] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.seen.append((self.path, dict(self.headers)))
        keyed = (
            self.headers.get("x-api-key") == "agent-secret"
            and self.headers.get("anthropic-version")
        ) or (self.headers.get("Authorization") == "Bearer vision-secret")
        body = json.dumps({"id": self.known[self.path]}) if self.path in self.known else "{}"
        self.send_response(200 if self.path in self.known and keyed else 404)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def provider() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Provider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def _real_project(tmp_path: Path, vision_model: str) -> Path:
    root = make_project(
        tmp_path,
        config={
            "experiment": "t",
            "agent": {
                "endpoint": "gateway",
                "base_url": "${TEST_GATEWAY}",
                "model": "agent-model-1",
                "api_key_env": "TEST_AGENT_KEY",
            },
            "model_catalog": "config/catalog.yaml",
        },
    )
    catalog = {
        "profiles": [
            {
                "name": "default",
                "description": "Reads screenshots.",
                "provider": {
                    "api_style": "openai-chat",
                    "base_url": "${TEST_VISION}",
                    "model": vision_model,
                    "api_key_env": "TEST_VISION_KEY",
                },
            },
            {
                "name": "second",
                "description": "A second reader.",
                "provider": {
                    "api_style": "anthropic-messages",
                    "base_url": "${TEST_GATEWAY}",
                    "model": "vision-b",
                    "api_key_env": "TEST_AGENT_KEY",
                },
            },
        ]
    }
    (root / "config" / "catalog.yaml").write_text(yaml.safe_dump(catalog))
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "real catalog")
    return root


def test_real_model_names_are_looked_up_with_the_provider(tmp_path: Path, provider: str) -> None:
    env = {
        "TEST_GATEWAY": provider,
        "TEST_VISION": provider,
        "TEST_AGENT_KEY": "agent-secret",
        "TEST_VISION_KEY": "vision-secret",
    }
    root = _real_project(tmp_path, "vision-a")
    proc = check(root, env=env)
    assert proc.returncode == 0, proc.stderr
    text = (root / "results" / "t" / "experiment.json").read_text()
    record = json.loads(text)
    assert record["model_check"]["agent_model"] == "agent-model-1-20260101"
    assert record["provenance"]["resolved_models"]["agent"] == "agent-model-1-20260101"
    assert record["offline"] is False
    unchecked = check(root, "--skip-model-check", env=env)
    assert unchecked.returncode == 0, unchecked.stderr
    skipped = json.loads((root / "results" / "t" / "experiment.json").read_text())
    assert skipped["model_check"] == {"checked": False}
    assert skipped["provenance"]["resolved_models"] == {"agent": None}  # not the requested name
    for secret in ("agent-secret", "vision-secret", provider):
        assert secret not in text + proc.stdout + proc.stderr


def test_unknown_model_is_named_with_its_profile(tmp_path: Path, provider: str) -> None:
    env = {
        "TEST_GATEWAY": provider,
        "TEST_VISION": provider,
        "TEST_AGENT_KEY": "agent-secret",
        "TEST_VISION_KEY": "vision-secret",
    }
    root = _real_project(tmp_path, "vision-missing")
    proc = check(root, env=env)
    assert proc.returncode == 2
    assert "model 'vision-missing' of profile 'default' (openai-chat)" in proc.stderr
    assert "HTTP 404" in proc.stderr and provider not in proc.stderr
    proc = check(root, env={**env, "TEST_VISION_KEY": ""})
    assert proc.returncode == 2 and "TEST_VISION_KEY is not set" in proc.stderr


def test_a_capped_real_experiment_must_price_every_model(tmp_path: Path, provider: str) -> None:
    env = {
        "TEST_GATEWAY": provider,
        "TEST_VISION": provider,
        "TEST_AGENT_KEY": "agent-secret",
        "TEST_VISION_KEY": "vision-secret",
    }
    root = _real_project(tmp_path, "vision-a")
    price = {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}
    capped = json.dumps({"execution": {"max_usd": 20}, "prices": {"profiles": {"second": price}}})
    proc = check(root, "--config-json", capped, env=env)
    assert proc.returncode == 2
    assert "execution.max_usd 20" in proc.stderr
    assert "prices.models.agent-model-1 (the agent model)" in proc.stderr
    assert "prices.profiles.default (model catalog profile)" in proc.stderr
    assert "prices.profiles.second" not in proc.stderr
    priced = {"models": {"agent-model-1": price}, "profiles": {"default": price, "second": price}}
    full = json.dumps({"execution": {"max_usd": 20}, "prices": priced})
    proc = check(root, "--config-json", full, env=env)
    assert proc.returncode == 0, proc.stderr
    # Without a cap an unpriced model is allowed (its requests get no cost).
    assert check(root, env=env).returncode == 0


def test_network_none_is_refused_where_bwrap_cannot_make_a_network_namespace(
    tmp_path: Path,
) -> None:
    """A machine whose bwrap may not create namespaces (as some clusters set it up): a fake
    bwrap first on PATH answers as the real one does there."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    (fake / "bwrap").chmod(0o755)
    root = make_project(tmp_path / "p")
    env = {"PATH": f"{fake}:{os.environ['PATH']}"}
    proc = check(root, env=env)
    assert proc.returncode != 0
    assert "agent.network is 'none'" in proc.stderr
    assert "No permissions to create new namespace" in proc.stderr
    assert "agent.network: open" in proc.stderr and "Traceback" not in proc.stderr
    assert not (root / "results" / "t" / "experiment.json").exists()
    opened = make_project(tmp_path / "open", config={"agent": {"network": "open"}})
    assert check(opened, env=env).returncode == 0
