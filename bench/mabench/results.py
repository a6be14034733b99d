"""What a case hands back: measured series, target verdicts and notes; plus median and unit formatting.

A :class:`Series` is one subject measured several times (``samples``, reported by their median). A
:class:`Target` is one line of the issue's targets with the measured ratio and ``ok`` = pass / short /
``None`` (could not be evaluated, e.g. a series failed).
"""

from __future__ import annotations

import datetime
import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional

__all__ = ["CaseResult", "Series", "Target", "fmt_ratio", "fmt_value", "section_head", "say"]


@dataclass
class Series:
    """One subject of one case, measured ``len(samples)`` times."""

    key: str  # stable id, e.g. "startup/8/shim-ranktable"
    case: str  # "start-up", "teardown", ...
    subject: str  # what was measured, e.g. "shim (ranktable)"
    size: str  # the workload, e.g. "N=8"
    unit: str  # "s" (shown as ms or s), "MB/s"
    samples: List[float] = field(default_factory=list)
    note: str = ""
    error: Optional[str] = None  # set when the series could not be measured (shown instead of a figure)

    @property
    def median(self) -> Optional[float]:
        """Median of the samples, or None when there are none."""
        return statistics.median(self.samples) if self.samples else None

    def to_json(self) -> Dict[str, object]:
        """JSON-ready data (``bench/results/latest.json``)."""
        return {
            "key": self.key,
            "case": self.case,
            "subject": self.subject,
            "size": self.size,
            "unit": self.unit,
            "samples": self.samples,
            "median": self.median,
            "note": self.note,
            "error": self.error,
        }


@dataclass
class Target:
    """One target of the issue: what is claimed, what was measured, and pass (True) / short (False) / n/a (None)."""

    claim: str
    measured: str
    ok: Optional[bool]
    comment: str = ""

    @property
    def verdict(self) -> str:
        """``pass``, ``short`` or ``n/a``."""
        return "n/a" if self.ok is None else ("pass" if self.ok else "short")


@dataclass
class CaseResult:
    """Everything one case produced."""

    case: str
    series: List[Series]
    targets: List[Target] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    seconds: float = 0.0
    error: Optional[str] = None  # the case as a whole failed (e.g. an import error)


def fmt_value(value: Optional[float], unit: str) -> str:
    """A figure with a readable unit: seconds as ``12.3 ms`` / ``4.56 s``, throughput as ``812 MB/s``, a share of
    one core as ``0.42 %``."""
    if value is None:
        return "-"
    if unit == "s":
        if value < 0.01:
            return f"{value * 1000:.2f} ms"
        if value < 1:
            return f"{value * 1000:.1f} ms" if value < 0.1 else f"{value * 1000:.0f} ms"
        return f"{value:.2f} s" if value < 100 else f"{value:.0f} s"
    if unit == "MB/s":
        return f"{value:.0f} MB/s"
    if unit == "%":
        return f"{value:.2f} %" if value < 10 else f"{value:.0f} %"
    return f"{value:g} {unit}"


def fmt_ratio(value: Optional[float]) -> str:
    """A ratio such as ``0.013 x`` (three significant digits)."""
    if value is None:
        return "-"
    return f"{value:.3g} x"


def say(message: str) -> None:
    """Progress line on stdout (flushed, so it shows up while a case runs)."""
    print(f"[bench] {message}", flush=True)


def section_head(title: str, result: CaseResult, command: str, started: datetime.datetime, minutes: float,
                 facts: Dict[str, str], after: str = ".") -> List[str]:  # fmt: skip
    """The first lines of a case's own section of docs/performance.md: its title, how and when it was measured
    (``after`` ends that sentence), and the case's error when it failed."""
    load = [f"{key}: {value}" for key, value in facts.items() if key.startswith("load average")]
    out = [
        f"## {title}",
        "",
        f"Measured by `{command}` on {started:%Y-%m-%d %H:%M} UTC ({minutes:.1f} min); nproc {facts.get('nproc')}, "
        f"{'; '.join(load)}. `bench/run.py --only {result.case}` rewrites this section alone{after}",
        "",
    ]
    if result.error:
        out += [f"The case failed: {result.error}", ""]
    return out
