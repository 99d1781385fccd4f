"""Charts as inline SVG text: a line chart over time with shaded periods, and a latency
percentile plot in HdrHistogram's style.

No plotting library: the charts are a few hundred bytes of text each, need no fonts or
image encoder, look the same on every machine, and compare as text in golden tests
(tests/golden/). Coordinates are rounded to 0.1 px, so the same data gives the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 760, 230
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 30, 40     # the plot area's margins
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")
BAND_FILL = "#f4a582"
INCIDENT_FILL = "#d6604d"   # an incident nobody scheduled: darker than a fault


@dataclass(frozen=True)
class Series:
    name: str
    xs: Sequence[float]
    ys: Sequence[float | None]     # None or NaN: a gap in the line
    connect: bool = False          # draw across the gaps (sparse samples, such as window output)


@dataclass(frozen=True)
class Band:
    """A shaded period on the x axis, labelled at its top (a fault; an incident, which nobody
    scheduled, in another colour)."""

    start: float
    end: float
    label: str
    incident: bool = False


def nice_ticks(low: float, high: float, count: int = 5, integer: bool = False) -> list[float]:
    """About `count` round tick values (1, 2 or 5 times a power of ten apart) covering
    low..high; with `integer`, at least 1 apart (a count of events has no half)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low] if math.isfinite(low) else [0.0]
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if integer:
        step = max(step, 1.0)
    first = math.floor(low / step) * step
    ticks = [round(first, 10)]
    while ticks[-1] < high - step * 1e-9:   # up to the first tick at or above high
        ticks.append(round(first + len(ticks) * step, 10))
    return ticks


def _label(value: float) -> str:
    if abs(value) >= 1e6:
        return f"{value / 1e6:g}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:g}k"
    return f"{value:,.10g}"


def _finite(values) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


