"""A hand-written SVG: horizontal bars of start-up and teardown medians per launcher, on a log time axis.

Two panels share one log-scale axis (1 ms ... 100 s style decades). Each bar is a median; a thin line across it
spans the fastest to the slowest run. No plotting library is used.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple
from xml.sax.saxutils import escape

from .results import Series, fmt_value

__all__ = ["render_svg"]

WIDTH = 820
LABEL_W = 250
PLOT_W = 470
ROW_H = 22
TITLE_H = 30
AXIS_H = 30
COLOURS = (("shim", "#2b6cb0"), ("torchrun", "#dd6b20"), ("msrun", "#805ad5"), ("Popen", "#38a169"))


def _colour(subject: str) -> str:
    for word, colour in COLOURS:
        if word in subject:
            return colour
    return "#718096"


def _decades(values: Sequence[float]) -> Tuple[int, int]:
    low = math.floor(math.log10(min(values)))
    high = math.ceil(math.log10(max(values)))
    return low, max(high, low + 1)


def _x(value: float, low: int, high: int) -> float:
    frac = (math.log10(max(value, 10.0**low)) - low) / (high - low)
    return LABEL_W + frac * PLOT_W


def _tick_label(exponent: int) -> str:
    seconds = 10.0**exponent
    if seconds < 1:
        return f"{seconds * 1000:g} ms"
    return f"{seconds:g} s"


def _panel(title: str, rows: Sequence[Series], top: float, low: int, high: int) -> List[str]:
    out = [f'<text x="10" y="{top + 20}" class="title">{escape(title)}</text>']
    y = top + TITLE_H
    for item in rows:
        label = f"{item.subject} ({item.size})" if item.size.startswith("N=") and "start" in item.key else item.subject
        out.append(f'<text x="{LABEL_W - 8}" y="{y + 15}" class="label" text-anchor="end">{escape(label)}</text>')
        median = item.median
        if median is None:
            out.append(f'<text x="{LABEL_W + 4}" y="{y + 15}" class="value">{escape(item.error or "no data")}</text>')
        else:
            end = _x(median, low, high)
            out.append(
                f'<rect x="{LABEL_W}" y="{y + 4}" width="{max(end - LABEL_W, 1):.1f}" height="{ROW_H - 8}" '
                f'fill="{_colour(item.subject)}"/>'
            )
            lo, hi = _x(min(item.samples), low, high), _x(max(item.samples), low, high)
            out.append(f'<line x1="{lo:.1f}" x2="{hi:.1f}" y1="{y + ROW_H / 2}" y2="{y + ROW_H / 2}" class="range"/>')
            out.append(f'<text x="{max(end, hi) + 6:.1f}" y="{y + 15}" class="value">{fmt_value(median, "s")}</text>')
        y += ROW_H
    return out


def _axis(top: float, low: int, high: int, grid_top: float) -> List[str]:
    out = []
    for exponent in range(low, high + 1):
        x = _x(10.0**exponent, low, high)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{grid_top}" y2="{top}" class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{top + 16}" class="tick" text-anchor="middle">{_tick_label(exponent)}</text>')
    return out


def render_svg(
    startup: Sequence[Series], teardown: Sequence[Series], caption: str, titles: Optional[Tuple[str, str]] = None
) -> Optional[str]:
    """The SVG text, or None when neither panel has a single measured median; ``titles``: other panel titles."""
    values = [v for item in (*startup, *teardown) for v in item.samples if v > 0]
    if not values:
        return None
    low, high = _decades(values)
    parts: List[str] = []
    top = 0.0
    first, second = titles or (
        "Start-up: launcher start -> all N ranks running (median; line: min-max)",
        "Teardown: a rank's failing exit -> launcher exit (N=4)",
    )
    panels = [(first, startup), (second, teardown)]
    for title, rows in panels:
        if not rows:
            continue
        body_top = top + TITLE_H
        bottom = body_top + ROW_H * len(rows)
        parts += _axis(bottom, low, high, body_top)  # grid first, so the bars are drawn over it
        parts += _panel(title, rows, top, low, high)
        top = bottom + AXIS_H
    height = top + 24
    parts.append(f'<text x="10" y="{height - 8}" class="caption">{escape(caption)}</text>')
    style = (
        ".title{font:bold 14px sans-serif}.label,.value{font:12px sans-serif}.tick,.caption{font:11px sans-serif;"
        "fill:#4a5568}.grid{stroke:#cbd5e0;stroke-width:1}.range{stroke:#1a202c;stroke-width:1.2}"
    )
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {WIDTH} {height:.0f}">'
    )
    return (
        "\n".join(
            [head, f"<style>{style}</style>", '<rect width="100%" height="100%" fill="white"/>', *parts, "</svg>"]
        )
        + "\n"
    )
