"""The network of a session under `agent.network: none`: two loopback ports bridged over unix
sockets, and nothing else.

The sandbox has a network namespace of its own (`bwrap --unshare-net`): a loopback interface and
no route anywhere. The session still needs two endpoints that run outside it, the model proxy and
its `mllm` server, both on the machine's loopback. Unix sockets cross network namespaces (they
are files), so:

- outside, `UnixToTcp` listens on a unix socket in the session's private folder and forwards each
  connection to one loopback port (the proxy's or the `mllm` server's);
- inside, this file runs as a script before `claude`: it listens on the same loopback ports in
  the sandbox's own namespace, forwards each connection to the unix socket, forks, and the
  parent `exec`s `claude`. The session's URLs (`ANTHROPIC_BASE_URL`, the MCP config) are the same
  as without the bridge.

Neither half holds a secret or reads a byte: they copy bytes both ways until either side closes,
so streamed answers pass unbuffered and the proxy keeps its per-request record. The inside half
dies with the sandbox (bwrap ends every process of the session when `claude` ends).

This file is copied into the session's folder and run by the sandbox's Python (`-I -S`), so it
imports nothing but the standard library.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["UnixToTcp", "bridge_command", "main"]

_CHUNK = 65536


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(_CHUNK):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def _splice(accepted: socket.socket, connect: Callable[[], socket.socket]) -> None:
    try:
        upstream = connect()
    except OSError:
        accepted.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, accepted), daemon=True)
    back.start()
    _pump(accepted, upstream)
    back.join()
    accepted.close()
    upstream.close()


def _serve(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    while True:
        try:
            accepted, _ = listener.accept()
        except OSError:  # closed
            return
        threading.Thread(target=_splice, args=(accepted, connect), daemon=True).start()


def _tcp(port: int) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    return connect


def _unix(path: str) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        return sock

    return connect


class UnixToTcp:
    """Outside the sandbox: a unix socket at `path` whose connections go to 127.0.0.1:`port`."""

    def __init__(self, path: Path, port: int) -> None:
        self.path, self.port = path, port
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(64)
        self._thread = threading.Thread(
            target=_serve, args=(self._listener, _tcp(port)), daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(timeout=5)
        self.path.unlink(missing_ok=True)


def bridge_command(
    python: str, script: Path, forwards: dict[int, Path], command: list[str]
) -> list[str]:
    """The command that runs `command` behind the inside half: each loopback port of
    `forwards` goes to its unix socket."""
    pairs = [f"{port}={path}" for port, path in sorted(forwards.items())]
    return [python, "-I", "-S", str(script), *pairs, "--", *command]


def _listen(port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    return listener


def main(argv: list[str]) -> int:
    """Inside the sandbox: `PORT=SOCKET ... -- COMMAND...`."""
    if "--" not in argv:
        print("usage: bridge.py PORT=SOCKET... -- COMMAND...", file=sys.stderr)
        return 2
    split = argv.index("--")
    pairs, command = argv[:split], argv[split + 1 :]
    listeners = []
    for pair in pairs:
        port, _, path = pair.partition("=")
        listeners.append((_listen(int(port)), _unix(path)))
    if os.fork() == 0:  # the forwarder; ends with the sandbox
        threads = [threading.Thread(target=_serve, args=pair) for pair in listeners]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        os._exit(0)
    for listener, _ in listeners:
        listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
