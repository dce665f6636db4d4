"""Keeping the exact bytes each CallMLLM call attached, in the run folder by digest
(`runfolder/call_images.py` names the files).

The server keeps an image input's bytes once the call is traced as started, so every image a
`mllm_call_started` event names by `attached_sha256` has its file. A digest is written once per
run: a file of its name is left alone only when its bytes hash to it (a broken or planted file
is replaced, atomically); within one server the digests written or checked are remembered, so a
second call attaching the same image costs no read.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from veriharness._util import atomic
from veriharness.runfolder.call_images import holds_digest, image_file

__all__ = ["CallImageKeeper"]

_LOG = logging.getLogger(__name__)


class CallImageKeeper:
    """Writes attached images into `folder` (the run folder's `call_images/`); safe to share
    between concurrent calls."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._kept: set[str] = set()

    def keep(self, digest: str, media_type: str, data: bytes) -> None:
        """Keep `data` as the file of `digest`. A failed write is logged on the server's stderr
        (mllm_server.log) and the call goes on: the trace still names the image by its digest,
        and the report says it was not kept."""
        with self._lock:
            if digest in self._kept:
                return
        path = self.folder / image_file(digest, media_type)
        try:
            if not holds_digest(path, digest):
                atomic.write_bytes(path, data)
        except OSError as error:
            _LOG.warning("CallMLLM: the attached image %s was not kept: %s", digest, error)
            return
        with self._lock:
            self._kept.add(digest)
