"""A session plan for the embedded offline model, as `plan_session` would make it from the default
config and the offline catalog (plus `extra_profiles`, YAML list items): for tests that run one
real `claude` session without Snakemake."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from veriharness._util.programs import find_claude
from veriharness.agent.plan import SessionPlan
from veriharness.experiment.config import SessionLimits, SnapshotLimits
from veriharness.experiment.offline_model import OFFLINE_AGENT_MODEL

ROOT = Path(__file__).resolve().parents[2]
TASK = "Recreate the screenshot `reference.png` as a single answer.html in the working directory.\n"


def offline_plan(
    tmp_path: Path, system_prompt: str, extra_profiles: str = "", **overrides: Any
) -> SessionPlan:
    run_dir = tmp_path / "results" / "exp" / "cond" / "task" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "system_prompt.md").write_text(system_prompt)
    (run_dir / "run.json").write_text("{}")
    (tmp_path / "results" / "exp" / "experiment.json").write_text("{}")
    catalog = tmp_path / "model-catalog.planted.yaml"
    catalog.write_text((ROOT / "config/model-catalog.offline.yaml").read_text() + extra_profiles)
    fields: dict[str, Any] = dict(
        run_dir=run_dir,
        reference=ROOT / "tasks" / "landing-page" / "reference.png",
        system_prompt=run_dir / "system_prompt.md",
        catalog=catalog,
        taxonomy=ROOT / "prompts" / "taxonomy" / "capabilities-v0.1.yaml",
        claude=find_claude(),
        endpoint="offline",
        base_url=None,
        api_key_env="ANTHROPIC_API_KEY",
        model=OFFLINE_AGENT_MODEL,
        max_turns=20,
        wall_clock_seconds=300,
        allowed_tools=["Read", "Write", "Edit", "Bash", "Glob", "Grep", "mcp__mllm__call"],
        tool_search=False,
        isolation="bwrap",
        network="none",
        allow_server_tools=(),
        limits=SessionLimits(),
        offline_profiles=True,
        workspace_root=tmp_path / "workspaces",
        keep_workspace=False,
        snapshots=SnapshotLimits(),
        keep_call_images=True,
        log_model_requests=True,
        project=ROOT,
        label="boundary",
        infra_retries=0,
        api_retries=None,
        pace=True,
    )
    return SessionPlan(**(fields | overrides))


def tool_results(run_dir: Path) -> list[str]:
    """The text of every tool result in the run's transcript, in order."""
    results = []
    for line in (run_dir / "transcript.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("type") != "user":
            continue
        for block in event["message"]["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                content = block.get("content")
                if isinstance(content, list):
                    content = "\n".join(part.get("text", "") for part in content)
                results.append(str(content))
    return results
