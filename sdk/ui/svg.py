"""The page's pictures, drawn here as SVG (the page loads nothing from the network): a job's attempts as a
timeline, usage over time as lines, a sweep's objective per trial as points.

Every text in a picture goes through :mod:`.markup` (escaped); sizes are in the SVG's own units and the picture
scales to its box. Pure: what is drawn is an argument.
"""

from __future__ import annotations

import math
import time
from typing import Callable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .markup import Markup, html, join
from .timeline import Timeline

__all__ = ["Series", "accelerator_series", "line_chart", "scatter", "timeline_svg"]

_WIDTH = 900
_COLOURS = ("#2f6fb3", "#c2572b", "#3c9a5f", "#8a4fb3", "#b3952f", "#2fa3b3", "#b32f6f", "#6b6b6b")
_OUTCOME = {"restarted": "#d9822b", "succeeded": "#3c9a5f", "failed": "#c23b3b", "stopped": "#7a7a7a",
            "running": "#2f6fb3", "pending": "#b0b0b0", "unknown": "#b0b0b0"}  # fmt: skip
_MARK = {"lost": "#c23b3b", "back": "#3c9a5f", "hosts": "#2f6fb3", "hang": "#8a4fb3"}


def _clock(when: float, span: float = 60.0) -> str:
    """UTC time of day; tenths of a second too over a span of less than 10 s."""
    text = time.strftime("%H:%M:%S", time.gmtime(when))
    return f"{text}.{int(when * 10) % 10}" if span < 10 else text


