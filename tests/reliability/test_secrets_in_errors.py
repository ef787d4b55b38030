"""No secret in any error: a connection string that is wrong in a hostile way (a bare password as
DATABASE_URL, a URI password with an unencoded / @ or space, values that are not connection
strings at all) never reaches the CLI's, the worker's, the lab's or the Queue's words, in whole or
in part. One scrubbing function (pgwork.credentials.scrub) serves every path."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pgwork import App
from pgwork.credentials import MIN_FRAGMENT, scrub
from pgwork.db import Queue
from pgwork.db.aqueue import AsyncQueue
from pgwork.db.wait import wait_for_job
from pgwork.errors import BadConnectionString, PgworkError, Unreachable

ROOT = Path(__file__).resolve().parents[2]
SECRET = "Zq9Xv7Kw"
SPACED = "Zq9X v7Kw"

# Every shape a Secret or DATABASE_URL was seen to hold by mistake, and some of our own.
HOSTILE = {
    "bare password": SECRET,
    "bare password with a space": SPACED,
    "bare password with quote": f"'{SECRET}",
    "uri, unencoded /": f"postgresql://app:{SECRET[:4]}/{SECRET[4:]}@127.0.0.1:1/app",
    "uri, unencoded @": f"postgresql://app:{SECRET[:4]}@{SECRET[4:]}@127.0.0.1:1/app",
    "uri, unencoded @ and /": f"postgresql://app:{SECRET[:4]}@x/{SECRET[4:]}@127.0.0.1:1/app",
    "uri, unencoded space": f"postgresql://app:{SPACED}@127.0.0.1:1/app",
    "uri, unencoded :": f"postgresql://app:{SECRET[:4]}:{SECRET[4:]}@127.0.0.1:1/app",
    "key=value, unreachable": f"host=127.0.0.1 port=1 user=app password={SECRET} dbname=app",
    "key=value, escaped space": f"host=127.0.0.1 port=1 password={SECRET[:4]}\\ {SECRET[4:]}",
    "a JSON token": f'{{"token": "{SECRET}"}}',
    "an https URL": f"https://{SECRET}.example.com/",
    "a bearer header": f"Bearer {SECRET}",
}


def leaked(text: str) -> list[str]:
    """The runs of MIN_FRAGMENT characters of the secret that appear in `text`."""
    parts = {SECRET[i : i + MIN_FRAGMENT] for i in range(len(SECRET) - MIN_FRAGMENT + 1)}
    return sorted(p for p in parts if p in text)


def pgwork(*args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG") or k == "PGWORK_TEST_DSN"}
    env.update(PYTHONPATH=str(ROOT), DATABASE_URL=dsn, PGCONNECT_TIMEOUT="2")
    return subprocess.run(
        [sys.executable, "-m", "pgwork.cli", *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_cli_says_one_line_without_the_secret(value: str) -> None:
    out = pgwork("stats", dsn=value)
    assert out.returncode == 2, out
    assert leaked(out.stdout + out.stderr) == [], out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "connection string" in out.stderr or "cannot connect to" in out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_worker_logs_nothing_of_the_secret(value: str) -> None:
    out = pgwork("worker", "--app", "pgwork.tools.demo.app", "--connect-patience", "1s", dsn=value)
    assert out.returncode != 0
    assert leaked(out.stdout + out.stderr) == [], out.stderr
    assert "Traceback" not in out.stderr, out.stderr


def test_the_lab_says_nothing_of_the_secret() -> None:
    out = pgwork("bench", "--dsn", HOSTILE["uri, unencoded @"], "--only", "wake", dsn="")
    assert out.returncode != 0
    assert leaked(out.stdout + out.stderr) == [] and "Traceback" not in out.stderr, out.stderr


def _raised(value: str) -> PgworkError:
    with pytest.raises(PgworkError) as caught:
        Queue(value, pool_size=1, pool_timeout=2)
    return caught.value


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_queue_async_queue_app_and_wait_raise_without_the_secret(value: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = [_raised(value)]
    with pytest.raises(PgworkError) as caught:
        asyncio.run(AsyncQueue.open(value))
    errors.append(caught.value)
    with pytest.raises(PgworkError) as caught:
        _ = App(value, name="hostile").queue
    errors.append(caught.value)
    with pytest.raises(PgworkError) as caught:
        wait_for_job(value, 1, timeout=1)
    errors.append(caught.value)
    for exc in errors:
        assert isinstance(exc, Unreachable)
        assert leaked(str(exc)) == [], exc
        # libpq's own exception must not ride along.
        assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)
    assert leaked(caplog.text) == [], caplog.text


def test_a_value_libpq_would_misread_is_refused_before_connecting() -> None:
    exc = _raised(HOSTILE["uri, unencoded @"])
    assert isinstance(exc, BadConnectionString)
    assert "unencoded @ or /" in str(exc) and "%40" in str(exc)


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        # pgwork's own description of the expected shape passes unchanged.
        ("pgwork x: postgresql://USER:PASSWORD@HOST:PORT/DBNAME", None, "USER:***@HOST"),
        (f"failed for {SECRET}", SECRET, "failed for ***"),
        (f"near host {SECRET[2:]}.db", f"postgresql://a:{SECRET}@h/d", "near host ***.db"),
        ("connection refused at db:5432", f"postgresql://a:{SECRET}@db/d", "connection refused at db:5432"),
    ],
)
def test_scrub_table(text: str, secret: str | None, kept: str) -> None:
    assert kept in scrub(text, secret)
