"""docs/benchmarks.md section 17 (pure): the newest side-by-side run is the section's table, and the
newest run of pgwork alone follows under its own heading; neither is mistaken for the other."""

from __future__ import annotations

from pgwork.tools.lab.report_mvcc import render, split
from pgwork.tools.lab.results import Row


def _row(run: str, series: str, x: str, metric: str, value: float) -> Row:
    return Row(run, "2026-12-05T00:00:00+00:00", "full", "mvcc", series, x, metric, str(value), "ms")


SHARED = [
    _row("R1", "pgwork, case b", "60 s", "claim p50", 5.0),
    _row("R1", "pgqueuer, case b", "60 s", "claim p50", 24.0),
    _row("R1", "pgwork, case b", "summary", "claim p50 warm-up", 2.0),
]
ALONE = [
    _row("R2", "pgwork, case b", "60 s", "claim p50", 2.1),
    _row("R2", "pgwork, case b", "60 s", "autovacuums", 3),
    _row("R2", "pgwork, case b", "summary", "claim p50 warm-up", 1.7),
]
OLDER_ALONE = [_row("R0", "pgwork, case c", "60 s", "claim p50", 9.9)]


def test_split_keeps_the_newest_of_each_kind() -> None:
    together, alone = split(OLDER_ALONE + SHARED + ALONE)
    assert {r.run for r in together} == {"R1"}
    assert {r.run for r in alone} == {"R2"}


def test_both_tables_in_order_with_the_alone_one_under_its_heading() -> None:
    text = "\n".join(render(SHARED + ALONE + OLDER_ALONE))
    assert text.index("_Run R1") < text.index("### pgwork alone") < text.index("_Run R2")
    assert "24.0" in text and "autovacuums" in text and "9.90" not in text


def test_no_runs_no_tables() -> None:
    text = "\n".join(render([]))
    assert "### pgwork alone" not in text and "_Not run yet._" in text
