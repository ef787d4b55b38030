"""From the CSV's rows to tables: pick an experiment's newest run, pivot it, format its numbers.

Pure: rows in, tables and markdown out. `report` lays the tables out into docs/benchmarks.md and
`plots` draws from the same pivots.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pgwork.tools.lab.results import Row


def select(rows: Sequence[Row], experiment: str) -> list[Row]:
    """The rows of the newest full run of an experiment, else of its newest quick run."""
    mine = [r for r in rows if r.experiment == experiment]
    if not mine:
        return []
    full = [r for r in mine if r.mode == "full"]
    pool = full or mine
    run = max(r.run for r in pool)
    return [r for r in pool if r.run == run]


def fmt(value: str, unit: str = "") -> str:
    try:
        v = float(value)
    except ValueError:
        return value.replace("|", "\\|")
    if math.isnan(v):
        return ""
    if v == int(v) and abs(v) >= 1 and unit not in ("ms", "s"):
        return f"{int(v):,}"
    if v == 0:
        return "0"
    if abs(v) < 1:
        return f"{v:.3f}"
    if abs(v) < 10:
        return f"{v:.2f}"
    if abs(v) < 100:
        return f"{v:.1f}"
    return f"{v:,.0f}"


@dataclass(frozen=True)
class Table:
    keys: list[tuple[str, str]]
    metrics: list[str]
    units: dict[str, str]
    cells: dict[tuple[str, str, str], str]

    def value(self, series: str, x: str, metric: str) -> float:
        try:
            return float(self.cells.get((series, x, metric), "nan"))
        except ValueError:
            return math.nan


def pivot(rows: Sequence[Row]) -> Table:
    keys: list[tuple[str, str]] = []
    metrics: list[str] = []
    units: dict[str, str] = {}
    cells: dict[tuple[str, str, str], str] = {}
    for r in rows:
        if (r.series, r.x) not in keys:
            keys.append((r.series, r.x))
        if r.metric not in metrics:
            metrics.append(r.metric)
            units[r.metric] = r.unit
        cells[(r.series, r.x, r.metric)] = r.value
    return Table(keys, metrics, units, cells)


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def render_pivot(
    table: Table, series_name: str, x_name: str, *, skip: Sequence[str] = (), x_first: bool = False
) -> str:
    metrics = [m for m in table.metrics if m not in skip]
    header = [x_name, series_name] if x_first else [series_name, x_name]
    header += [f"{m} ({table.units[m]})" if table.units[m] and table.units[m] != m else m for m in metrics]
    body = []
    for series, x in table.keys:
        lead = [x, series] if x_first else [series, x]
        body.append(lead + [fmt(table.cells.get((series, x, m), ""), table.units[m]) for m in metrics])
    return markdown_table(header, body)


def run_note(rows: Sequence[Row]) -> str:
    """The line under a section's heading: which run its figures come from, or that none has."""
    return f"_Run {rows[0].run} ({rows[0].mode} mode)._" if rows else "_Not run yet._"


def section(title: str, rows: Sequence[Row], prose: str, axes: tuple[str, str]) -> list[str]:
    """A numbered section of docs/benchmarks.md: its heading, when it ran, what it measures, and its
    table (once run)."""
    parts = [title, "", run_note(rows), "", prose, ""]
    if rows:
        parts += [render_pivot(pivot(rows), *axes), ""]
    return parts


_RUN_NOTE = re.compile(r"^_Run (\S+) \((\w+) mode\)\._$", re.MULTILINE)


def with_servers(page: str, rows: Sequence[Row]) -> str:
    """Each section's run line names the server and the CPU its run used when they differ from
    the newest run's (shown under Machine): sections are refreshed one experiment at a time, WAL
    or latency figures from an embedded server and from the shared local one do not compare, and
    sessions run on machines of one kind with different CPUs, which weigh a Python client's work
    differently (issue 28: the same worker read 0.80x the bare loop on one, 0.46x on another)."""
    runs = {r.run for r in rows if r.experiment == "machine"}
    described = {run: _where(rows, run) for run in runs}
    newest = select(rows, "machine")
    shown = described.get(newest[0].run) if newest else None

    def note(m: re.Match[str]) -> str:
        where = described.get(m.group(1))
        if not where or where == shown:
            return m.group(0)
        return f"_Run {m.group(1)} ({m.group(2)} mode), on {where}._"

    return _RUN_NOTE.sub(note, page)


def _where(rows: Sequence[Row], run: str) -> str:
    """'PostgreSQL 15.20, local server, AMD EPYC': what is known of a run's server and CPU."""
    pg, server, cpu = (_value(rows, run, metric) for metric in ("postgresql", "server", "cpu"))
    parts = [f"PostgreSQL {pg}, {server}" if pg and server else "", cpu]
    return ", ".join(p for p in parts if p)


def _value(rows: Sequence[Row], run: str, metric: str) -> str:
    return next((r.value for r in rows if r.run == run and r.experiment == "machine" and r.metric == metric), "")


_SECTION = re.compile(r"^## (\d+)\. ", re.MULTILINE)


def keep_written_sections(rendered: str, existing: str) -> str:
    """`rendered` with the numbered sections of `existing` that it has no section of that number
    for, in number order after its own: sections a script wrote into the page from figures the
    CSV does not hold (docs/benchmarks.md 18 and on), which regenerating the page from the CSV
    must not drop. A section runs from its `## N.` heading to the next `## ` heading."""
    ours = {int(m.group(1)) for m in _SECTION.finditer(rendered)}
    theirs = _sections(existing)
    kept = [text for number, text in sorted(theirs.items()) if number not in ours]
    if not kept:
        return rendered
    return rendered.rstrip("\n") + "\n\n" + "\n\n".join(t.strip("\n") for t in kept) + "\n"


def _sections(page: str) -> dict[int, str]:
    starts = [(m.start(), int(m.group(1))) for m in _SECTION.finditer(page)]
    found: dict[int, str] = {}
    for start, number in starts:
        end = page.find("\n## ", start + 1)
        found.setdefault(number, page[start : end + 1 if end >= 0 else len(page)])
    return found
