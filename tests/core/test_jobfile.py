"""Jobs from a JSON Lines file, and the checks a bulk load relies on: pure tables, then the
command as a user runs it."""

from __future__ import annotations

import json
import math
import os
import pty
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgwork import jobfile
from pgwork.db.bulk import copy_text
from pgwork.errors import InvalidArgument
from pgwork.jobfile import BadLine, parse_line
from pgwork.jsonshape import MAX_JSON_DEPTH, _json_problem, check_json
from pgwork.models import NewJob
from tests.support.cli import ROOT, pgwork


def _nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


# -- the fast path of check_json agrees with the full walk ---------------------------------

HOSTILE: list[Any] = [
    {"a": 1},
    {"s": "\x00"},
    {"\x00": 1},
    {"s": "\\u0000"},  # six ordinary characters: fine, though the text contains \u0000
    {"s": "\ud800"},
    {"\udcff": 1},
    {"f": math.nan},
    {"f": math.inf},
    {"t": ("a", 1)},
    {"d": datetime(2030, 1, 1, tzinfo=UTC)},
    {1: "int key"},
    {"s": "[{" * 200},  # brackets inside a string: fine, by the slow path
    _nested(MAX_JSON_DEPTH),
    _nested(MAX_JSON_DEPTH + 1),
    [[[]]],
    {"big": 10**5000},
]


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
def test_the_fast_path_accepts_and_refuses_exactly_what_the_walk_does(value: Any) -> None:
    walked = _json_problem(value, MAX_JSON_DEPTH)
    try:
        json.dumps(value, allow_nan=False)
        serialisable = True
    except (TypeError, ValueError, RecursionError):
        serialisable = False
    expected_ok = walked is None and serialisable
    try:
        text = check_json(value, "payload", 10**9, canonical=True, size_fix="-", types_fix="-")
    except InvalidArgument:
        assert not expected_ok
    else:
        assert expected_ok
        assert json.loads(text) == json.loads(json.dumps(value, sort_keys=True))


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [("plain", "plain"), ("a\tb", "a\\tb"), ("a\nb\rc", "a\\nb\\rc"), ("C:\\x", "C:\\\\x"), ("\\N", "\\\\N")],
)
def test_copy_text_escapes_what_copy_would_misread(raw: str, escaped: str) -> None:
    assert copy_text(raw) == escaped


# -- lines ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "default_type", "job"),
    [
        ('{"job_type": "ocr"}', None, NewJob("ocr")),
        ('{"payload": {"n": 1}}', "mail", NewJob("mail", {"n": 1})),
        ('{"job_type": "ocr", "delay": "5m", "priority": 3}', None, NewJob("ocr", delay=300.0, priority=3)),
        ('{"job_type": "ocr", "delay": 2.5}', None, NewJob("ocr", delay=2.5)),
        (
            '{"job_type": "ocr", "available_at": "2030-01-01T00:00:00Z", "key": "k"}',
            None,
            NewJob("ocr", key="k", available_at=datetime(2030, 1, 1, tzinfo=UTC)),
        ),
        ("   ", None, None),
    ],
)
def test_a_line_is_a_job(line: str, default_type: str | None, job: NewJob | None) -> None:
    assert parse_line(line, 1, default_type) == job


@pytest.mark.parametrize(
    ("line", "field", "says"),
    [
        ('{"job_type": "ocr", "status": "running"}', "status", "starts pending"),
        ('{"job_type": "ocr", "attempt_count": 0}', "attempt_count", "set by pgwork"),
        ('{"job_type": "ocr", "lease_token": "x", "lease_owner": "me"}', "lease_token", "no lease"),
        ('{"job_type": "ocr", "id": 5}', "id", "set by pgwork"),
        ('{"job_type": "ocr", "payloads": {}}', "payloads", "did you mean 'payload'"),
        ('{"payload": {}}', "job_type", "is missing"),
        ('{"job_type": "ocr"', "line", "not valid JSON"),
        ('["ocr"]', "line", "not an object"),
        ('{"job_type": "ocr", "delay": "soon"}', "delay", "duration"),
        ('{"job_type": "ocr", "available_at": "2030-01-01T00:00:00"}', "available_at", "no time zone"),
        ('{"job_type": "ocr", "available_at": "tomorrow"}', "available_at", "ISO 8601"),
    ],
)
def test_a_bad_line_is_named_with_its_number_and_field(line: str, field: str, says: str) -> None:
    with pytest.raises(BadLine) as caught:
        parse_line(line, 7)
    assert caught.value.line == 7
    assert str(caught.value).startswith(f"line 7: {field}: ")
    assert says in str(caught.value)


def test_validation_errors_carry_the_line_too() -> None:
    lines = ['{"job_type": "ocr"}', "", '{"job_type": "ocr", "priority": -1}']
    with pytest.raises(BadLine, match=r"^line 3: priority: -1 is out of range"):
        list(jobfile.jobs_of(lines, max_payload_bytes=1000))


