"""The monitor's state file, `results/<experiment>/monitor/state.json`: the running answer of each
compared pair's primary outcomes after the newest look (`collect/monitor.py` writes it; `status`
and the comparison read it). Its own module, without pandas, so that `status` stays quick."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

__all__ = ["STATE_NAME", "Answer", "MonitorError", "MonitorState", "Track", "read_state"]

STATE_NAME = "monitor/state.json"

Answer = Literal["not_yet_known", "higher", "lower", "within_margin", "empty"]


class MonitorError(ValueError):
    """The monitor cannot look as asked (no experiment record, no monitor declared), or its
    state cannot be read."""


class Track(BaseModel):
    """One pair's one primary outcome."""

    model_config = ConfigDict(extra="forbid")
    baseline: str
    treatment: str
    measure: str
    alpha: float  # this outcome's share of the monitor's alpha
    bounds: tuple[float, float]  # the least and most a difference can be
    tasks: int  # differences in its sequence
    mean: float | None
    low: float | None  # the running confidence sequence after the last of them
    high: float | None
    answer: Answer
    within_margin: bool
    known_after: int | None  # values in the sequence when the answer was first known
    left_out: list[str]  # tasks looked at but not in the sequence, each "<task>: <why>"
    problem: str | None = None

    @property
    def known(self) -> bool:
        return self.problem is None and self.answer != "not_yet_known"

    def sentence(self, margin: float | None) -> str:
        """The answer in words, as status and comparison.md give it."""
        head = f"{self.measure}, {self.treatment} vs {self.baseline}"
        if self.problem:
            return f"{head}: not known ({self.problem})"
        if not self.tasks or self.low is None or self.high is None or self.mean is None:
            return f"{head}: no task complete yet: not yet known"
        said = self.answer_words(margin)
        when = f" (since {self.known_after} tasks)" if self.known_after else ""
        return (
            f"{head}: mean difference {self.mean:.4g} over {self.tasks} tasks, confidence "
            f"sequence [{self.low:.4g}, {self.high:.4g}]: {said}{when}"
        )

    def answer_words(self, margin: float | None) -> str:
        """What the answer says: not yet known, known (higher or lower) at alpha, within the
        margin, or empty, as status and the verdict give it."""
        inside = f"within the margin ±{margin:g}" if margin is not None else "within the margin"
        if self.answer == "higher" or self.answer == "lower":
            said = f"known: treatment {self.answer} at alpha {self.alpha:g}"
            return said + (f", and {inside}" if self.within_margin else "")
        if self.answer == "within_margin":
            return f"{inside}: the difference is smaller than the margin (alpha {self.alpha:g})"
        if self.answer == "empty":
            return (
                "known, but the running interval is empty: its intervals stopped overlapping "
                "(the order or the bounds are not as assumed, or a rare event)"
            )
        return "not yet known"


class MonitorState(BaseModel):
    """`monitor/state.json`: the running answer after the newest look."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["monitor_state"] = "monitor_state"
    time: str
    key: dict[str, JsonValue]  # monitor_key: the settings this answer is reached under
    method: str
    margin: float | None
    stop: bool  # analysis.monitor.stop as recorded
    tasks_total: int
    tasks_looked: int  # tasks whose every compared run was scored
    order: Literal["start_order", "arrival"]
    sequence: list[str]  # the tasks of the sequence, in order
    tracks: list[Track]
    known: bool  # every track's answer is known

    def lines(self) -> list[str]:
        return [t.sentence(self.margin) for t in self.tracks]


def read_state(experiment_dir: Path) -> MonitorState | None:
    """The newest state, or None when no look was made; a state that cannot be read raises
    MonitorError naming the file."""
    path = Path(experiment_dir) / STATE_NAME
    try:
        return MonitorState.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError) as error:
        raise MonitorError(f"{path}: unreadable ({error})") from None
