"""Throughput and failure-rate charts as inline SVG, drawn on the server (pure).

A few dozen bars need no charting library: the SVG is built from numbers only (no job-controlled
text goes into it), styled by presentation attributes, which the Content-Security-Policy allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

WIDTH, HEIGHT, PAD = 600, 140, 24


@dataclass(frozen=True)
class Bar:
    start: datetime
    finished: int
    dead: int

    @property
    def failure_rate(self) -> float:
        total = self.finished + self.dead
        return self.dead / total if total else 0.0


def _label(moment: datetime) -> str:
    return moment.strftime("%H:%M")


def throughput_svg(bars: Sequence[Bar], cap: int) -> str:
    """Stacked bars: finished (succeeded or cancelled) and dead per bucket; a bucket at `cap`
    is marked as "at least"."""
    if not bars:
        return ""
    top = max(*(b.finished + b.dead for b in bars), 1)
    step = (WIDTH - 2 * PAD) / len(bars)
    out = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="jobs finished and dead per bucket">',
        f'<text x="{PAD}" y="12" font-size="10" fill="#555">max {top} per bucket</text>',
    ]
    for i, b in enumerate(bars):
        x = PAD + i * step
        h_ok = (HEIGHT - 2 * PAD) * b.finished / top
        h_dead = (HEIGHT - 2 * PAD) * b.dead / top
        base = HEIGHT - PAD
        out.append(
            f'<rect x="{x + 1:.1f}" y="{base - h_ok:.1f}" width="{step - 2:.1f}" height="{h_ok:.1f}" fill="#4a8">'
            f"<title>{_label(b.start)}: {b.finished}{'+' if b.finished >= cap else ''} finished</title></rect>"
        )
        out.append(
            f'<rect x="{x + 1:.1f}" y="{base - h_ok - h_dead:.1f}" width="{step - 2:.1f}" height="{h_dead:.1f}" '
            f'fill="#c44"><title>{_label(b.start)}: {b.dead}{"+" if b.dead >= cap else ""} dead</title></rect>'
        )
        if i % max(1, len(bars) // 6) == 0:
            out.append(f'<text x="{x:.1f}" y="{HEIGHT - 8}" font-size="10" fill="#555">{_label(b.start)}</text>')
    out.append("</svg>")
    return "".join(out)


def failure_svg(bars: Sequence[Bar]) -> str:
    """The share of finished jobs that ended dead, per bucket, as a line from 0 to 100%."""
    if not bars:
        return ""
    step = (WIDTH - 2 * PAD) / max(len(bars) - 1, 1)
    points = " ".join(
        f"{PAD + i * step:.1f},{HEIGHT - PAD - (HEIGHT - 2 * PAD) * b.failure_rate:.1f}" for i, b in enumerate(bars)
    )
    worst = max(b.failure_rate for b in bars)
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="failure rate per bucket">'
        f'<text x="{PAD}" y="12" font-size="10" fill="#555">dead share, worst {worst:.0%}</text>'
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" stroke="#aaa"/>'
        f'<polyline points="{points}" fill="none" stroke="#c44" stroke-width="2"/>'
        "</svg>"
    )
