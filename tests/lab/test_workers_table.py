"""The worker drain's summary table (issue 28): per-round ratios, their range, and what is missing."""

from __future__ import annotations

import pytest

from pgwork.tools.lab.workers_table import paired, ratio, table


@pytest.mark.parametrize(
    ("ours", "theirs", "expected"),
    [
        ([100.0, 200.0, 300.0], [100.0, 100.0, 100.0], [1.0, 2.0, 3.0]),
        ([100.0, 50.0], [0.0, 100.0], [0.5]),  # a round where the other side measured nothing drops out
        ([100.0], [0.0], None),  # none left: nan, never a made-up ratio
    ],
)
def test_paired_ratios_are_per_round(ours: list[float], theirs: list[float], expected: list[float] | None) -> None:
    got = paired(ours, theirs)
    if expected is None:
        assert len(got) == 1 and got[0] != got[0]
    else:
        assert got == expected


def test_ratio_is_the_median_of_rounds_with_its_range_and_na_when_a_side_did_not_run() -> None:
    figures = {("w", "batch 1"): [100.0, 300.0, 200.0], ("p", "batch 1"): [100.0, 100.0, 100.0]}
    assert ratio(figures, ("w", "batch 1"), ("p", "batch 1")) == "2.00x [1.00-3.00]"
    assert ratio(figures, ("w", "batch 1"), ("q", "batch 1")) == "n/a"


def test_table_names_the_timing_the_load_and_every_row_of_the_issue() -> None:
    figures = {(s, f"batch {b}"): [1000.0] for s in ("w", "a", "b", "p", "pp") for b in (1, 10, 100)}
    lines = table(
        figures,
        worker="w",
        api="a",
        bare="b",
        peer="p",
        peer_psycopg="pp",
        peer_version="1.6.0",
        rounds=5,
        load="1-min 3.0-4.0",
    )
    text = "\n".join(lines)
    assert "first start to last completion" in text and "1-min 3.0-4.0" in text and "5 interleaved rounds" in text
    assert "pgqueuer 1.6.0 + asyncpg, batch 100" in text and "psycopg driver" in text
    assert sum(line.startswith("| ") for line in lines) == 8  # header + the issue's seven rows
