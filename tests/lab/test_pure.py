"""The lab's pure parts: summaries, the CSV, the markdown and the targets, plan outlines."""

from __future__ import annotations

import math
import subprocess
import time
from pathlib import Path

import pytest

from pgwork.errors import InvalidArgument
from pgwork.tools.lab import claims, drain, pivot, report, results
from pgwork.tools.lab.claimers import ClaimerSpec, WorkerReport, _claimed
from pgwork.tools.lab.command import new_run_folder
from pgwork.tools.lab.history import claim_scan, describe_plan, find_buffers
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement, Row
from pgwork.tools.lab.stats import duplicates, pct_of_linear, percentile


@pytest.mark.parametrize(
    ("samples", "pct", "expected"),
    [
        ([1.0], 50, 1.0),
        ([1.0, 2.0], 50, 1.5),
        ([3.0, 1.0, 2.0], 50, 2.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 95, 4.8),
        ([5.0, 1.0], 0, 1.0),
        ([5.0, 1.0], 100, 5.0),
    ],
)
def test_percentile(samples: list[float], pct: float, expected: float) -> None:
    assert percentile(samples, pct) == pytest.approx(expected)


def test_percentile_of_nothing_is_nan_and_bad_pct_is_refused() -> None:
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError, match="pct"):
        percentile([1.0], 101)


@pytest.mark.parametrize(
    ("rate", "workers", "job_seconds", "expected"),
    [(5.0, 1, 0.2, 100.0), (78.4, 16, 0.2, 98.0), (40.0, 16, 0.2, 50.0), (1.0, 2, 3.0, 150.0)],
)
def test_pct_of_linear(rate: float, workers: int, job_seconds: float, expected: float) -> None:
    assert pct_of_linear(rate, workers, job_seconds) == pytest.approx(expected)


@pytest.mark.parametrize(("ids", "expected"), [([], 0), ([1, 2, 3], 0), ([1, 1, 2], 1), ([7] * 6, 5)])
def test_duplicates(ids: list[int], expected: int) -> None:
    assert duplicates(ids) == expected


def test_one_worker_points_may_run_fewer_jobs_and_deadlines_leave_room() -> None:
    full = claims.plan(False)
    assert full.workers == (1, 2, 4, 8, 16) and full.job_seconds == 0.2
    assert full.jobs_for(1) == 100 and full.jobs_for(16) == 400
    assert claims.deadline(400, 16, 0.2) > 400 * 0.2 / 16 * 3


def test_drain_plans_cover_the_batch_sizes_and_finishes() -> None:
    cases = drain.plan(False).cases
    assert {c.batch for c in cases} == {1, 10, 100}
    assert {c.claimers for c in cases} == {1, 2, 4, 8, 16}
    assert {(c.batch, c.finish) for c in cases} >= {(1, "each"), (100, "each"), (100, "many")}
    assert (1, "many") not in {(c.batch, c.finish) for c in cases}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"strategy": "magic"}, "strategy"),
        ({"finish": "some"}, "finish"),
        ({"strategy": "naive", "batch": 10}, "batch"),
    ],
)
def test_worker_spec_refuses_what_the_lab_cannot_run(kwargs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"dsn": "", "name": "w", "strategy": "skiplocked", "job_seconds": 0.0,
                               "deadline_seconds": 1.0}  # fmt: skip
    with pytest.raises(ValueError, match=message):
        ClaimerSpec(**{**base, **kwargs})  # type: ignore[arg-type]


def test_csv_round_trip_keeps_every_field(tmp_path: Path) -> None:
    path = tmp_path / "results" / "benchmark.csv"
    ms = [
        Measurement("claims", "skiplocked", "16", "claim p50", 0.91234567, "ms"),
        Measurement("x", "s", "1", "t", "a,b"),
    ]
    results.append(path, results.to_rows(ms, run="r1", recorded_at="t", mode="full"))
    results.append(path, results.to_rows(ms[:1], run="r2", recorded_at="t", mode="quick"))
    rows = results.read(path)
    assert [r.run for r in rows] == ["r1", "r1", "r2"]
    assert rows[0].value == "0.912346" and rows[0].number() == pytest.approx(0.912346)
    assert rows[1].value == "a,b" and math.isnan(rows[1].number())
    assert path.read_text().count("run,recorded_at") == 1


