"""The CallMLLM calls of a run as an annotator sees them: the request, never the declared tags."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from veriharness.runfolder.mllm_trace import CallRejected, CallStarted, read_trace

__all__ = ["CallView", "trace_calls"]


class CallView(NamedTuple):
    """One call: its id, instruction, traced inputs and output contract (tags left out)."""

    call_id: str
    instruction: str
    inputs: list[dict[str, Any]]
    output: dict[str, Any]
    declared: list[str]

    def request(self) -> dict[str, Any]:
        """What an annotator is shown of the call (no tags, no image bytes or digests)."""
        shown = []
        for item in self.inputs:
            if item.get("kind") == "image" or "path" in item:
                keep = ("label", "path", "region", "width", "height")
                shown.append({"kind": "image", **{k: item[k] for k in keep if k in item}})
            else:
                shown.append(
                    {"kind": "text", "label": item.get("label"), "content": item.get("content")}
                )
        return {"instruction": self.instruction, "inputs": shown, "output": self.output}


def _kind(item: dict[str, Any]) -> str:
    return "image" if item.get("kind") == "image" or "path" in item else "text"


def trace_calls(run_dir: Path, errors: list[str]) -> list[CallView]:
    """Every call of the run's trace in order of its first event: started calls with what the
    server recorded, and calls refused before the model call with the request they echo."""
    calls: dict[str, CallView] = {}
    for event in read_trace(run_dir, errors) or []:
        if event.call_id in calls:
            continue
        if isinstance(event, CallStarted):
            request = event.model_dump(mode="json")
            declared: Any = event.declared_capability_tags
        elif isinstance(event, CallRejected):
            request = event.request
            declared = request.get("capability_tags")
        else:
            continue
        inputs = [i for i in request.get("inputs") or [] if isinstance(i, dict)]
        inputs = [{**i, "kind": _kind(i)} for i in inputs]
        raw_output = request.get("output")
        output: dict[str, Any] = raw_output if isinstance(raw_output, dict) else {}
        calls[event.call_id] = CallView(
            event.call_id,
            str(request.get("instruction") or ""),
            inputs,
            output,
            [str(t) for t in declared] if isinstance(declared, list) else [],
        )
    return list(calls.values())