class _Frame:
    """Maps data to pixels for one chart."""

    def __init__(self, x_range: tuple[float, float], y_range: tuple[float, float],
                 width: int, height: int, top: int = TOP):
        self.x0, self.x1 = x_range
        self.y0, self.y1 = y_range
        self.width, self.height, self.top = width, height, top

    def x(self, value: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return round(LEFT + (value - self.x0) / span * (self.width - LEFT - RIGHT), 1)

    def y(self, value: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return round(self.height - BOTTOM - (value - self.y0) / span * (self.height - self.top - BOTTOM), 1)


def _open(title: str, width: int, height: int) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
            f'aria-label="{escape(title)}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
            f'<text x="{LEFT}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']


def _axes(f: _Frame, x_ticks: list[tuple[float, str]], y_ticks: list[float], x_label: str,
          y_label: str) -> list[str]:
    out = []
    bottom, right = f.height - BOTTOM, f.width - RIGHT
    for value in y_ticks:
        y = f.y(value)
        out.append(f'<line x1="{LEFT}" y1="{y}" x2="{right}" y2="{y}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4}" text-anchor="end">{_label(value)}</text>')
    for value, text in x_ticks:
        x = f.x(value)
        out.append(f'<line x1="{x}" y1="{bottom}" x2="{x}" y2="{bottom + 4}" stroke="#333"/>')
        out.append(f'<text x="{x}" y="{bottom + 16}" text-anchor="middle">{escape(text)}</text>')
    out.append(f'<line x1="{LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/>')
    out.append(f'<line x1="{LEFT}" y1="{f.top}" x2="{LEFT}" y2="{bottom}" stroke="#333"/>')
    out.append(f'<text x="{(LEFT + right) / 2}" y="{f.height - 6}" '
               f'text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text x="14" y="{(f.top + bottom) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {(f.top + bottom) / 2})">{escape(y_label)}</text>')
    return out


LEGEND_ROW = 18   # a legend too wide to share the title's row gets a row of its own, this high


def _legend_width(names: list[str]) -> float:
    return sum(20 + 6.5 * len(n) for n in names)


def _legend_fits(title: str, names: list[str], width: int) -> bool:
    """Whether the legend fits right of the title (bold 13 px: about 7.5 px a character)."""
    return LEFT + 7.5 * len(title) + 16 + _legend_width(names) <= width - RIGHT


def _legend(names: list[str], width: int, row: int = 0) -> list[str]:
    out: list[str] = []
    x, y = float(width - RIGHT), 8 + row * LEGEND_ROW
    for i, name in reversed(list(enumerate(names))):
        x -= 12 + 6.5 * len(name)
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<rect x="{round(x, 1)}" y="{y}" width="9" height="9" fill="{color}"/>')
        out.append(f'<text x="{round(x + 12, 1)}" y="{y + 8}">{escape(name)}</text>')
        x -= 8
    return out


def _polylines(f: _Frame, xs, ys, color: str, connect: bool = False) -> list[str]:
    """One polyline per unbroken run of finite points (one for all of them with `connect`)."""
    out: list[list[str]] = []
    run: list[str] = []
    for x, y in zip(xs, ys, strict=True):
        if y is None or not math.isfinite(float(y)):
            if run and not connect:
                out.append(run)
                run = []
            continue
        run.append(f"{f.x(float(x))},{f.y(float(y))}")
    if run:
        out.append(run)
    return [f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{" ".join(r)}"/>'
            if len(r) > 1 else
            f'<circle cx="{r[0].split(",")[0]}" cy="{r[0].split(",")[1]}" r="2" fill="{color}"/>'
            for r in out]


def line_chart(title: str, series: list[Series], *, x_label: str, y_label: str,
               bands: Sequence[Band] = (), width: int = WIDTH, height: int = HEIGHT) -> str:
    """Lines over a shared x axis from 0 (or the data's smallest x) and a y axis from 0,
    with `bands` shaded and labelled."""
    xs = _finite(x for s in series for x in s.xs) + _finite(v for b in bands for v in (b.start, b.end))
    ys = _finite(y for s in series for y in s.ys)
    if not xs or not ys:
        return "\n".join([*_open(title, width, height),
                          f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no data</text>',
                          "</svg>"])
    x_ticks = nice_ticks(min(0.0, min(xs)), max(xs), 8)
    y_ticks = nice_ticks(0.0, max(ys) if max(ys) > 0 else 1.0, 4)
    names = [s.name for s in series]
    row = 0 if _legend_fits(title, names, width) else 1
    height, top = height + row * LEGEND_ROW, TOP + row * LEGEND_ROW
    f = _Frame((x_ticks[0], max(x_ticks[-1], max(xs))), (0.0, max(y_ticks[-1], max(ys))), width, height, top)
    out = _open(title, width, height)
    for i, b in enumerate(bands):
        x0, x1 = f.x(max(b.start, f.x0)), f.x(min(max(b.end, b.start), f.x1))
        kind, fill, ink = (("incident", INCIDENT_FILL, "#8e1b1b") if b.incident
                           else ("band", BAND_FILL, "#8a3b12"))
        out.append(f'<rect class="{kind}" x="{x0}" y="{top}" width="{round(max(x1 - x0, 2.0), 1)}" '
                   f'height="{height - top - BOTTOM}" fill="{fill}" fill-opacity="0.35">'
                   f'<title>{escape(b.label)}</title></rect>')
        # labels on three staggered lines, so that faults close together stay readable
        out.append(f'<text x="{x0 + 2}" y="{top + 11 + 12 * (i % 3)}" font-size="10" '
                   f'fill="{ink}">{escape(b.label)}</text>')
    out += _axes(f, [(t, _label(t)) for t in x_ticks], y_ticks, x_label, y_label)
    for i, s in enumerate(series):
        out += _polylines(f, s.xs, s.ys, PALETTE[i % len(PALETTE)], s.connect)
    out += _legend(names, width, row)
    out.append("</svg>")
    return "\n".join(out)


# the percentile plot's x axis: 1 / (1 - p), on a log scale, as HdrHistogram's plotter draws it
PERCENTILE_TICKS = (0.0, 90.0, 99.0, 99.9, 99.99, 99.999)


def _nines(percentile: float) -> float:
    return math.log10(1.0 / max(1.0 - percentile / 100.0, 1e-7))


def percentile_chart(title: str, curves: Mapping[str, Sequence[tuple[float, float]]], *,
                     y_label: str = "latency (ms)", width: int = WIDTH, height: int = HEIGHT) -> str:
    """Latency against percentile, the x axis stretched towards the tail (each tick one more
    nine), one line per curve of (percentile, value) points."""
    points = [(p, v) for c in curves.values() for p, v in c]
    if not points:
        return line_chart(title, [], x_label="percentile", y_label=y_label, width=width, height=height)
    top = max(p for p, _ in points)
    ticks = [t for t in PERCENTILE_TICKS if t <= max(top, 99.0)]
    series = [Series(name, [_nines(p) for p, _ in c], [v for _, v in c]) for name, c in curves.items()]
    ys = [v for _, v in points]
    y_ticks = nice_ticks(0.0, max(ys) if max(ys) > 0 else 1.0, 4)
    f = _Frame((0.0, max(_nines(ticks[-1]), _nines(top))), (0.0, max(y_ticks[-1], max(ys))), width, height)
    out = _open(title, width, height)
    out += _axes(f, [(_nines(t), f"{t:g}%") for t in ticks], y_ticks, "percentile", y_label)
    for i, s in enumerate(series):
        out += _polylines(f, s.xs, s.ys, PALETTE[i % len(PALETTE)])
    out += _legend(list(curves), width)
    out.append("</svg>")
    return "\n".join(out)


@dataclass(frozen=True)
class Mark:
    """A vertical line through night `at` of a nights chart (the first night of what it marks),
    labelled: a change point for the worse ("worse") or the better ("better"), a dependency
    version changed ("version"), another machine ("machine"), a verdict that flipped ("flip")."""

    at: float
    label: str
    kind: str = "worse"


MARK_STYLE = {"worse": ("#d62728", ""), "better": ("#1a7f37", ""),
              "version": ("#7f7f7f", ' stroke-dasharray="4 3"'),
              "machine": ("#6a3d9a", ' stroke-dasharray="6 2 1 2"'),
              "flip": ("#8e1b1b", ' stroke-dasharray="1 2"')}


def night_ticks(labels: Sequence[str], width: int) -> list[int]:
    """The nights whose label is printed: as many as fit side by side (about 6 px a character at
    the axis's font size), evenly spaced, the newest always among them."""
    n = len(labels)
    if not n:
        return []
    fit = max(1, (width - LEFT - RIGHT) // (6 * max(len(t) for t in labels) + 12))
    step = max(1, math.ceil(n / fit))
    last = n - 1
    return [i for i in range(0, n, step) if last - i >= step or i == last] + ([last] if last % step else [])


def nights_chart(title: str, values: Sequence[float | None], *, labels: Sequence[str],
                 links: Sequence[str | None] = (), tips: Sequence[str] = (),
                 band: tuple[float, float] | None = None, marks: Sequence[Mark] = (),
                 integer: bool = False, width: int = WIDTH, height: int = HEIGHT) -> str:
    """One figure night by night: a point a night (a link to its report where given, `tips` its
    tooltip), the noise band shaded across, and marks through their night: change points,
    version and machine changes, verdict flips. The title carries the unit; `integer` keeps
    the ticks whole (a count)."""
    ys = _finite(values) + (list(band) if band else [])
    if not _finite(values):
        return "\n".join([*_open(title, width, height),
                          f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">not measured</text>',
                          "</svg>"])
    n = len(values)
    y_ticks = nice_ticks(0.0, max(ys) if max(ys) > 0 else 1.0, 4, integer)
    f = _Frame((-0.5, n - 0.5), (0.0, max(y_ticks[-1], max(ys))), width, height)
    out = _open(title, width, height)
    if band:
        lo, hi = f.y(band[1]), f.y(band[0])
        out.append(f'<rect class="noise" x="{LEFT}" y="{lo}" width="{width - LEFT - RIGHT}" '
                   f'height="{round(max(hi - lo, 1.0), 1)}" fill="#9ecae1" fill-opacity="0.35">'
                   f'<title>the noise band: the level since the last change, +- 2 noise sd</title></rect>')
    x_ticks = [(float(i), labels[i]) for i in night_ticks(labels, width)]
    out += _axes(f, x_ticks, y_ticks, "night", "")
    for k, m in enumerate(marks):
        color, dash = MARK_STYLE.get(m.kind, MARK_STYLE["worse"])
        x = f.x(m.at)
        out.append(f'<line class="{m.kind}" x1="{x}" y1="{f.top}" x2="{x}" y2="{height - BOTTOM}" '
                   f'stroke="{color}" stroke-width="1.5"{dash}><title>{escape(m.label)}</title></line>')
        anchor = ' text-anchor="end"' if x > width * 0.7 else ""
        dx = -3 if anchor else 3
        out.append(f'<text class="{m.kind}" x="{x + dx}" y="{f.top + 10 + 11 * (k % 3)}" font-size="10" '
                   f'fill="{color}"{anchor}>{escape(m.label)}</text>')
    out += _polylines(f, range(n), values, PALETTE[0], connect=True)
    for i, v in enumerate(values):
        if v is None or not math.isfinite(float(v)):
            continue
        tip = tips[i] if i < len(tips) else f"{labels[i]}: {_label(float(v))}"
        dot = (f'<circle class="night" cx="{f.x(i)}" cy="{f.y(float(v))}" r="3" fill="{PALETTE[0]}">'
               f'<title>{escape(tip)}</title></circle>')
        link = links[i] if i < len(links) else None
        out.append(f'<a href="{escape(link)}">{dot}</a>' if link else dot)
    out.append("</svg>")
    return "\n".join(out)