def test_reading_a_csv_with_other_columns_names_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="expected columns"):
        results.read(path)


def _row(run: str, mode: str, experiment: str, series: str, x: str, metric: str, value: str, unit: str = "") -> Row:
    return Row(run, "t", mode, experiment, series, x, metric, value, unit)


def test_select_prefers_the_newest_full_run_over_a_newer_quick_one() -> None:
    rows = [
        _row("1", "full", "claims", "a", "1", "m", "1"),
        _row("2", "full", "claims", "a", "1", "m", "2"),
        _row("3", "quick", "claims", "a", "1", "m", "3"),
        _row("4", "quick", "drain", "a", "1", "m", "4"),
    ]
    assert [r.value for r in pivot.select(rows, "claims")] == ["2"]
    assert [r.value for r in pivot.select(rows, "drain")] == ["4"]
    assert pivot.select(rows, "held") == []


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [("400", "", "400"), ("1286", "", "1,286"), ("0.0321", "ms", "0.032"), ("1.68", "ms", "1.68"),
     ("27.648", "ms", "27.6"), ("22000.4", "jobs/s", "22,000"), ("nan", "", ""), ("a|b", "", "a\\|b"),
     ("2", "s", "2.00"), ("0", "", "0")],
)  # fmt: skip
def test_fmt(value: str, unit: str, expected: str) -> None:
    assert pivot.fmt(value, unit) == expected


def _full_claims(p50: str, pct: str) -> list[Row]:
    return [
        _row("9", "full", "claims", "skiplocked", "16", "claim p50", p50, "ms"),
        _row("9", "full", "claims", "skiplocked", "16", "% of linear", pct, "%"),
    ]


@pytest.mark.parametrize(
    ("p50", "pct", "verdicts"),
    [("0.8", "99.1", ("met", "met")), ("1.2", "97.0", ("not met", "not met")), ("1.0", "98", ("met", "met"))],
)
def test_claim_targets_are_judged_on_full_runs(p50: str, pct: str, verdicts: tuple[str, str]) -> None:
    judged = {v.key: v for v in report.targets(_full_claims(p50, pct))}
    assert (judged["claim_p50_16"].met, judged["linear_16"].met) == verdicts
    assert judged["drain_1"].met == "not run"


def test_quick_runs_are_not_judged() -> None:
    rows = [
        _row(r.run, "quick", r.experiment, r.series, r.x, r.metric, r.value, r.unit) for r in _full_claims("0.1", "100")
    ]
    assert {v.met for v in report.targets(rows) if v.key in ("claim_p50_16", "linear_16")} == {"not judged (quick run)"}


def _history(buffers: str, p50_last: str, last: str = "1000000") -> list[Row]:
    return [
        _row("9", "full", "history", "partial index", "0", "shared hit", "7", "buffers"),
        _row("9", "full", "history", "partial index", last, "shared hit", buffers, "buffers"),
        _row("9", "full", "history-latency", "claim", "0", "claim p50", "1.0", "ms"),
        _row("9", "full", "history-latency", "claim", last, "claim p50", p50_last, "ms"),
    ]


@pytest.mark.parametrize(
    ("buffers", "p50_last", "last", "verdict"),
    [("8", "1.05", "1000000", "met"), ("11", "1.0", "1000000", "not met"), ("8", "1.2", "1000000", "not met"),
     ("8", "0.7", "1000000", "met"),
     ("8", "1.0", "500000", "not judged (point missing)")],
)  # fmt: skip
def test_history_target(buffers: str, p50_last: str, last: str, verdict: str) -> None:
    judged = {v.key: v for v in report.targets(_history(buffers, p50_last, last))}
    assert judged["history_flat"].met == verdict


@pytest.mark.parametrize(
    ("rates", "key", "verdict"),
    [({"batch 1, finish each": "1200"}, "drain_1", "met"), ({"batch 1, finish each": "900"}, "drain_1", "not met"),
     ({"batch 100, finish each": "9000", "batch 100, finish many": "23000"}, "drain_100", "met")],
)  # fmt: skip
def test_drain_targets_take_the_best_case(rates: dict[str, str], key: str, verdict: str) -> None:
    rows = [_row("9", "full", "drain", s, "4", "jobs/s", v, "jobs/s") for s, v in rates.items()]
    judged = {v.key: v for v in report.targets(rows)}
    assert judged[key].met == verdict


