"""Test data shared by the mllm tests: the stub's key and small images. A module of its own
(not `conftest`), so test modules can import it whatever other `conftest` pytest loaded first."""

from __future__ import annotations

import socket
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from pydantic import TypeAdapter

from veriharness.runfolder.mllm_trace import TraceEvent

__all__ = [
    "ANTHROPIC_KEY_VALUE",
    "header_only_png",
    "noise_image",
    "closed_port",
    "read_trace",
    "request",
]

ANTHROPIC_KEY_VALUE = "sk-stub-secret-0123456789abcdef"


def request(**overrides: Any) -> dict[str, Any]:
    """A valid CallMLLM request on the workspace's screenshot, with fields replaced."""
    base: dict[str, Any] = {
        "instruction": "Describe the screenshot.",
        "inputs": [{"kind": "image", "label": "screen", "path": "shots/screen.png"}],
        "capability_tags": ["E1"],
        "output": {"kind": "text"},
    }
    return base | overrides


def header_only_png(width: int, height: int) -> bytes:
    """A PNG that declares a size but holds no pixels: enough for Pillow to read the header."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def noise_image(width: int, height: int, seed: int, mode: str = "RGB") -> Image.Image:
    rng = np.random.default_rng(seed)
    channels = len(mode)
    pixels = rng.integers(0, 256, size=(height, width, channels), dtype=np.uint8)
    return Image.fromarray(pixels, mode)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_EVENTS: TypeAdapter[TraceEvent] = TypeAdapter(TraceEvent)


def read_trace(path: Path) -> list[TraceEvent]:
    """Every event of a trace file, validated against the trace's event models."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [_EVENTS.validate_json(line) for line in lines if line.strip()]
