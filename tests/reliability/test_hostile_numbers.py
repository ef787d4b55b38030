"""Numbers are bounded before they are used (issue 24, class 5): a number of thousands of digits,
or a duration past what a timestamp holds, is one line naming the option, field or argument —
never a digit-limit ValueError, an OverflowError or a database error. One parser (pgwork.durations:
parse_duration for text, check_seconds for code) holds the bounds for every duration."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from pgwork import durations
from pgwork.db.roundtrip import claim_params
from pgwork.db.wait import check_wait
from pgwork.errors import InvalidArgument
from pgwork.jobfile import BadLine, jobs_of
from pgwork.limits import parse_rate
from pgwork.models import NewJob
from pgwork.progress import check_progress
from pgwork.reaper import ReaperConfig
from pgwork.validation import check_age, check_timeout, validate
from pgwork.worker.options import OptionError, parse_options
from tests.support.cli import pgwork

DIGITS = "9" * 5000
HUGE = 10**400

CODE: list[tuple[str, Callable[[], Any], str]] = [  # (case, call, field named)
    ("duration of 5000 digits", lambda: durations.parse_duration(DIGITS + "d", "--x"), "--x"),
    ("duration past a century", lambda: durations.parse_duration("100000000d", "--x"), "--x"),
    ("bare number past a century", lambda: durations.parse_duration("9" * 60, "--x"), "--x"),
    ("age past a century", lambda: durations.parse_age("100000000d", "--older-than"), "--older-than"),
    ("rate count of 5000 digits", lambda: parse_rate(DIGITS + "/s"), "--rate"),
    ("rate period of 5000 digits", lambda: parse_rate("1/" + DIGITS + "s"), "--rate"),
    ("timeout huge int", lambda: check_timeout(HUGE), "timeout"),
    ("timeout huge text", lambda: check_timeout(DIGITS), "timeout"),
    ("timeout huge timedelta", lambda: check_timeout(timedelta(days=999_999_999)), "timeout"),
    ("delay huge int", lambda: validate(NewJob("ocr", {}, delay=HUGE)), "delay"),
    ("delay huge negative int", lambda: validate(NewJob("ocr", {}, delay=-HUGE)), "delay"),
    ("progress huge int", lambda: check_progress(HUGE), "fraction"),
    ("prune age past a century", lambda: check_age(timedelta(days=999_999_999)), "older_than"),
    ("wait timeout huge", lambda: check_wait(1, HUGE, 1.0), "timeout"),
    ("wait poll huge", lambda: check_wait(1, 1.0, HUGE), "poll"),
    ("reaper every huge", lambda: ReaperConfig(every=HUGE), "every"),
    ("reaper loop huge", lambda: ReaperConfig(loop_for=float("inf")), "loop_for"),
    ("claim lease huge", lambda: claim_params("w", None, 1, HUGE, None), "lease"),
    ("claim lease past a day", lambda: claim_params("w", None, 1, 86401, None), "lease"),
    ("seconds NaN", lambda: durations.check_seconds(float("nan"), "x"), "x"),
]


@pytest.mark.parametrize(("case", "call", "field"), CODE, ids=[c[0] for c in CODE])
def test_a_huge_number_in_code_is_one_error_naming_the_field(case: str, call: Callable[[], Any], field: str) -> None:
    with pytest.raises((InvalidArgument, ValueError)) as caught:
        call()
    assert not isinstance(caught.value, OverflowError)
    text = str(caught.value)
    assert text.startswith(field + ":") or getattr(caught.value, "field", None) == field, text
    assert "digits" not in text or "integer string" not in text


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("lease", "1000000d"),
        ("lease", "86401"),
        ("lease", DIGITS),
        ("grace", "2d"),
        ("grace", DIGITS + "s"),
        ("heartbeat", DIGITS),
        ("poll", DIGITS),
        ("connect_patience", "100000000d"),
        ("concurrency", DIGITS),
        ("batch", DIGITS),
        ("max_abandoned", DIGITS),
        ("metrics_port", DIGITS),
    ],
)
def test_worker_options_are_bounded(option: str, value: str) -> None:
    with pytest.raises(OptionError) as caught:
        parse_options(app="m", worker_id="w", environ={}, **{option: value})
    assert caught.value.option == "--" + option.replace("_", "-")


def test_a_day_of_lease_and_of_grace_are_accepted() -> None:
    options = parse_options(app="m", worker_id="w", environ={}, lease="1d", grace="1d")
    assert options.lease == 86400 and options.grace == 86400


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"timeout": 1e999}', "timeout"),
        ('{"timeout": ' + "9" * 400 + "}", "timeout"),
        ('{"delay": ' + "9" * 400 + "}", "delay"),
        ('{"delay": "' + DIGITS + 's"}', "delay"),
        ('{"delay": "100000000d"}', "delay"),
        ('{"priority": ' + DIGITS + "}", "line"),
    ],
)
def test_jobs_file_numbers_are_bounded(line: str, field: str) -> None:
    with pytest.raises(BadLine) as caught:
        list(jobs_of([line], "ocr", 1024 * 1024))
    assert str(caught.value).startswith(f"line 1: {field}:"), str(caught.value)


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["limits", "set", "ocr", "--rate", DIGITS + "/s"], "--rate"),
        (["limits", "set", "ocr", "--max-running", DIGITS], "--max-running"),
        (["prune", "--older-than", "100000000d"], "--older-than"),
        (["enqueue", "ocr", "--timeout", "9" * 400], "--timeout"),
        (["enqueue", "ocr", "--delay", "9" * 400], "--delay"),
        (["enqueue", "ocr", "--priority", DIGITS], "--priority"),
        (["reap", "--every", DIGITS], "--every"),
        (["worker", "--app", "m", "--lease", "1000000d"], "--lease"),
        (["worker", "--app", "m", "--grace", DIGITS], "--grace"),
    ],
    ids=lambda v: " ".join(v)[:40] if isinstance(v, list) else v,
)
def test_the_cli_refuses_in_one_line_naming_the_option(dsn: str, argv: list[str], option: str) -> None:
    out = pgwork(*argv, dsn=dsn)
    assert out.returncode == 2, out.stderr
    assert option in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--tick", "1e400"], "--tick"),
        (["--tick", DIGITS], "--tick"),
        (["--tick", "2h"], "--tick"),
        (["--metrics-port", DIGITS], "--metrics-port"),
        (["--metrics-port", "70000"], "--metrics-port"),
        (["--priority", "9" * 30], "--priority"),
    ],
)
def test_the_operator_command_bounds_its_numbers(argv: list[str], option: str) -> None:
    out = pgwork("operator", "--namespace", "x", *argv)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(f"pgwork operator: {option}:") and "Traceback" not in out.stderr