def test_render_builds_tables_from_rows_only() -> None:
    rows = [
        _row("9", "full", "machine", "this machine", "", "cores", "2"),
        *_full_claims("0.9", "99"),
        _row("9", "full", "claims", "naive", "16", "executions", "1300"),
    ]
    doc = report.render(rows, ["img/bench-claims-throughput.png"])
    assert "| cores | 2 |" in doc
    assert "| skiplocked | 16 | 0.900 | 99 |  |" in doc
    assert "| naive | 16 |  |  | 1,300 |" in doc
    assert "![img/bench-claims-throughput.png](img/bench-claims-throughput.png)" in doc
    assert "## 4. Crash timeline\n\n_Not run yet._" in doc


PLAN = {
    "Node Type": "ModifyTable",
    "Plans": [
        {
            "Node Type": "Nested Loop",
            "Plans": [
                {"Node Type": "LockRows", "Plans": [{"Node Type": "Sort", "Plans": [
                    {"Node Type": "Seq Scan", "Relation Name": "jobs"}]}]},
                {"Node Type": "Index Scan", "Index Name": "jobs_pkey"},
            ],
        }
    ],
}  # fmt: skip


def test_find_buffers_counts_the_lockrows_subtree_only() -> None:
    plan = {"Node Type": "ModifyTable", "Shared Hit Blocks": 16, "Plans": [
        {"Node Type": "LockRows", "Shared Hit Blocks": 3, "Shared Read Blocks": 1, "Plans": []}]}  # fmt: skip
    assert find_buffers(plan) == 4
    assert find_buffers({"Node Type": "Result"}) == 0


def test_plan_outline_and_the_claims_scan() -> None:
    assert (
        describe_plan(PLAN)
        == "ModifyTable (Nested Loop (LockRows (Sort (Seq Scan on jobs)), Index Scan using jobs_pkey))"
    )
    assert claim_scan(PLAN) == "Sort (Seq Scan on jobs)"
    assert claim_scan({"Node Type": "Result"}) == ""
    # The claim's two arms: the one for any type cut off by its one-time filter, the typed one reading.
    empty_arm = {"Node Type": "LockRows", "Actual Loops": 1, "Plans": [{"Node Type": "Result", "Actual Loops": 1}]}
    typed_arm = {
        "Node Type": "LockRows",
        "Actual Loops": 1,
        "Plans": [{"Node Type": "Index Scan", "Index Name": "jobs_claim_type_idx", "Relation Name": "jobs"}],
    }
    both = {"Node Type": "Append", "Plans": [empty_arm, typed_arm]}
    assert claim_scan(both) == "Index Scan using jobs_claim_type_idx"


def test_empty_claims_while_jobs_wait_count_toward_the_next_claim() -> None:
    report = WorkerReport("w")
    t = time.perf_counter()
    assert _claimed(report, [], t - 0.002) == []
    assert _claimed(report, [7], t - 0.001) == [7]
    assert _claimed(report, [], t - 0.004) == []  # the queue is drained: counts toward nothing
    assert len(report.claim_ms) == 1 and 2.9 < report.claim_ms[0] < 4.0
    assert report.empty_claims == 2 and report.claim_seconds > 0.006


def test_every_planned_run_is_listed_once_with_the_jittered_extras_last() -> None:
    p = claims.plan(False)
    runs = claims.runs(p)
    assert len(runs) == len(p.strategies) * len(p.workers) + len(p.jittered_at)
    assert runs[-2:] == [(claims.JITTERED, "skiplocked", 8, 0.5), (claims.JITTERED, "skiplocked", 16, 0.5)]
    with pytest.raises(ValueError, match="jitter"):
        ClaimerSpec("", "w", "skiplocked", 0.2, 1.0, jitter=1.0)


@pytest.mark.parametrize("name", ["test", "postgres", "bad-name", "pgwork_lab;drop", "pgwork_lab_" + "x" * 60])
def test_the_lab_refuses_a_database_it_must_not_drop(name: str) -> None:
    with pytest.raises(InvalidArgument, match="--database"):
        LabDatabase("postgresql://nobody@127.0.0.1:1/none", name)