def test_progress_text() -> None:
    assert jobfile.progress_text(100, 200, 2.0, width=10) == "[#####.....] 100/200 (50%) 50 jobs/s"
    assert jobfile.progress_text(0, 0, 0.0, width=4) == "[####] 0/0 (100%)"


# -- the command ----------------------------------------------------------------------------


def _count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pgwork.jobs").fetchone()
    assert row is not None
    return int(row[0])


def _write(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_from_file_loads_every_line_in_batches(dsn: str, tmp_path: Path) -> None:
    lines = [json.dumps({"payload": {"n": n}}) for n in range(2500)] + ["", json.dumps({"job_type": "mail"})]
    out = pgwork(
        "enqueue", "ocr", "--from-file", _write(tmp_path / "jobs.jsonl", lines), "--batch-size", "1000", dsn=dsn
    )
    assert out.returncode == 0, out.stderr
    assert "enqueued 2501 jobs" in out.stdout and "2502 lines" in out.stdout
    assert "[" not in out.stderr, "a progress bar was drawn though stderr is not a terminal"
    with psycopg.connect(dsn) as conn:
        types: dict[str, int] = dict(conn.execute("SELECT job_type, count(*) FROM pgwork.jobs GROUP BY 1").fetchall())
    assert types == {"ocr": 2500, "mail": 1}


def test_from_file_with_a_bad_or_hostile_line_writes_nothing(dsn: str, tmp_path: Path) -> None:
    good = [json.dumps({"job_type": "ocr", "payload": {"n": n}}) for n in range(3000)]
    for bad, says in (
        ('{"job_type": "ocr", "status": "succeeded", "attempt_count": 5}', "line 2999: status: is set by pgwork"),
        ('{"job_type": "ocr", "payload": [1]}', "line 2999: payload: must be a JSON object"),
    ):
        lines = [*good[:2998], bad, *good[2998:]]
        out = pgwork("enqueue", "--from-file", _write(tmp_path / "bad.jsonl", lines), "--batch-size", "100", dsn=dsn)
        assert out.returncode == 2
        assert says in out.stderr
        assert _count(dsn) == 0


@pytest.mark.parametrize("flag", [["--payload", "{}x"], ["--key", "k"], ["--priority", "3"], ["--max-attempts", "2"]])
def test_from_file_refuses_what_each_line_says_itself(dsn: str, tmp_path: Path, flag: list[str]) -> None:
    path = _write(tmp_path / "jobs.jsonl", ['{"job_type": "ocr"}'])
    out = pgwork("enqueue", "--from-file", path, *flag, dsn=dsn)
    assert out.returncode == 2 and f"{flag[0]}: each line of --from-file says its own" in out.stderr
    assert _count(dsn) == 0


def test_payload_from_a_file_or_stdin_passes_the_argument_limit(dsn: str, tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"doc": "x" * (2 * 1024 * 1024)}), encoding="utf-8")
    out = pgwork("enqueue", "ocr", "--payload", f"@{big}", dsn=dsn)
    assert out.returncode == 2 and re.search(r"payload: is 2\d{6} bytes, over the limit of 1048576", out.stderr)
    fits = tmp_path / "fits.json"
    fits.write_text(json.dumps({"doc": "y" * 900_000}), encoding="utf-8")
    assert pgwork("enqueue", "ocr", "--payload", f"@{fits}", dsn=dsn).returncode == 0
    missing = pgwork("enqueue", "ocr", "--payload", f"@{tmp_path / 'nope.json'}", dsn=dsn)
    assert missing.returncode == 2 and "--payload: cannot read" in missing.stderr
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT length(payload->>'doc') FROM pgwork.jobs").fetchone()
    assert row == (900_000,)


def test_payload_from_stdin(dsn: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pgwork.cli", "--dsn", dsn, "enqueue", "ocr", "--payload", "-"],
        input='{"from": "stdin"}',
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT payload FROM pgwork.jobs").fetchone() == ({"from": "stdin"},)


def test_from_file_draws_a_progress_bar_on_a_terminal(dsn: str, tmp_path: Path) -> None:
    path = _write(tmp_path / "jobs.jsonl", [json.dumps({"payload": {"n": n}}) for n in range(300)])
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pgwork.cli",
                "--dsn",
                dsn,
                "enqueue",
                "ocr",
                "--from-file",
                path,
                "--batch-size",
                "100",
            ],
            stdout=subprocess.PIPE,
            stderr=follower,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
            timeout=60,
            check=False,
        )
        os.close(follower)
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal's other end closed: all read
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0
    assert b"100/300 (33%)" in drawn and b"300/300 (100%)" in drawn
    assert b"enqueued 300 jobs" in done.stdout
