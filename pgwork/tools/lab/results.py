"""Measurements and results/benchmark.csv: one row per figure, appended, never rewritten.

A row is (run, recorded_at, mode, experiment, series, x, metric, value, unit): `series` and `x`
locate the figure in its experiment's table (e.g. strategy=skiplocked, x=16 workers), `metric`
names the column. The markdown is regenerated from these rows alone.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

COLUMNS = ("run", "recorded_at", "mode", "experiment", "series", "x", "metric", "value", "unit")

Value = float | int | str


@dataclass(frozen=True)
class Measurement:
    experiment: str
    series: str
    x: str
    metric: str
    value: Value
    unit: str = ""


@dataclass(frozen=True)
class Row:
    run: str
    recorded_at: str
    mode: str
    experiment: str
    series: str
    x: str
    metric: str
    value: str
    unit: str

    def number(self) -> float:
        """The value as a number; NaN when it is text."""
        try:
            return float(self.value)
        except ValueError:
            return math.nan


def format_value(value: Value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"
    return str(value)


def to_rows(measurements: Iterable[Measurement], *, run: str, recorded_at: str, mode: str) -> list[Row]:
    return [
        Row(run, recorded_at, mode, m.experiment, m.series, m.x, m.metric, format_value(m.value), m.unit)
        for m in measurements
    ]


def append(path: Path, rows: Sequence[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        if new:
            writer.writerow(COLUMNS)
        for r in rows:
            writer.writerow([getattr(r, c) for c in COLUMNS])


def read(path: Path) -> list[Row]:
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is None or tuple(reader.fieldnames) != COLUMNS:
            raise ValueError(f"{path}: expected columns {','.join(COLUMNS)}, found {reader.fieldnames}")
        return [Row(**{c: rec[c] for c in COLUMNS}) for rec in reader]


@dataclass
class Outcome:
    """What an experiment measured, and which of pgwork's correctness facts failed (if any)."""

    measurements: list[Measurement]
    violations: list[str]
    facts_checked: int = 0
