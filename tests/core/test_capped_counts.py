"""Pure parts of the bounded backlog reading: which counts are lower bounds, the operator's cap,
summing capped figures, `pgwork stats` rows, and `--job-types` as a person types it."""

from __future__ import annotations

import pytest

from pgwork.commands.reports import stats_rows
from pgwork.errors import InvalidArgument
from pgwork.models import TypeStats
from pgwork.operator.db import count_cap, sum_backlog
from pgwork.validation import parse_job_types


def _stats(job_type: str, ready: int, running: int = 0, dead: int = 0, cap: int | None = 10) -> TypeStats:
    return TypeStats(job_type, ready, 0, 0, running, dead, 1.5, 2.5, cap)


@pytest.mark.parametrize(
    ("stats", "expected"),
    [
        (_stats("a", 9), ()),
        (_stats("a", 10), ("ready",)),
        (_stats("a", 10, running=10, dead=10), ("ready", "running", "dead")),
        (_stats("a", 500, cap=None), ()),  # exact: nothing is a lower bound
        (TypeStats("a", 0, 0, 0, 0, 0, 0.0, 0.0), ()),  # rows made before caps existed
    ],
)
def test_lower_bounds_are_the_counts_that_reached_the_cap(stats: TypeStats, expected: tuple[str, ...]) -> None:
    assert stats.lower_bounds() == expected


@pytest.mark.parametrize(
    ("max_replicas", "target", "cap"),
    [(10, 10, 101), (1, 1, 2), (0, 5, 6), (50, 200, 10_001)],
)
def test_the_cap_is_one_past_what_max_replicas_can_take(max_replicas: int, target: int, cap: int) -> None:
    assert count_cap(max_replicas, target) == cap


def test_a_sum_is_a_lower_bound_when_one_of_its_terms_is() -> None:
    stats = [_stats("a", 10, running=3), _stats("b", 4, dead=10), _stats("other", 10, running=10)]
    backlog = sum_backlog(stats, ["a", "b"])
    assert (backlog.ready, backlog.running, backlog.dead) == (14, 3, 10)
    assert backlog.lower_bounds == ("ready", "dead")
    assert sum_backlog(stats, ["b"]).lower_bounds == ("dead",)
    assert sum_backlog(stats, ["missing"]).lower_bounds == ()


@pytest.mark.parametrize(
    ("waiting", "cap", "total", "lower"),
    [
        ({"a": 3, "b": 4, "other": 50}, 10, 7, ()),  # another queue's type is not ours
        ({"a": 10, "b": 4}, 10, 14, ("waiting",)),  # a type at the cap: at least
        ({"a": 500}, None, 500, ()),  # exact reading
        ({}, 10, 0, ()),
    ],
)
def test_waiting_jobs_are_summed_apart_from_the_backlog(
    waiting: dict[str, int], cap: int | None, total: int, lower: tuple[str, ...]
) -> None:
    backlog = sum_backlog([_stats("a", 2)], ["a", "b"], waiting, cap)
    assert (backlog.waiting, backlog.ready, backlog.lower_bounds) == (total, 2, lower)


def test_stats_rows_mark_capped_counts_in_the_table_and_name_them_in_json() -> None:
    stats = [_stats("a", 10, running=2)]
    [table] = stats_rows(stats, as_json=False)
    assert (table["ready"], table["running"], "cap" in table) == (">=10", 2, False)
    [doc] = stats_rows(stats, as_json=True)
    assert (doc["ready"], doc["lower_bounds"], doc["cap"]) == (10, ["ready"], 10)


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        (None, None),
        (["a,b"], ["a", "b"]),
        (["a", "b"], ["a", "b"]),
        ([" a , b", "c"], ["a", "b", "c"]),
        (["a,b,a"], ["a", "b"]),
    ],
)
def test_job_types_as_the_worker_takes_them(typed: list[str] | None, expected: list[str] | None) -> None:
    assert parse_job_types(typed) == expected


@pytest.mark.parametrize("typed", [["a,,b"], ["a,"], [""], ["x" * 201]])
def test_bad_job_types_name_the_option_and_the_fix(typed: list[str]) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_job_types(typed)
    assert "--job-types" in str(info.value)
