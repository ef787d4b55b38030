"""Limits as values: rates as people write them, and every bad value refused with the field and
the fix, by the CLI, by the Queue and by the database itself (set_limit and CHECK constraints)."""

from __future__ import annotations

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.errors import InvalidArgument
from pgwork.limits import Rate, check_limit, describe, format_rate, parse_rate
from tests.support.cli import pgwork


@pytest.mark.parametrize(
    ("text", "count", "seconds", "shown"),
    [
        ("60/m", 60, 60, "60/m"),
        ("5/s", 5, 1, "5/s"),
        ("1000/h", 1000, 3600, "1000/h"),
        ("1/d", 1, 86400, "1/d"),
        ("100/10s", 100, 10, "100/10s"),
        ("100/60s", 100, 60, "100/m"),
        ("3/2h", 3, 7200, "3/2h"),
        (" 60 / M ", 60, 60, "60/m"),
    ],
)
def test_rates_as_people_write_them(text: str, count: int, seconds: int, shown: str) -> None:
    rate = parse_rate(text)
    assert (rate.count, rate.seconds) == (count, seconds)
    assert format_rate(rate.count, rate.seconds) == str(rate) == shown


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("60m", "'60m' is not a rate"),
        ("60/y", "'y' is not a unit of time"),
        ("60/min", "'min' is not a unit of time"),
        ("0/m", "allows no claim at all"),
        ("-5/m", "is not a rate"),
        ("1.5/s", "is not a rate"),
        ("60/0s", "outside 1 s..1 d"),
        ("1/2d", "outside 1 s..1 d"),
        ("2000000/s", "is over 1000000"),
        ("", "is not a rate"),
        ("٣/m", "is not a rate"),
    ],
)
def test_bad_rates_name_the_field_and_the_fix(text: str, fragment: str) -> None:
    with pytest.raises(InvalidArgument, match="--rate") as err:
        parse_rate(text)
    assert fragment in str(err.value)
    assert err.value.fix


@pytest.mark.parametrize(
    ("job_type", "max_running", "rate", "field"),
    [
        ("gpu", 0, None, "max_running"),
        ("gpu", -1, None, "max_running"),
        ("gpu", True, None, "max_running"),
        ("gpu", 1_000_001, None, "max_running"),
        ("gpu", None, Rate(0, 60), "rate"),
        ("gpu", None, Rate(5, 0.5), "rate"),
        ("gpu", None, None, "limit"),
        ("", 4, None, "job_type"),
        ("x" * 201, 4, None, "job_type"),
    ],
)
def test_check_limit_refuses_bad_values(job_type: str, max_running: int | None, rate: Rate | None, field: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        check_limit(job_type, max_running, rate)
    assert err.value.field == field


def test_describe() -> None:
    assert describe(4, 60, 60.0) == "max 4, 60/m"
    assert describe(None, 5, 1.0) == "5/s"
    assert describe(None, None, None) == "-"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("gpu", 0, None, None), "max_running must be 1 to 1000000, not 0"),
        (("gpu", -3, None, None), "max_running must be 1 to 1000000"),
        (("gpu", None, 0, 60.0), "rate_count must be 1 to 1000000"),
        (("gpu", None, 60, 0.0), "rate_seconds (the period) must be 1 to 86400"),
        (("gpu", None, 60, None), "needs both rate_count and rate_seconds"),
        (("gpu", None, None, None), "give max_running or a rate"),
        (("", 4, None, None), "job_type must be 1 to 200 characters"),
        ((None, 4, None, None), "job_type must be 1 to 200 characters"),
    ],
)
def test_the_database_refuses_bad_limits_by_name(dsn: str, args: tuple[object, ...], fragment: str) -> None:
    with psycopg.connect(dsn) as conn, pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        conn.execute("SELECT pgwork.set_limit(%s, %s, %s, %s)", args)  # type: ignore[arg-type]
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("values", "constraint"),
    [
        ("('gpu', 0, NULL, NULL, 0)", "job_limits_max_running_range"),
        ("('gpu', NULL, -1, 60, 0)", "job_limits_rate_count_range"),
        ("('gpu', NULL, 60, 0, 0)", "job_limits_rate_seconds_range"),
        ("('gpu', NULL, 60, NULL, 0)", "job_limits_rate_whole"),
        ("('gpu', NULL, NULL, NULL, 0)", "job_limits_some_limit"),
        ("('gpu', NULL, 10, 60, 11)", "job_limits_tokens_range"),
        ("('', 4, NULL, NULL, 0)", "job_limits_job_type_shape"),
    ],
)
def test_check_constraints_hold_for_direct_writes(dsn: str, values: str, constraint: str) -> None:
    with psycopg.connect(dsn) as conn, pytest.raises(psycopg.errors.CheckViolation, match=constraint):
        conn.execute(
            "INSERT INTO pgwork.job_limits (job_type, max_running, rate_count, rate_seconds, tokens) VALUES " + values  # type: ignore[operator]
        )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--max-running", "0"], "--max-running: 0 is out of range 1..1000000"),
        (["--max-running", "-2"], "--max-running: -2 is out of range"),
        (["--max-running", "four"], "--max-running: 'four' is not a whole number"),
        (["--rate", "60"], "--rate: '60' is not a rate (write COUNT/UNIT"),
        (["--rate", "60/w"], "--rate: 'w' is not a unit of time"),
        (["--rate", "0/m"], "--rate: '0/m' allows no claim at all"),
        ([], "options: name no limit (give --max-running N and/or --rate N/UNIT"),
    ],
)
def test_cli_refuses_bad_limits_in_one_line(dsn: str, args: list[str], fragment: str) -> None:
    out = pgwork("limits", "set", "gpu", *args, dsn=dsn)
    assert out.returncode == 2
    assert fragment in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    with Queue(dsn) as q:
        assert q.limits() == []


@pytest.mark.slow
def test_cli_sets_shows_and_clears(dsn: str) -> None:
    out = pgwork("limits", "set", "gpu", "--max-running", "4", "--rate", "60/m", dsn=dsn)
    assert (out.returncode, out.stdout.strip()) == (0, "limited gpu: at most 4 running, claims at most 60/m"), out
    out = pgwork("limits", "set", "gpu", "--rate", "100/10s", dsn=dsn)
    assert out.stdout.strip() == "changed the limit of gpu: claims at most 100/10s"
    shown = pgwork("limits", "show", dsn=dsn).stdout
    assert "gpu" in shown and "100/10s" in shown
    with Queue(dsn) as q:
        q.enqueue("gpu", {})
    assert "100/10s" in pgwork("stats", dsn=dsn).stdout
    assert '"rate_count": 100' in pgwork("stats", "--json", dsn=dsn).stdout
    assert pgwork("limits", "clear", "gpu", dsn=dsn).stdout.strip() == "lifted the limit of gpu"
    assert pgwork("limits", "clear", "gpu", dsn=dsn).stdout.strip() == "gpu had no limit"
    assert pgwork("limits", "show", dsn=dsn).stdout.strip() == "no limits"
