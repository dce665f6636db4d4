"""A provider's pace, shared by every session of an experiment: hold a request before it is sent
rather than have it refused, and never send one twice.

Each requester (the model proxy of a session, the `mllm` server of a session) holds a
`ProviderPace` for the provider it sends to. The state lives in one small JSON file per provider
under `results/<experiment>/pace/`, read and written under a POSIX lock like the spend ledger,
so the proxies of every session on a machine and, through a shared results folder, on every
cluster node see the same pace:

- `blocked_until`: a 429 or 529 answer's `retry-after` (or the limit's stated reset) blocks every
  request and every new session until then;
- `limits`: the requests and tokens per minute the provider states in its rate-limit headers
  (`anthropic-ratelimit-*`, `x-ratelimit-*`), learned from its answers;
- `sent`: the requests sent in the last minute with their tokens (an estimate when sent,
  replaced by the reported usage when answered). A request is held while sending it would take
  the last minute past `HEADROOM` of a known limit, and while the provider has not answered once
  (its limits are not known yet): the experiment's first request goes alone.

`hold` is called before a request is sent, with the request's size in bytes; it returns the
request's `Held` (how long it waited, and the id it was counted under across every requester),
which `observe` takes after the answer. A requester that gives up while its request is held (the
agent closed the connection, the session ended) makes `hold` raise `Abandoned`: the request is
then never sent and never counted. Nothing here re-sends a request: a 429 reaches the
agent as the provider sent it, and Claude Code's own retry (counted in the proxy's records) is
held until the block ends. Every answer is appended to `<provider>.jsonl` beside the state,
which `status` reads for the pace.
"""

from __future__ import annotations

import fcntl
import os
import random
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, Field

from veriharness.spend.prices import estimate_tokens

__all__ = [
    "Abandoned",
    "HEADROOM",
    "Held",
    "PACE_DIR",
    "PaceEvent",
    "PaceSignals",
    "PaceState",
    "PaceSummary",
    "WAITING",
    "read_pace",
    "Sent",
    "ProviderPace",
    "pace_dir",
    "read_signals",
]

PACE_DIR = "pace"
WAITING = "waiting"  # a marker per session waiting to start
HEADROOM = 0.9  # of a stated per-minute limit
_WINDOW_S = 60.0
_UNSTATED_BLOCK_S = 2.0  # a 429/529 that names no wait: blocked this long, doubled per repeat
_MAX_BLOCK_S = 120.0
_POLL_S = 0.25
_SATURATED = (429, 529)
_DURATION = re.compile(r"^(?:([\d.]+)h)?(?:([\d.]+)m(?!s))?(?:([\d.]+)s)?(?:([\d.]+)ms)?$")


def pace_dir(experiment_dir: Path) -> Path:
    return Path(experiment_dir) / PACE_DIR


class Abandoned(Exception):
    """The requester gave up on a request while it was held: it was not sent."""

    def __init__(self, held_s: float) -> None:
        super().__init__(f"given up after {held_s:.1f} s held by the provider's pace; not sent")
        self.held_s = held_s


class Held(NamedTuple):
    """A request `hold` let through: how long it waited, and the id it is counted under."""

    seconds: float
    request_id: str


class PaceSignals(NamedTuple):
    """What one answer says of the provider's pace."""

    retry_after_s: float | None
    limit_requests: int | None
    limit_tokens: int | None
    reset_s: float | None  # seconds until a limit that is exhausted resets


