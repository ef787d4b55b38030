"""What a worker's log says about its jobs: a line per success at INFO (id, type, attempt,
duration), a line per failure at WARNING, never a payload, a result or a password, and a level
the operator of the worker controls (PGWORK_LOG_LEVEL, -v)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.errors import InvalidArgument
from pgwork.logsetup import FORMAT, LineFormatter, log_level
from tests.support.workers import WorkerProcess, start_worker, worker_env

PASSWORD = "Hunter2-never-logged"
PAYLOAD_SECRET = "iban-DE89370400440532013000"


def _with_password(dsn: str) -> str:
    # The test server trusts local connections, so any password is accepted and ignored.
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info["password"] = PASSWORD
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items() if v is not None})


def _burst(queue: Queue, tmp_path: Path, **env: str) -> WorkerProcess:
    started: list[WorkerProcess] = []
    wp = start_worker(_with_password(queue.dsn), tmp_path, started, "--burst", env=worker_env(**env))
    assert wp.wait(60) == 0, wp.log()[-2000:]
    return wp


def test_each_success_is_one_info_line_without_payload_result_or_password(queue: Queue, tmp_path: Path) -> None:
    plain = queue.enqueue("noop", {"n": PAYLOAD_SECRET})
    asynchronous = queue.enqueue("async-noop", {"n": PAYLOAD_SECRET + "-2"})
    failed = queue.enqueue("fail", {"account": PAYLOAD_SECRET}, max_attempts=1)
    log = _burst(queue, tmp_path).log()
    for job_id, job_type in ((plain, "noop"), (asynchronous, "async-noop")):
        line = rf"INFO pgwork\.worker\.jobs: job {job_id} \({job_type}\) attempt 1 succeeded in \d+\.\d{{3}}s$"
        assert re.search(line, log, re.MULTILINE), log
    assert f"WARNING pgwork.worker.jobs: job {failed} (fail) attempt 1 failed -> dead: RuntimeError" in log
    # The results echo the payloads, so neither reached the log either way.
    assert PAYLOAD_SECRET not in log and PASSWORD not in log
    assert queue.job(plain).status == "succeeded"  # type: ignore[union-attr]


def test_pgwork_log_level_quietens_the_success_lines(queue: Queue, tmp_path: Path) -> None:
    done = queue.enqueue("noop", {"n": 1})
    failed = queue.enqueue("fail", {}, max_attempts=1)
    log = _burst(queue, tmp_path, PGWORK_LOG_LEVEL="warning").log()
    assert queue.job(done).status == "succeeded"  # type: ignore[union-attr]
    assert "succeeded in" not in log and " INFO " not in log
    assert f"job {failed} (fail) attempt 1 failed -> dead" in log


def test_a_bad_log_level_is_one_line_and_exit_2(queue: Queue, tmp_path: Path) -> None:
    started: list[WorkerProcess] = []
    wp = start_worker(queue.dsn, tmp_path, started, "--burst", env=worker_env(PGWORK_LOG_LEVEL="loud"))
    assert wp.wait(30) == 2
    assert wp.log().strip().splitlines() == [
        "pgwork worker: PGWORK_LOG_LEVEL: 'loud' is not a log level (use one of DEBUG, INFO, WARNING, ERROR, CRITICAL)"
    ]


@pytest.mark.parametrize(
    ("verbose", "environ", "level"),
    [
        (False, {}, logging.INFO),
        (False, {"PGWORK_LOG_LEVEL": ""}, logging.INFO),
        (False, {"PGWORK_LOG_LEVEL": "warning"}, logging.WARNING),
        (False, {"PGWORK_LOG_LEVEL": " ERROR "}, logging.ERROR),
        (True, {"PGWORK_LOG_LEVEL": "ERROR"}, logging.DEBUG),  # -v wins: asked for on this run
    ],
)
def test_log_level(verbose: bool, environ: dict[str, str], level: int) -> None:
    assert log_level(verbose, environ) == level


@pytest.mark.parametrize("value", ["loud", "10", "WARN ING", "info,debug"])
def test_log_level_refuses_what_is_not_a_level(value: str) -> None:
    with pytest.raises(InvalidArgument, match=r"^PGWORK_LOG_LEVEL: .* is not a log level \(use one of DEBUG"):
        log_level(False, {"PGWORK_LOG_LEVEL": value})


@pytest.mark.parametrize("created", [1_000_000_000.0, 1_000_000_000.999, 1_000_000_001.0005, 1_700_000_000.5])
def test_the_cached_time_of_day_reads_as_loggings_own(created: float) -> None:
    # The command line's formatter formats the time once per second; every line must still read
    # exactly as logging.Formatter would write it, across second boundaries and in any order.
    ours, theirs = LineFormatter(FORMAT), logging.Formatter(FORMAT)
    for at in (created, created + 0.4, created - 1.0, created):
        record = logging.LogRecord("pgwork.worker.jobs", logging.INFO, __file__, 1, "job %s", (7,), None)
        record.created, record.msecs = at, (at - int(at)) * 1000
        assert ours.format(record) == theirs.format(record)


# -- job data in the log is inert (issue 24, class 6) --------------------------------------------

SPOOF = "\x1b[2K\x1b[1GSPOOFED\x07\r\nWARNING forged line\u202e"


def test_a_handlers_error_quoting_a_payload_reaches_the_log_inert(queue: Queue, tmp_path: Path) -> None:
    job_id = queue.enqueue("quote", {"text": SPOOF}, max_attempts=1)
    log = _burst(queue, tmp_path).log()
    line = next(x for x in log.splitlines() if f"job {job_id} (quote)" in x)
    assert line.endswith("cannot parse \\u001b[2K\\u001b[1GSPOOFED\\u0007"), line  # its first line only
    for raw in ("\x1b", "\x07", "\r", "\u202e"):
        assert raw not in log
    assert not any(x.startswith("WARNING forged line") for x in log.splitlines())


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain ascii", "plain ascii"),
        ("é and ✓ stay", "é and ✓ stay"),
        ("\x1b[31mred", "\\u001b[31mred"),
        ("bell\x07", "bell\\u0007"),
        ("cr\rlf\n tab\t", "cr\\rlf\\n tab\\t"),
        ("del\x7f c1\x9b", "del\\u007f c1\\u009b"),
        ("bidi\u202eoverride\u2066", "bidi\\u202eoverride\\u2066"),
        ("line sep\u2028", "line sep\\u2028"),
        ("tag \U000e0041", "tag \\udb40\\udc41"),
    ],
)
def test_inert_escapes_what_a_terminal_acts_on(text: str, shown: str) -> None:
    from pgwork.tables import inert

    assert inert(text) == shown


def test_the_formatter_escapes_every_line_and_keeps_traceback_breaks() -> None:
    formatter = LineFormatter(FORMAT)
    try:
        raise RuntimeError("from payload: " + SPOOF)
    except RuntimeError:
        import sys

        record = logging.LogRecord("pgwork.x", logging.ERROR, __file__, 1, "job %s: %s", (7, SPOOF), sys.exc_info())
    text = formatter.format(record)
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text and "\u202e" not in text
    first, *rest = text.split("\n")
    assert first.endswith("job 7: \\u001b[2K\\u001b[1GSPOOFED\\u0007\\r\\nWARNING forged line\\u202e")
    assert rest[0] == "Traceback (most recent call last):" and "RuntimeError: from payload" in rest[-1]
