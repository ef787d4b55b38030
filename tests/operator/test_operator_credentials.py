"""credentials.py: the shape of a connection string from a Secret, and scrubbing what may quote it.
Pure tables; the same values go through the real operator in tests/reliability/test_jobqueue_secrets.py."""

from __future__ import annotations

import pytest

from pgwork.credentials import EXPECTED, MIN_FRAGMENT, dsn_problem, scrub, sensitive_parts


def runs(secret: str) -> set[str]:
    return {secret[i : i + MIN_FRAGMENT] for i in range(len(secret) - MIN_FRAGMENT + 1)}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("Zq9Xv7Kw3Jp", "neither a postgresql:// URI nor key=value pairs"),
        ("Zq9X v7Kw 3Jp", "neither a postgresql:// URI nor key=value pairs"),
        ("WnE5WHY3S3czSnA=", "neither a postgresql:// URI nor key=value pairs"),
        ("postgresql://app:Zq9X v7Kw@db/app", "not a valid postgresql:// URI"),
        ("postgresql://app:Zq9X%v7Kw@db/app", "not a valid postgresql:// URI"),
        ("postgresql://app:Zq9X@v7Kw3Jp@db/app", "host that is not a host name"),
        ("postgresql://app:Zq9X/v7Kw3Jp@db/app", "port that is not a number"),
        ("postgresql://app:1234/v7Kw3Jp@db/app", "database name holding @ or /"),
        ("host=db password=Zq9X v7Kw", "neither a postgresql:// URI nor key=value pairs"),
        ("host=db port=Zq9X password=Zq9X", "port that is not a number"),
        ("host=db password='Zq9X", "neither a postgresql:// URI nor key=value pairs"),
        ("host=db password=Zq9X\x00v7Kw", "holds a NUL character"),
    ],
)
def test_values_that_are_no_connection_string(value: str, problem: str) -> None:
    found = dsn_problem(value)
    assert found is not None and problem in found
    # The message is ours: it quotes nothing of the value (the secret parts all hold these runs).
    assert not [run for run in ("Zq9X", "v7Kw", "3Jp", "WnE5", "'Zq") if run in found + EXPECTED], found


@pytest.mark.parametrize(
    "value",
    [
        "postgresql://app:Zq9X%40v7Kw%2F3Jp@db.team-a.svc:5432/app?sslmode=require",
        "postgres://app@db/app",
        "postgresql://app:p%20w@[::1]:5432/app",
        "postgresql:///app?host=/var/run/postgresql",
        "host=/var/run/postgresql dbname=app",
        "host=db1,db2 port=5432,5433 dbname=app user=app password='Zq9X v7Kw'",
        "dbname=app",
    ],
)
def test_connection_strings_that_pass(value: str) -> None:
    assert dsn_problem(value) is None


@pytest.mark.parametrize(
    ("secret", "text", "sensitive"),
    [
        # libpq quoting a value it could not use, with the password in it
        ("host=db sslmode=Zq9Xv7Kw3Jp password=Zq9Xv7Kw3Jp", 'invalid sslmode value: "Zq9Xv7Kw3Jp"', "Zq9Xv7Kw3Jp"),
        ("dbname=Zq9Xv7Kw3Jp password=Zq9Xv7Kw3Jp", 'database "Zq9Xv7Kw3Jp" does not exist', "Zq9Xv7Kw3Jp"),
        # a fragment of the password, not all of it
        ("postgresql://app:Zq9Xv7Kw3Jp@db/app", 'failed to resolve host "v7Kw3"', "Zq9Xv7Kw3Jp"),
        # the percent-encoded form, as it appears in the URI itself
        ("postgresql://app:Zq9X%40v7Kw@db/app", "postgresql://app:Zq9X%40v7Kw@db/app failed", "Zq9X@v7Kw"),
        ("postgresql://app:Zq9X%40v7Kw@db/app", "near Zq9X%40v7", "Zq9X%40v7Kw"),
        # not a DSN at all: the whole value is secret
        ("ghp_Zq9Xv7Kw3JpTyBn", 'missing "=" after "ghp_Zq9Xv7Kw3JpTyBn"', "ghp_Zq9Xv7Kw3JpTyBn"),
        ("Zq9X v7Kw 3Jp", 'missing "=" after "v7Kw"', "Zq9X v7Kw 3Jp"),
    ],
)
def test_scrub_removes_every_run_of_the_secret(secret: str, text: str, sensitive: str) -> None:
    cleaned = scrub(text, secret)
    assert not [run for run in runs(sensitive) if run in cleaned], cleaned
    assert "***" in cleaned


def test_scrub_keeps_where_it_tried_to_connect() -> None:
    secret = "postgresql://app:Zq9Xv7Kw3Jp@db.team-a.svc:5432/orders"
    text = 'connection to server at "db.team-a.svc" (10.0.0.7), port 5432 failed: password authentication failed'
    assert scrub(text, secret) == text
    assert sensitive_parts(secret) == ["Zq9Xv7Kw3Jp"]
    assert sensitive_parts("dbname=x") == []
    assert sensitive_parts("Zq9Xv7Kw3Jp") == ["Zq9Xv7Kw3Jp"]


def test_a_short_password_still_goes_whole() -> None:
    assert scrub("user app password is abc here", "postgresql://app:abc@db/x") == "user app password is *** here"