def _span(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def _svg(height: int, body: Markup, label: str) -> Markup:
    return html('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="100%" role="img" '
                'aria-label="{label}" font-family="sans-serif" font-size="12">{body}</svg>',
                w=_WIDTH, h=height, label=label, body=body)  # fmt: skip


def timeline_svg(line: Timeline, now: float) -> Markup:
    """One bar per attempt on a common time axis (UTC): its number, length, how it ended and why (a hover title);
    markers for hosts lost or back, changes of hosts and hangs; below them, the time to recover after each failed
    attempt (failure seen to the next attempt's first progress, its phases as ticks, the record's words as title)."""
    left, right, row = 90, 20, 26
    top = 24
    rows = max(len(line.attempts), 1) + (1 if line.recoveries else 0)
    height = top + row * rows + 40
    scale = (_WIDTH - left - right) / max(line.end - line.start, 1e-3)

    def x(when: float) -> float:
        return left + (min(max(when, line.start), line.end) - line.start) * scale

    parts: List[Markup] = []
    for tick in range(5):
        when = line.start + (line.end - line.start) * tick / 4
        parts.append(html('<line x1="{x}" y1="{t}" x2="{x}" y2="{b}" stroke="#ddd"/>'
                          '<text x="{x}" y="{ty}" text-anchor="middle" fill="#555">{label}</text>',
                          x=f"{x(when):.1f}", t=top - 6, b=height - 30, ty=height - 14,
                          label=_clock(when, line.end - line.start)))  # fmt: skip
    if not line.attempts:
        parts.append(html('<text x="{x}" y="{y}" fill="#555">no attempt started yet</text>', x=left, y=top + 16))
    for position, attempt in enumerate(line.attempts):
        y = top + position * row
        x0, x1 = x(attempt.start), x(attempt.end if attempt.end is not None else now)
        colour = _OUTCOME.get(attempt.outcome, "#b0b0b0")
        took = _span(attempt.duration(now))
        what = f"attempt {attempt.number}: {attempt.outcome}, {took} from {_clock(attempt.start)}"
        title = f"{what}; {attempt.cause}" if attempt.cause else what
        hang = html('<text x="{x}" y="{y}" fill="#8a4fb3">hang</text>', x=f"{x1 + 4:.1f}", y=y + 15) if attempt.hang \
            else Markup("")  # fmt: skip
        parts.append(html(
            '<g class="attempt" data-outcome="{outcome}"><title>{title}</title>'
            '<text x="4" y="{ty}" fill="#333">attempt {number}</text>'
            '<rect x="{x}" y="{y}" width="{w}" height="18" rx="3" fill="{colour}"/>'
            '<text x="{lx}" y="{ty}" fill="#fff">{label}</text>{hang}</g>',
            outcome=attempt.outcome, title=title, ty=y + 14, number=attempt.number, x=f"{x0:.1f}", y=y,
            w=f"{max(x1 - x0, 2):.1f}", colour=colour, lx=f"{x0 + 4:.1f}",
            label=attempt.outcome if x1 - x0 > 70 else "", hang=hang,
        ))  # fmt: skip
    if line.recoveries:
        parts.append(_recoveries(line, now, x, top + row * max(len(line.attempts), 1)))
    for marker in line.markers:
        mx = x(marker.time)
        parts.append(html('<g class="marker" data-kind="{kind}"><title>{title}</title>'
                          '<line x1="{x}" y1="{t}" x2="{x}" y2="{b}" stroke="{c}" stroke-width="2" '
                          'stroke-dasharray="4 3"/><text x="{x}" y="{ty}" fill="{c}" text-anchor="middle">{kind}</text>'
                          '</g>', kind=marker.kind, title=f"{_clock(marker.time)} {marker.label}", x=f"{mx:.1f}",
                          t=top - 6, b=height - 30, ty=top - 10, c=_MARK.get(marker.kind, "#555")))  # fmt: skip
    return _svg(height, join(parts), "attempts timeline")


def _recoveries(line: Timeline, now: float, x: Callable[[float], float], y: int) -> Markup:
    """The recovery row: one bar per failed attempt's recovery (open while the next attempt has not progressed)."""
    parts: List[Markup] = [html('<text x="4" y="{ty}" fill="#333">recovery</text>', ty=y + 14)]
    for record in line.recoveries:
        last = max([record.start, *(when for _, when in record.phases)])
        x0 = x(record.start)
        x1 = x(record.end if record.end is not None else (last if record.ended else now))
        ticks = join(html('<line class="phase" x1="{x}" y1="{a}" x2="{x}" y2="{b}" stroke="#fff" stroke-width="2">'
                          '<title>{t}</title></line>', x=f"{x(when):.1f}", a=y + 2, b=y + 16, t=label)
                     for label, when in record.phases)  # fmt: skip
        said = record.summary(now)
        parts.append(html(
            '<g class="recovery" data-attempt="{n}" data-done="{done}"><title>{title}</title>'
            '<rect x="{x}" y="{y}" width="{w}" height="18" rx="3" fill="#d9822b" fill-opacity="{o}" stroke="#d9822b"/>'
            '{ticks}<text x="{lx}" y="{ty}" fill="#8a4a12">{label}</text></g>',
            n=record.attempt, done="1" if record.end is not None else "0", title=record.line, x=f"{x0:.1f}", y=y,
            w=f"{max(x1 - x0, 2):.1f}", o="0.8" if record.end is not None else "0.35", ticks=ticks,
            lx=f"{min(x1 + 4, _WIDTH - 150):.1f}", ty=y + 14, label=said,
        ))  # fmt: skip
    return join(parts)


class Series(NamedTuple):
    """One line of a chart: its name and its (time, value) points."""

    name: str
    points: Sequence[Tuple[float, float]]


def _nice_top(value: float) -> float:
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * power:
            return float(step * power)
    return float(10 * power)


def line_chart(title: str, unit: str, series: Sequence[Series], *, height: int = 180) -> Markup:
    """Lines over time (UTC on the x axis), one colour per series with a legend; an empty chart says so."""
    left, right, top, bottom = 60, 20, 24, 34
    points = [p for s in series for p in s.points]
    parts: List[Markup] = [html('<text x="{x}" y="14" fill="#333" font-weight="bold">{t}</text>', x=left, t=title)]
    if not points:
        parts.append(html('<text x="{x}" y="{y}" fill="#555">no samples yet</text>', x=left, y=top + 30))
        return _svg(height, join(parts), title)
    t0, t1 = min(p[0] for p in points), max(p[0] for p in points)
    t1 = max(t1, t0 + 1.0)
    peak = _nice_top(max(p[1] for p in points))
    w, h = _WIDTH - left - right, height - top - bottom

    def xy(point: Tuple[float, float]) -> str:
        return f"{left + (point[0] - t0) / (t1 - t0) * w:.1f},{top + h - point[1] / peak * h:.1f}"

    for tick in range(3):
        value = peak * tick / 2
        y = top + h - h * tick / 2
        parts.append(html('<line x1="{l}" y1="{y}" x2="{r}" y2="{y}" stroke="#e5e5e5"/>'
                          '<text x="{tx}" y="{ty}" text-anchor="end" fill="#555">{v:g}{u}</text>',
                          l=left, r=left + w, y=f"{y:.1f}", tx=left - 4, ty=f"{y + 4:.1f}", v=round(value, 2),
                          u=unit))  # fmt: skip
    for when in (t0, t1):
        parts.append(html('<text x="{x}" y="{y}" text-anchor="middle" fill="#555">{c}</text>',
                          x=f"{left + (when - t0) / (t1 - t0) * w:.1f}", y=height - 8, c=_clock(when)))  # fmt: skip
    for number, one in enumerate(series):
        colour = _COLOURS[number % len(_COLOURS)]
        if one.points:
            parts.append(html('<polyline class="series" fill="none" stroke="{c}" stroke-width="2" points="{p}"/>',
                              c=colour, p=" ".join(xy(p) for p in one.points)))  # fmt: skip
        parts.append(html('<text x="{x}" y="14" fill="{c}">{n}</text>', x=left + 160 + 120 * number, c=colour,
                          n=one.name))  # fmt: skip
    return _svg(height, join(parts), title)


def scatter(title: str, points: Sequence[Tuple[int, Optional[float], str]], goal: Optional[str]) -> Markup:
    """The objective per trial: (trial index, value or None, label); the best trial ringed."""
    left, right, top, bottom, height = 70, 20, 24, 34, 220
    known = [(i, v, label) for i, v, label in points if v is not None]
    parts: List[Markup] = [html('<text x="{x}" y="14" fill="#333" font-weight="bold">{t}</text>', x=left, t=title)]
    if not known:
        parts.append(html('<text x="{x}" y="{y}" fill="#555">no trial has a value yet</text>', x=left, y=top + 30))
        return _svg(height, join(parts), title)
    values = [v for _, v, _ in known if v is not None]
    low, high = min(values), max(values)
    if high - low < 1e-12:
        low, high = low - 1.0, high + 1.0
    last = max(i for i, _, _ in points) if points else 1
    w, h = _WIDTH - left - right, height - top - bottom

    def px(index: int) -> float:
        return left + (index + 0.5) / (last + 1) * w

    def py(value: float) -> float:
        return top + h - (value - low) / (high - low) * h

    best = (min if goal != "maximize" else max)(known, key=lambda p: p[1] or 0.0)
    for value in (low, high):
        parts.append(html('<text x="{x}" y="{y}" text-anchor="end" fill="#555">{v:.4g}</text>'
                          '<line x1="{l}" y1="{y}" x2="{r}" y2="{y}" stroke="#e5e5e5"/>',
                          x=left - 4, y=f"{py(value):.1f}", v=value, l=left, r=left + w))  # fmt: skip
    for index, value, label in known:
        assert value is not None
        ring = html('<circle class="best" cx="{x}" cy="{y}" r="9" fill="none" stroke="#3c9a5f" stroke-width="2"/>',
                    x=f"{px(index):.1f}", y=f"{py(value):.1f}") if (index, value, label) == best \
            else Markup("")  # fmt: skip
        parts.append(html('<g class="trial"><title>trial {i}: {v:.6g} ({label})</title>'
                          '<circle cx="{x}" cy="{y}" r="5" fill="#2f6fb3"/>{ring}'
                          '<text x="{x}" y="{ty}" text-anchor="middle" fill="#555">{i}</text></g>',
                          i=index, v=value, label=label, x=f"{px(index):.1f}", y=f"{py(value):.1f}", ring=ring,
                          ty=height - 14))  # fmt: skip
    return _svg(height, join(parts), title)


def accelerator_series(samples: Sequence[Tuple[float, Mapping[str, float]]]) -> List[Series]:
    """One series per accelerator figure the platform reports (``gpuUtil``, ``npuMemUsage``, ...)."""
    names = sorted({name for _, figures in samples for name in figures})
    return [Series(name, [(when, figures[name]) for when, figures in samples if name in figures]) for name in names]