def test_side_by_side_quotes_the_reference_and_reads_ours_from_rows() -> None:
    rows = [
        _row("9", "full", "claims", "naive", "16", "executions", "1300"),
        _row("9", "full", "claims", "naive", "16", "jobs", "400"),
        _row("9", "full", "claims", "skiplocked", "16", "claim p50", "0.91", "ms"),
        _row("9", "full", "history-sizes", "jobs_claim_idx", "1000000", "bytes", "81920", "B"),
        _row(
            "9", "full", "history-sizes", "jobs_claim_full_idx (control, not shipped)", "1000000", "bytes", "40960000"
        ),
    ]
    table = {figure: (ref, here) for figure, ref, here in report.side_by_side(rows)}
    assert table["naive, 16 workers: executions for the jobs"] == ("1,286 for 400", "1,300 for 400")
    assert table["skiplocked, 16 workers: claim p50"] == ("1.68 ms", "0.910 ms")
    assert table["full index / partial claim index"] == ("~475x (at 500,000 rows)", "500x (at 1,000,000 rows)")
    assert table["held, 3 s jobs: longest open transaction"] == ("2.52 s", "not run")


def test_a_section_from_another_server_or_cpu_says_which() -> None:
    def machine(run: str, pg: str, server: str, cpu: str = "AMD EPYC") -> list[Row]:
        return [
            Row(run, "t", "full", "machine", "this machine", "", "postgresql", pg, ""),
            Row(run, "t", "full", "machine", "this machine", "", "server", server, ""),
            *([Row(run, "t", "full", "machine", "this machine", "", "cpu", cpu, "")] if cpu else []),
        ]

    rows = (
        machine("20261203T1", "18.6", "embedded (Unix socket)")
        + machine("20261203T3", "15.8", "local server", "Intel(R) Xeon(R) Processor")
        + machine("20261203T4", "15.8", "local server", "")
        + machine("20261203T5", "15.8", "local server")
    )
    page = "".join(f"_Run 20261203T{n} (full mode)._\n\n" for n in (1, 3, 4, 5)) + "_Run 20261202T9 (quick mode)._\n"
    assert pivot.with_servers(page, rows) == (
        "_Run 20261203T1 (full mode), on PostgreSQL 18.6, embedded (Unix socket), AMD EPYC._\n\n"
        "_Run 20261203T3 (full mode), on PostgreSQL 15.8, local server, Intel(R) Xeon(R) Processor._\n\n"
        "_Run 20261203T4 (full mode), on PostgreSQL 15.8, local server._\n\n"  # its CPU was not recorded
        "_Run 20261203T5 (full mode)._\n\n"  # the newest run's server and CPU are the ones under Machine
        "_Run 20261202T9 (quick mode)._\n"  # no machine rows for it: nothing to say
    )


def test_benchs_default_folder_is_ignored_by_git(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    out = new_run_folder(tmp_path, "20260101T000000Z")
    (out / "results").mkdir()
    (out / "results" / "benchmark.csv").write_text("x\n")
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.name == "pgwork-bench-20260101T000000Z"
    assert status.stdout == ""


_RENDERED = "# Page\n\n## 1. One\n\nnew one\n\n## 2. Two\n\nnew two\n"


@pytest.mark.parametrize(
    ("existing", "expected"),
    [
        # Nothing the generator lacks: the rendered page as it is.
        ("", _RENDERED),
        ("# Page\n\n## 1. One\n\nold one\n", _RENDERED),
        # A script's section 3 stays, after the generated ones; 1 and 2 come from the CSV.
        (
            "# Page\n\n## 1. One\n\nold one\n\n## 3. Script\n\nfigures\n\n### Sub\n\nmore\n",
            _RENDERED + "\n## 3. Script\n\nfigures\n\n### Sub\n\nmore\n",
        ),
        # In number order, whatever order the old page had them in.
        (
            "## 5. Five\n\nfive\n\n## 2. Two\n\nold two\n\n## 4. Four\n\nfour\n",
            _RENDERED + "\n## 4. Four\n\nfour\n\n## 5. Five\n\nfive\n",
        ),
        # A `## ` heading without a number ends the section before it and is not kept itself.
        ("## 3. Script\n\nfigures\n\n## Appendix\n\nx\n", _RENDERED + "\n## 3. Script\n\nfigures\n"),
    ],
)
def test_regenerating_the_page_keeps_the_sections_a_script_wrote(existing: str, expected: str) -> None:
    assert pivot.keep_written_sections(_RENDERED, existing) == expected
