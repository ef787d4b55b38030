"""Bulk input is read once, bounded, and never silently empty (issue 24, class 2): pipes, files
without a newline, inputs that change while read, and sizes of zero."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from pgwork import jobfile
from pgwork.db import Queue
from pgwork.jobfile import BadLine, read_lines
from tests.support.cli import ROOT, pgwork


def _count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pgwork.jobs").fetchone()
    assert row is not None
    return int(row[0])


def _run(argv: list[str], dsn: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k != "DATABASE_URL"}, "PYTHONPATH": str(ROOT), "DATABASE_URL": dsn}
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=60, check=False)


LINES = "".join(json.dumps({"payload": {"n": n}}) + "\n" for n in range(3))


def test_from_dev_stdin_a_pipe_loads_every_line(dsn: str) -> None:
    out = _run([sys.executable, "-m", "pgwork.cli", "enqueue", "ocr", "--from-file", "/dev/stdin"], dsn, LINES)
    assert out.returncode == 0, out.stderr
    assert "enqueued 3 jobs from /dev/stdin (3 lines)" in out.stdout
    assert _count(dsn) == 3


def test_from_a_process_substitution_loads_every_line(dsn: str) -> None:
    command = f"{sys.executable} -m pgwork.cli enqueue ocr --from-file <(printf '%s' \"$LINES\")"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATABASE_URL": dsn, "LINES": LINES}
    out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "enqueued 3 jobs" in out.stdout and "(3 lines)" in out.stdout
    assert _count(dsn) == 3


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["enqueue", "ocr", "--from-file", "/dev/zero"], "line 1: line: is longer than"),
        (["enqueue", "ocr", "--payload", "@/dev/zero"], "--payload: is longer than"),
    ],
)
def test_an_endless_line_is_one_error_not_a_memory_error(dsn: str, argv: list[str], says: str) -> None:
    out = pgwork(*argv, dsn=dsn)
    assert out.returncode == 2, out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr and "MemoryError" not in out.stderr
    assert _count(dsn) == 0


def test_an_endless_payload_on_stdin_is_one_error(dsn: str) -> None:
    big = "x" * (jobfile.max_line_bytes(1024 * 1024) + 10)
    out = _run([sys.executable, "-m", "pgwork.cli", "enqueue", "ocr", "--payload", "-"], dsn, big)
    assert out.returncode == 2 and "--payload: is longer than" in out.stderr


@pytest.mark.parametrize("size", ["0", "-1", "-100", "1000001", "99999999999999999999999"])
def test_a_batch_size_out_of_range_is_refused_not_defaulted(dsn: str, tmp_path: Path, size: str) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_text(LINES, encoding="utf-8")
    out = pgwork("enqueue", "ocr", "--from-file", str(path), "--batch-size", size, dsn=dsn)
    assert out.returncode == 2 and "--batch-size:" in out.stderr and "Traceback" not in out.stderr
    assert _count(dsn) == 0


@pytest.mark.parametrize(("argv", "option"), [(["prune", "--older-than", "7d"], "--batch-size"),
                                              (["dead"], "--limit")])  # fmt: skip
def test_other_sizes_of_zero_are_refused_too(dsn: str, argv: list[str], option: str) -> None:
    out = pgwork(*argv, option, "0", dsn=dsn)
    assert out.returncode == 2 and f"{option}: 0 is out of range" in out.stderr


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_an_input_without_jobs_is_an_error(dsn: str, tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(content, encoding="utf-8")
    out = pgwork("enqueue", "ocr", "--from-file", str(path), dsn=dsn)
    assert out.returncode == 2 and "--from-file: holds no job" in out.stderr


def test_a_file_that_changes_between_check_and_load_is_an_error(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_text(LINES, encoding="utf-8")
    checked = jobfile.check

    def check_then_append(*args: object, **kwargs: object) -> jobfile.Loaded:
        found = checked(*args, **kwargs)  # type: ignore[arg-type]
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"payload": {"n": "late"}}) + "\n")
        return found

    monkeypatch.setattr(jobfile, "check", check_then_append)
    with Queue(dsn, pool_size=1) as q, pytest.raises(jobfile.NotAsRead, match="4 jobs were written but the check"):
        jobfile.enqueue_file(q, path, "ocr")


def test_read_lines_reads_no_further_than_the_limit() -> None:
    class Endless(io.RawIOBase):
        served = 0

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
            buffer[:] = b"\0" * len(buffer)
            self.served += len(buffer)
            return len(buffer)

    raw = Endless()
    with pytest.raises(BadLine, match="line 1: line: is longer than 1000 bytes"):
        list(read_lines(io.BufferedReader(raw, 64), 1000))
    assert raw.served < 2000
    assert list(read_lines(io.BytesIO(b'{"a": 1}\n{"b": 2}'), 1000)) == ['{"a": 1}\n', '{"b": 2}']
    with pytest.raises(BadLine, match="line 2: line: is not UTF-8"):
        list(read_lines(io.BytesIO(b"{}\n\xff\n"), 1000))