def _number(headers: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = headers.get(name)
        if value is not None:
            try:
                return int(float(value))
            except ValueError:
                continue
    return None


def _seconds_until(value: str | None, now: float) -> float | None:
    """A reset as providers write it: seconds, a duration like `6m0s`/`1.5s`/`20ms`, an
    RFC 3339 time, or an HTTP date."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    duration = _DURATION.match(text)
    if duration and any(duration.groups()):
        hours, minutes, seconds, millis = (float(g) if g else 0.0 for g in duration.groups())
        return hours * 3600 + minutes * 60 + seconds + millis / 1000
    for parse in (datetime.fromisoformat, parsedate_to_datetime):
        try:
            moment = parse(text)
        except (TypeError, ValueError):
            continue
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return max(0.0, moment.timestamp() - now)
    return None


def read_signals(status: int, headers: Mapping[str, str], now: float) -> PaceSignals:
    """The pace an answer states, from its status and headers (names compared lower-case)."""
    lower = {name.lower(): value for name, value in headers.items()}
    retry = None
    if "retry-after-ms" in lower:
        retry = _seconds_until(lower["retry-after-ms"], now)
        retry = retry / 1000 if retry is not None else None
    if retry is None:
        retry = _seconds_until(lower.get("retry-after"), now)
    remaining = [
        (_number(lower, f"anthropic-ratelimit-{kind}-remaining", f"x-ratelimit-remaining-{kind}"),
         lower.get(f"anthropic-ratelimit-{kind}-reset") or lower.get(f"x-ratelimit-reset-{kind}"))
        for kind in ("requests", "tokens")
    ]  # fmt: skip
    resets = [_seconds_until(reset, now) for left, reset in remaining if left == 0]
    return PaceSignals(
        retry_after_s=retry,
        limit_requests=_number(
            lower, "anthropic-ratelimit-requests-limit", "x-ratelimit-limit-requests"
        ),
        limit_tokens=_number(lower, "anthropic-ratelimit-tokens-limit", "x-ratelimit-limit-tokens"),
        reset_s=max((r for r in resets if r is not None), default=None),
    )


class Sent(BaseModel):
    at: float
    tokens: int
    id: str


class PaceState(BaseModel):
    """The shared state of one provider's pace (the JSON file)."""

    blocked_until: float = 0.0
    block_reason: str | None = None
    consecutive_saturated: int = 0
    limit_requests: int | None = None
    limit_tokens: int | None = None
    sent: list[Sent] = Field(default_factory=list)
    answered: int = 0
    saturated: dict[str, int] = Field(default_factory=dict)  # 429 and 529 answers, by status

    def recent(self, now: float) -> list[Sent]:
        return [s for s in self.sent if s.at > now - _WINDOW_S]

    def wait_for(self, tokens: int, now: float) -> tuple[float, str | None]:
        """How long a request of `tokens` must wait before it may be sent, and why."""
        if now < self.blocked_until:
            return self.blocked_until - now, self.block_reason
        recent = self.recent(now)
        if self.answered == 0 and recent:
            # Limits are learnt from answers: before the first one, sixty-four sessions starting
            # together would send sixty-four first requests into a limit of ten. One goes first;
            # one that is never answered (its session killed) stops counting after the minute.
            return recent[0].at + _WINDOW_S - now, "the provider's first answer is awaited"
        if self.limit_requests and len(recent) + 1 > HEADROOM * self.limit_requests and recent:
            return recent[0].at + _WINDOW_S - now, "requests per minute"
        used = sum(s.tokens for s in recent)
        if self.limit_tokens and used + tokens > HEADROOM * self.limit_tokens and recent:
            freed, need = 0, used + tokens - HEADROOM * self.limit_tokens
            for entry in recent:
                freed += entry.tokens
                if freed >= need:
                    return entry.at + _WINDOW_S - now, "tokens per minute"
            return recent[-1].at + _WINDOW_S - now, "tokens per minute"
        return 0.0, None


class PaceEvent(BaseModel):
    """One answer, as `<provider>.jsonl` lists it."""

    time: str
    status: int | None
    tokens: int | None
    held_s: float


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


@contextmanager
def _locked_state(path: Path) -> Iterator[tuple[PaceState, list[PaceState]]]:
    """The state, locked against every other process and thread; a state put in the list is
    written back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _LOCKS_GUARD:
        thread_lock = _LOCKS.setdefault(str(path), threading.Lock())
    with thread_lock:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, os.fstat(fd).st_size, 0)
            try:
                state = PaceState.model_validate_json(raw) if raw else PaceState()
            except ValueError:
                state = PaceState()  # a torn write: the pace is learnt again from answers
            out: list[PaceState] = []
            yield state, out
            if out:
                # Written over the old state, then cut to length: a reader without the lock
                # (status) sees an unparsable state for a moment, never an empty file.
                data = out[0].model_dump_json().encode()
                os.pwrite(fd, data, 0)
                os.ftruncate(fd, len(data))
        finally:
            os.close(fd)


class ProviderPace:
    """One requester's view of a provider's shared pace."""

    def __init__(self, folder: Path, provider: str) -> None:
        self.state_path = Path(folder) / f"{provider}.json"
        self.events_path = Path(folder) / f"{provider}.jsonl"
        self.held_s = 0.0  # everything this requester has held, for its run's wall clock
        self._lock = threading.Lock()

    def hold(self, request_bytes: int, abandoned: Callable[[], bool] | None = None) -> Held:
        """Wait until a request of `request_bytes` may be sent, and count it as sent, at its
        input estimate (`spend.prices.estimate_tokens`) until its usage is known. `abandoned`
        is asked between waits; once it says the requester gave up, `Abandoned` is raised and
        nothing is counted."""
        tokens = estimate_tokens(request_bytes, 0).input_tokens
        request_id = secrets.token_hex(8)  # unique across the processes sharing the state
        began = time.monotonic()
        while True:
            if abandoned is not None and abandoned():
                held = time.monotonic() - began
                with self._lock:
                    self.held_s += held
                raise Abandoned(held)
            now = time.time()
            with _locked_state(self.state_path) as (state, out):
                wait, _ = state.wait_for(tokens, now)
                if wait <= 0:
                    state.sent = [*state.recent(now), Sent(at=now, tokens=tokens, id=request_id)]
                    out.append(state)
                    break
            time.sleep(min(wait, _POLL_S * 4) + random.uniform(0, _POLL_S))
        held = time.monotonic() - began
        with self._lock:
            self.held_s += held
        return Held(held, request_id)

    def observe(
        self, held: Held, status: int | None, headers: Mapping[str, str], tokens: int | None
    ) -> None:
        """What the answer to a sent request said: its usage replaces the estimate, a 429 or
        529 blocks every requester, stated limits are learnt."""
        now = time.time()
        signals = read_signals(status or 0, headers, now)
        with _locked_state(self.state_path) as (state, out):
            for entry in state.sent:
                if entry.id == held.request_id and tokens is not None:
                    entry.tokens = tokens
            state.limit_requests = signals.limit_requests or state.limit_requests
            state.limit_tokens = signals.limit_tokens or state.limit_tokens
            state.answered += 1
            if status in _SATURATED:
                state.saturated[str(status)] = state.saturated.get(str(status), 0) + 1
                state.consecutive_saturated += 1
                stated = signals.retry_after_s or signals.reset_s
                block = stated
                reason = f"HTTP {status}, retry-after {stated:.1f} s" if stated else None
                if block is None:
                    repeat = state.consecutive_saturated - 1
                    block = min(_MAX_BLOCK_S, _UNSTATED_BLOCK_S * 2**repeat)
                    reason = f"HTTP {status} without retry-after: {block:.0f} s assumed"
                until = now + min(block, _MAX_BLOCK_S)
                if until > state.blocked_until:  # the longer block stands, with its reason
                    state.blocked_until, state.block_reason = until, reason
            elif status is not None and status < 400:
                state.consecutive_saturated = 0
                # A limit stated as exhausted although this one passed.
                if signals.reset_s and now + signals.reset_s > state.blocked_until:
                    state.blocked_until = now + min(signals.reset_s, _MAX_BLOCK_S)
                    state.block_reason = "the provider stated a limit exhausted"
            out.append(state)
        event = PaceEvent(
            time=datetime.now(UTC).isoformat(timespec="milliseconds"),
            status=status,
            tokens=tokens,
            held_s=round(held.seconds, 3),
        )
        with open(self.events_path, "a", encoding="utf-8") as handle:
            handle.write(event.model_dump_json() + "\n")

    def saturated_for(self) -> tuple[float, str | None]:
        """How long a new session should wait before it starts (0: start now), and why."""
        with _locked_state(self.state_path) as (state, _):
            return state.wait_for(0, time.time())


class PaceSummary(NamedTuple):
    """One provider's pace as `status` shows it."""

    provider: str
    requests_last_minute: int
    tokens_last_minute: int
    answered: int
    saturated: dict[str, int]
    blocked_for_s: float
    block_reason: str | None
    limit_requests: int | None
    limit_tokens: int | None


def read_pace(experiment_dir: Path) -> tuple[list[PaceSummary], int]:
    """Every provider's pace, and how many sessions wait to start for one."""
    folder, now = pace_dir(experiment_dir), time.time()
    summaries = []
    for path in sorted(folder.glob("*.json")):
        try:
            state = PaceState.model_validate_json(path.read_bytes())
        except (OSError, ValueError):
            continue
        recent = state.recent(now)
        summaries.append(
            PaceSummary(
                provider=path.stem,
                requests_last_minute=len(recent),
                tokens_last_minute=sum(s.tokens for s in recent),
                answered=state.answered,
                saturated=dict(state.saturated),
                blocked_for_s=max(0.0, state.blocked_until - now),
                block_reason=state.block_reason,
                limit_requests=state.limit_requests,
                limit_tokens=state.limit_tokens,
            )
        )
    waiting = folder / WAITING
    return summaries, len(list(waiting.iterdir())) if waiting.is_dir() else 0
