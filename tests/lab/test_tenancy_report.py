"""docs/benchmarks.md sections 11 and 12, from CSV rows (pure): tables, and verdicts against issue 14's targets."""

from __future__ import annotations

import pytest

from pgwork.tools.lab import backlog, noisy, report, report_tenancy
from pgwork.tools.lab.results import Measurement, Row, to_rows


def _rows(mode: str, measurements: list[Measurement]) -> list[Row]:
    return to_rows(measurements, run="r1", recorded_at="t", mode=mode)


def _noisy(top: str, buffers: int, p50_top: float) -> list[Measurement]:
    return [
        Measurement(noisy.NAME, noisy.TYPED, "0", "claim p50", 1.0, "ms"),
        Measurement(noisy.NAME, noisy.TYPED, "0", "finding the row", 4, "buffers"),
        Measurement(noisy.NAME, noisy.TYPED, top, "claim p50", p50_top, "ms"),
        Measurement(noisy.NAME, noisy.TYPED, top, "finding the row", buffers, "buffers"),
    ]


def test_claim_target_is_judged_only_on_a_full_run_that_reached_a_million() -> None:
    doc = report.render(_rows("full", _noisy("1000000", 8, 1.1)))
    assert "## 11. Noisy neighbour" in doc and "(+10%): met." in doc
    assert "(+50%): not met." in report.render(_rows("full", _noisy("1000000", 8, 1.5)))
    # 4 buffers at no backlog: up to 8 more (one index level per ring segment) is A's backlog costing nothing.
    assert "Here: 12 buffers to find the row at 1,000,000 pending A (4 at none)" in report.render(
        _rows("full", _noisy("1000000", 12, 1.0))
    )
    assert "(+0%): met." in report.render(_rows("full", _noisy("1000000", 12, 1.0)))
    assert "not met." in report.render(_rows("full", _noisy("1000000", 13, 1.0)))
    assert "not judged (1M not run)" in report.render(_rows("full", _noisy("100000", 8, 1.0)))
    assert "not judged (quick run)" in report.render(_rows("quick", _noisy("1000000", 8, 1.0)))


def test_poll_target_needs_ten_million_and_twenty_ms() -> None:
    def doc(x: str, ms: float, mode: str = "full") -> str:
        return report.render(_rows(mode, [Measurement(backlog.NAME, backlog.CAPPED, x, "db time p50", ms, "ms")]))

    assert "## 12. The operator's backlog reading" in doc("0", 1.0)
    assert "at 10,000,000 pending over 100 types: met." in doc("10000000", 12.0)
    assert "not met." in doc("10000000", 25.0)
    assert "not judged (10M not run)" in doc("1000000", 5.0)
    assert "not judged (quick run)" in doc("10000000", 5.0, "quick")


@pytest.mark.parametrize(
    ("scans", "folded"),
    [
        ("Index Scan using jobs_claim_idx, Seq Scan on jobs", "Index Scan using jobs_claim_idx, Seq Scan on jobs"),
        (
            ", ".join(f"Index Scan using ready_{n}_priority_idx" for n in range(8)) + ", Index Scan using jobs_pkey",
            "Index Scan using ready_{0-7}_priority_idx, Index Scan using jobs_pkey",
        ),
        (
            "Index Scan using ready_0_x, Seq Scan on jobs, Tid Scan on ready_0, Index Scan using ready_1_x, "
            "Tid Scan on ready_1",
            "Index Scan using ready_{0-1}_x, Seq Scan on jobs, Tid Scan on ready_{0-1}",
        ),
        ("Index Scan using ready_3_x", "Index Scan using ready_3_x"),
        ("Tid Scan on ready_0, Tid Scan on ready_2", "Tid Scan on ready_{0,2}"),
        ("", ""),
    ],
)
def test_fold_segments_writes_the_rings_per_segment_scans_once(scans: str, folded: str) -> None:
    assert report_tenancy.fold_segments(scans) == folded
