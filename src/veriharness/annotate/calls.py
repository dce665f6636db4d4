"""The CallMLLM calls of a run as an annotator sees them: the request, never the declared tags."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from veriharness._util.run_files import read_jsonl

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


def trace_calls(path: Path, errors: list[str]) -> list[CallView]:
    """Every call of a trace in order of its first event: started calls with what the server
    recorded, and calls refused before the model call with the request they echo."""
    calls: dict[str, CallView] = {}
    for event in read_jsonl(path, "mllm_trace.jsonl", errors) or []:
        call_id, name = event.get("call_id"), event.get("event")
        if not isinstance(call_id, str) or call_id in calls:
            continue
        if name == "mllm_call_started":
            request = event
            declared = event.get("declared_capability_tags")
        elif name == "mllm_call_rejected" and isinstance(event.get("request"), dict):
            request = event["request"]
            declared = request.get("capability_tags")
        else:
            continue
        inputs = [i for i in request.get("inputs") or [] if isinstance(i, dict)]
        inputs = [{**i, "kind": _kind(i)} for i in inputs]
        raw_output = request.get("output")
        output: dict[str, Any] = raw_output if isinstance(raw_output, dict) else {}
        calls[call_id] = CallView(
            call_id,
            str(request.get("instruction") or ""),
            inputs,
            output,
            [str(t) for t in declared] if isinstance(declared, list) else [],
        )
    return list(calls.values())
