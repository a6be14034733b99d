"""A sweep's results: one :class:`TrialResult` row per trial, made from the record, and their ranking.

Rows are best first by the objective (:func:`rank_results`): trials with a value by the goal (ties by trial
index), then the trials without one (failed, skipped, no match) by index.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .spec import format_value

__all__ = ["TrialResult", "rank_results", "rows_of"]


@dataclass(frozen=True)
class TrialResult:
    """One row of a sweep's results."""

    index: int
    params: Mapping[str, Any]
    state: str
    job_id: Optional[str] = None
    exit_code: Optional[int] = None
    started_at: Optional[float] = None
    ended_at: Optional[float] = None
    metric: Optional[float] = None
    failure_class: Optional[str] = None
    message: str = ""

    def params_text(self) -> str:
        """``lr=0.001 batch=32`` in the declaration order."""
        return " ".join(f"{k}={format_value(v)}" for k, v in self.params.items())

    @property
    def duration(self) -> Optional[float]:
        """Seconds it ran (so far), when it started."""
        if self.started_at is None:
            return None
        end = self.ended_at if self.ended_at is not None else time.time()
        return max(end - self.started_at, 0.0)

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data."""
        data = dataclasses.asdict(self)
        data["params"] = dict(self.params)
        data["duration"] = self.duration
        return data

    @classmethod
    def from_record(cls, trial: Mapping[str, Any], order: Sequence[str] = ()) -> TrialResult:
        """A row from a trial of the record; ``order``: the parameters' declaration order."""
        params = dict(trial["params"])
        params = {**{n: params[n] for n in order if n in params}, **params}
        failure = trial.get("failure_class")
        metric = trial.get("metric")
        code = trial.get("exit_code")
        return cls(
            index=int(trial["index"]),
            params=params,
            state=str(trial["state"]),
            job_id=trial.get("job_id") if isinstance(trial.get("job_id"), str) else None,
            exit_code=code if isinstance(code, int) else None,
            started_at=_number(trial.get("started_at")),
            ended_at=_number(trial.get("ended_at")),
            metric=float(metric) if isinstance(metric, (int, float)) else None,
            failure_class=str(failure["class"]) if isinstance(failure, dict) and "class" in failure else None,
            message=str(trial.get("message") or ""),
        )


def _number(value: object) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def rows_of(record: Mapping[str, Any]) -> List[TrialResult]:
    """The rows of a record's trials, in index order, parameters in their declaration order."""
    names = record.get("param_names")
    order = [str(n) for n in names] if isinstance(names, list) else []
    return [TrialResult.from_record(t, order) for t in record["trials"]]


def rank_results(rows: Sequence[TrialResult], goal: Optional[str]) -> List[TrialResult]:
    """Best first: rows with a metric by the goal (ties by index), then the rest by index."""
    scored = [r for r in rows if r.metric is not None]
    rest = [r for r in rows if r.metric is None]
    sign = -1.0 if goal == "maximize" else 1.0
    scored.sort(key=lambda r: (sign * (r.metric or 0.0), r.index))
    return [*scored, *sorted(rest, key=lambda r: r.index)]
