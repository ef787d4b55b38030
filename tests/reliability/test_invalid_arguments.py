"""Every invalid value, through the command line (a subprocess, as users run it) and through the
Queue: one line naming the field and the fix (`InvalidArgument` with `.field` from the Queue),
never a traceback, never a partial write (docs/reliability.md, bad-input catalogue)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.errors import InvalidArgument
from pgwork.models import NewJob
from tests.support.cli import ROOT, env, one_line_error
from tests.support.rows import Rows

DEEP: Any = {}
_node = DEEP
for _ in range(150):
    _node["d"] = {}
    _node = _node["d"]


def _jobs(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pgwork.jobs").fetchone()
    assert row is not None
    return int(row[0])


def _run(args: list[str | bytes], dsn: str) -> subprocess.CompletedProcess[str]:
    """`pgwork ARGS`; byte arguments reach argv undecoded, as a shell passes them."""
    return subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"pgwork.cli", *(a if isinstance(a, bytes) else a.encode() for a in args)],
        capture_output=True,
        text=True,
        env=env(dsn, LC_ALL="C.UTF-8"),
        cwd=str(ROOT),
        timeout=60,
        check=False,
    )


CLI_CASES: list[tuple[str, list[str | bytes], str]] = [
    ("job type with a non-UTF-8 byte", ["enqueue", b"ocr\xff"], "job_type: contains \\udcff at character 3"),
    ("key with a non-UTF-8 byte", ["enqueue", "ocr", "--key", b"k\xfe"], "key: contains \\udcfe"),
    ("payload key with a non-UTF-8 byte", ["enqueue", "ocr", "--payload", b'{"k\xff": 1}'], "payload: has a key"),
    ("payload with a lone surrogate escape", ["enqueue", "ocr", "--payload", '{"a": "\\ud800"}'], "lone surrogate"),
    ("payload with a real NUL", ["enqueue", "ocr", "--payload", '{"a": "x\\u0000"}'], "payload: contains a NUL"),
    (
        "payload nested 5000 deep",
        ["enqueue", "ocr", "--payload", '{"a":' + "[" * 5000 + "]" * 5000 + "}"],
        "--payload: nested too deeply",
    ),
    (
        "payload nested 150 deep",
        ["enqueue", "ocr", "--payload", '{"a":' * 150 + "1" + "}" * 150],
        "payload: is nested more than 100 levels",
    ),
    (
        "payload number of 5000 digits",
        ["enqueue", "ocr", "--payload", '{"n": 1' + "0" * 5000 + "}"],
        "--payload: cannot be read",
    ),
    (
        "priority in superscript digits",
        ["enqueue", "ocr", "--priority", "²"],
        "--priority: '\\xb2' is not a whole number",
    ),
    (
        "priority in Arabic-Indic digits",
        ["enqueue", "ocr", "--priority", "٣"],
        "--priority: '\\u0663' is not a whole number",
    ),
    (
        "max attempts with underscores",
        ["enqueue", "ocr", "--max-attempts", "1_0"],
        "--max-attempts: '1_0' is not a whole number",
    ),
    ("delay in exponent notation", ["enqueue", "ocr", "--delay", "1e3"], "--delay: '1e3' is not a duration"),
    (
        "delay of two centuries",
        ["enqueue", "ocr", "--delay", "73000d"],
        "--delay: '73000d' is more than 36500d (give at most 36500d)",
    ),
    ("timeout of zero", ["enqueue", "ocr", "--timeout", "0"], "--timeout: '0' is not a duration above zero"),
    ("timeout negative", ["enqueue", "ocr", "--timeout=-5m"], "--timeout: '-5m' is not a duration above zero"),
    ("timeout of a month", ["enqueue", "ocr", "--timeout", "30d"], "--timeout: '30d' is more than 7 days"),
    ("timeout in words", ["enqueue", "ocr", "--timeout", "soon"], "--timeout: 'soon' is not a duration"),
    ("id in superscript digits", ["retry", "²"], "ID: '\\xb2' is not a job id"),
    ("id in Arabic-Indic digits", ["cancel", "٣"], "ID: '\\u0663' is not a job id"),
    ("id beyond bigint", ["retry", "9" * 20], "is not a job id"),
    ("id zero", ["cancel", "0"], "ID: '0' is not a job id"),
    ("dead --limit in Arabic-Indic digits", ["dead", "--limit", "٣"], "--limit: '\\u0663' is not a whole number"),
    ("dead --limit zero", ["dead", "--limit", "0"], "limit: 0 is out of range"),
    ("stats job type with a non-UTF-8 byte", ["stats", "--job-types", b"\xff"], "--job-types: contains \\udcff"),
    ("prune age without a unit", ["prune", "--older-than", "30"], "--older-than: '30' has no unit"),
    ("prune dead without --include-dead", ["prune", "--older-than", "30d", "--status", "dead"], "add --include-dead"),
]


@pytest.mark.parametrize(("args", "fragment"), [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_cli_refuses_with_one_line(dsn: str, args: list[str | bytes], fragment: str) -> None:
    with Queue(dsn, pool_size=1) as q:
        q.enqueue("ocr", {"sentinel": 1})
    out = _run(args, dsn)
    line = one_line_error(out)
    assert len([x for x in out.stderr.splitlines() if x.strip()]) == 1, out.stderr
    assert fragment in line, line
    assert "(" in line or ";" in line  # a fix is named
    assert _jobs(dsn) == 1  # nothing written, nothing deleted


QueueCall = Callable[[Queue], Any]

QUEUE_CASES: list[tuple[str, QueueCall, str, str]] = [
    ("job type with a lone surrogate", lambda q: q.enqueue("ocr\udcff"), "job_type", "lone surrogate"),
    ("job type with NUL", lambda q: q.enqueue("o\x00cr"), "job_type", "NUL"),
    ("key with a lone surrogate", lambda q: q.enqueue("ocr", key="k\ud800"), "key", "lone surrogate"),
    ("payload key with a lone surrogate", lambda q: q.enqueue("ocr", {"k\udcff": 1}), "payload", "has a key"),
    ("payload value with a lone surrogate", lambda q: q.enqueue("ocr", {"k": ["\ud800"]}), "payload", "['k'][0]"),
    ("payload bytes key", lambda q: q.enqueue("ocr", {b"k": 1}), "payload", "not JSON-serialisable"),  # type: ignore[dict-item]
    ("payload nested 150 deep", lambda q: q.enqueue("ocr", DEEP), "payload", "nested more than 100 levels"),
    ("payload 5000-digit integer", lambda q: q.enqueue("ocr", {"n": 10**5000}), "payload", "not JSON-serialisable"),
    ("payload Infinity", lambda q: q.enqueue("ocr", {"x": float("inf")}), "payload", "NaN or Infinity"),
    ("payload that is its own child", lambda q: q.enqueue("ocr", _cyclic()), "payload", "nested more than"),
    ("timeout NaN", lambda q: q.enqueue("ocr", timeout=float("nan")), "timeout", "not a duration above zero"),
    ("timeout of eight days", lambda q: q.enqueue("ocr", timeout="8d"), "timeout", "more than 7 days"),
    (
        "trace_context over the size limit",
        lambda q: q.enqueue("ocr", trace_context={"tracestate": "x" * 5000}),
        "trace_context",
        "over the limit of 4096",
    ),
    (
        "trace_context with a lone surrogate",
        lambda q: q.enqueue("ocr", trace_context={"traceparent": "\udcff"}),
        "trace_context",
        "lone surrogate",
    ),
    ("delay of two centuries", lambda q: q.enqueue("ocr", delay=200 * 365 * 86400.0), "delay", "century"),
    ("available_at as a string", lambda q: q.enqueue("ocr", available_at="2030-01-01"), "available_at", "datetime"),  # type: ignore[arg-type]
    (
        "one bad job in a batch",
        lambda q: q.enqueue_many([NewJob("ocr", {"n": 1}), NewJob("ocr", {"n": "\ud800"})]),
        "payload",
        "lone surrogate",
    ),
    ("retry id as a string", lambda q: q.retry("17"), "ids", "list of job ids"),  # type: ignore[arg-type]
    ("retry id as a bool", lambda q: q.retry([True]), "ids", "whole number"),
    ("cancel id beyond bigint", lambda q: q.cancel([2**63]), "ids", "out of range"),
    ("job id zero", lambda q: q.job(0), "id", "out of range"),
    ("result key with a lone surrogate", lambda q: q.result("k\udcff"), "key", "lone surrogate"),
    ("stats job types as one string", lambda q: q.stats("ocr"), "job_types", "list of job types"),
    ("claim owner with a lone surrogate", lambda q: q.claim("w\udcff"), "owner", "lone surrogate"),
    ("dead limit negative", lambda q: q.dead(limit=-1), "limit", "out of range"),
    ("prune age as a bare number", lambda q: q.prune(30), "older_than", "bare number has no unit"),  # type: ignore[arg-type]
    ("prune a negative age", lambda q: q.prune(timedelta(days=-1)), "older_than", "negative"),
]


def _cyclic() -> dict[str, Any]:
    node: dict[str, Any] = {}
    node["self"] = node
    return node


@pytest.mark.parametrize(("call", "field", "fragment"), [c[1:] for c in QUEUE_CASES], ids=[c[0] for c in QUEUE_CASES])
def test_queue_raises_invalid_argument(queue: Queue, dsn: str, call: QueueCall, field: str, fragment: str) -> None:
    queue.enqueue("ocr", {"sentinel": 1})
    with pytest.raises(InvalidArgument) as caught:
        call(queue)
    assert caught.value.field == field, caught.value
    assert str(caught.value).startswith(f"{field}: ") and fragment in str(caught.value), str(caught.value)
    assert "(" in str(caught.value)  # names a fix
    assert _jobs(dsn) == 1


def test_queue_prune_keeps_dead_jobs_unless_asked(queue: Queue, dsn: str) -> None:
    from datetime import UTC, datetime

    later = datetime.now(UTC) + timedelta(days=60)
    rows = Rows(queue, job_type="ocr")
    for status in ("succeeded", "dead", "cancelled"):
        getattr(rows, status)()
    assert queue.prune(timedelta(days=30), now=later) == 2
    with psycopg.connect(dsn) as conn:
        left = [r[0] for r in conn.execute("SELECT status::text FROM pgwork.jobs").fetchall()]
    assert left == ["dead"]
    assert queue.prune(timedelta(days=30), statuses=["dead"], now=later) == 1
