"""Pure helpers: tables of cases, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgwork.backoff import Backoff
from pgwork.credentials import redact
from pgwork.db.statements import statement
from pgwork.dsn import describe, resolve_dsn, with_tcp_defaults
from pgwork.durations import parse_duration
from pgwork.errors import InvalidArgument
from pgwork.failure import MAX_RETRY_DELAY, DeadReason, FailureDecision, decide_failure
from pgwork.keys import derive_key
from pgwork.models import NewJob
from pgwork.sql_files import CORE, SHAPES, migrations, parse_blocks, parse_queries, queries
from pgwork.tables import render
from pgwork.validation import validate


@pytest.mark.parametrize(
    ("attempt", "rand", "expected"),
    [
        (1, 0.5, 2.0),  # base, jitter centred
        (2, 0.5, 4.0),
        (3, 0.5, 8.0),
        (1, 0.0, 1.8),  # -10% at the low end of a 20% spread
        (1, 1.0, 2.2),
        (12, 0.5, 3600.0),  # 2 * 2^11 = 4096 -> capped
        (1000, 1.0, 3600.0),  # huge attempts neither overflow nor pass the cap
        (0, 0.5, 2.0),  # attempt 0 treated as the first
    ],
)
def test_backoff_schedule(attempt: int, rand: float, expected: float) -> None:
    assert Backoff(base=2.0, cap=3600.0, jitter=0.2).delay(attempt, rand=lambda: rand) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"base": 0}, "base"), ({"base": 10, "cap": 5}, "cap"), ({"jitter": 1.5}, "jitter")],
)
def test_backoff_refuses_nonsense(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Backoff(**kwargs)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 30.0),
        ("0", 0.0),
        ("1.5", 1.5),
        ("30s", 30.0),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("7d", 604800.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        (" 10S ", 10.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "not a duration"),
        ("abc", "not a duration"),
        ("5x", "not a duration"),
        ("-3", ">= 0"),
        ("nan", ">= 0"),
        ("inf", ">= 0"),
        ("1h 30m", "not a duration"),
    ],
)
def test_parse_duration_errors_name_the_field(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment) as info:
        parse_duration(text, "--lease")
    assert str(info.value).startswith("--lease:")


def test_derived_key_comes_from_the_work_not_the_order_of_keys() -> None:
    a = derive_key("ocr", {"doc": "invoice-1", "pages": [1, 2]})
    b = derive_key("ocr", {"pages": [1, 2], "doc": "invoice-1"})
    assert a == b
    assert a.startswith("ocr:sha256:")
    assert derive_key("ocr", {"doc": "invoice-2"}) != a
    assert derive_key("extract", {"doc": "invoice-1", "pages": [1, 2]}) != a


@pytest.mark.parametrize(
    ("job", "field"),
    [
        (NewJob(""), "job_type"),
        (NewJob("x" * 201), "job_type"),
        (NewJob("a\x00b"), "job_type"),
        (NewJob("ocr", payload=[1, 2]), "payload"),  # type: ignore[arg-type]
        (NewJob("ocr", payload={"x": {1, 2}}), "payload"),
        (NewJob("ocr", payload={"x": float("nan")}), "payload"),
        (NewJob("ocr", payload={"x": "a\x00"}), "payload"),
        (NewJob("ocr", payload={"x": "y" * 2000}), "payload"),  # over the 1000-byte limit below
        (NewJob("ocr", priority=-1), "priority"),
        (NewJob("ocr", priority=40000), "priority"),
        (NewJob("ocr", priority=True), "priority"),
        (NewJob("ocr", max_attempts=0), "max_attempts"),
        (NewJob("ocr", delay=-1), "delay"),
        (NewJob("ocr", delay=float("inf")), "delay"),
        (NewJob("ocr", delay=1, available_at=datetime.now(UTC)), "delay"),
        (NewJob("ocr", available_at=datetime(2030, 1, 1)), "available_at"),
        (NewJob("ocr", key=""), "key"),
        (NewJob("ocr", key="k" * 501), "key"),
        (NewJob("ocr", trace_context={"traceparent": 1}), "trace_context"),  # type: ignore[dict-item]
    ],
)
def test_validation_names_the_field(job: NewJob, field: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        validate(job, max_payload_bytes=1000)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}:")
    assert "(" in str(info.value)  # every message carries a fix in parentheses


def test_validation_normalises() -> None:
    row = validate(NewJob("ocr", {"b": 1, "a": "é"}))
    assert row.payload_json == '{"a":"é","b":1}'
    assert row.delay == 0.0
    assert row.key == derive_key("ocr", {"a": "é", "b": 1})


def test_parse_queries_splits_named_blocks() -> None:
    text = "-- header\n-- name: one\nSELECT 1;\n\n-- name: two\n-- why\nSELECT 2;\n"
    assert parse_queries(text) == {"one": "SELECT 1;", "two": "-- why\nSELECT 2;"}
    with pytest.raises(ValueError, match="twice"):
        parse_queries("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;")
    with pytest.raises(ValueError, match="empty"):
        parse_queries("-- name: a\n\n-- name: b\nSELECT 1;")


def test_shipped_sql_loads() -> None:
    assert {"claim", "heartbeat", "succeed", "set_state_if_held", "release", "reap", "enqueue"} <= set(queries())
    assert next(m.version for m in migrations()) == 1


def test_every_core_query_declares_its_row_shape() -> None:
    blocks = CORE.blocks()
    assert blocks and {name for name, b in blocks.items() if b.shape is None} == set()
    assert {b.shape for b in blocks.values()} <= set(SHAPES)


def test_parse_blocks_reads_the_shape_and_refuses_an_unknown_one() -> None:
    blocks = parse_blocks("-- name: a :many\nSELECT 1;\n-- name: b\nSELECT 2;\n-- name: c :scalar\nSELECT 3;\n")
    assert {n: (b.sql, b.shape) for n, b in blocks.items()} == {
        "a": ("SELECT 1;", "many"),
        "b": ("SELECT 2;", None),
        "c": ("SELECT 3;", "scalar"),
    }
    with pytest.raises(ValueError, match=r"declares shape :rows; use one of :one, :many, :scalar, :exec"):
        parse_blocks("-- name: a :rows\nSELECT 1;")


def test_a_statement_run_under_another_shape_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'claim' is declared :many .* but run as :one"):
        statement("claim", "one")


AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("attempt", "max_attempts", "retryable", "backoff", "expected"),
    [
        # Attempts remain: retry after the backoff.
        (1, 5, True, 2.0, FailureDecision("pending", AT + timedelta(seconds=2), 2.0)),
        (4, 5, True, 16.0, FailureDecision("pending", AT + timedelta(seconds=16), 16.0)),
        # The last attempt failed: dead, because the attempts are used up.
        (5, 5, True, 32.0, FailureDecision("dead", reason=DeadReason.ATTEMPTS_USED_UP)),
        # More attempts counted than allowed (max lowered by hand): still dead, same reason.
        (7, 5, True, 2.0, FailureDecision("dead", reason=DeadReason.ATTEMPTS_USED_UP)),
        (1, 1, True, 2.0, FailureDecision("dead", reason=DeadReason.ATTEMPTS_USED_UP)),
        # Not retryable: dead at once, whatever remains; that reason wins on the last attempt too.
        (1, 5, False, 2.0, FailureDecision("dead", reason=DeadReason.NOT_RETRYABLE)),
        (5, 5, False, 2.0, FailureDecision("dead", reason=DeadReason.NOT_RETRYABLE)),
        # The delay is clamped: never in the past, never beyond a day.
        (1, 5, True, -3.0, FailureDecision("pending", AT, 0.0)),
        (1, 5, True, 0.0, FailureDecision("pending", AT, 0.0)),
        (2, 5, True, 10 * MAX_RETRY_DELAY, FailureDecision("pending", AT + timedelta(days=1), MAX_RETRY_DELAY)),
    ],
)
def test_decide_failure(
    attempt: int, max_attempts: int, retryable: bool, backoff: float, expected: FailureDecision
) -> None:
    assert decide_failure(attempt, max_attempts, retryable, backoff, AT) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgresql://bob:s3cret@db:5432/app", "postgresql://bob:***@db:5432/app"),
        ("host=db user=bob password=s3cret dbname=app", "host=db user=bob password=*** dbname=app"),
        ("host=db password='a b\\' c' dbname=app", "host=db password=*** dbname=app"),
        ("postgres://bob@db/app", "postgres://bob@db/app"),
    ],
)
def test_redact_hides_passwords(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_resolve_and_describe_dsn() -> None:
    assert resolve_dsn("postgresql://a@b/c", {"DATABASE_URL": "x"}) == "postgresql://a@b/c"
    assert resolve_dsn(None, {"DATABASE_URL": "postgresql://x@y/z"}) == "postgresql://x@y/z"
    assert resolve_dsn(None, {}) == ""
    assert describe("postgresql://bob:pw@db:6432/app") == "bob@db:6432/app"
    assert "pw" not in describe("postgresql://bob:pw@db:6432/app")


def test_render_table() -> None:
    text = render([{"id": 1, "error": "x\ny"}, {"id": 22, "error": None}])
    assert text.splitlines() == ["id  error", "--  -----", "1   x y", "22"]
    assert render([]) == "(none)"


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("postgresql://u@db/app", {"keepalives_idle": "10", "tcp_user_timeout": "30000", "dbname": "app"}),
        ("host=db keepalives_idle=60", {"keepalives_idle": "60", "keepalives_count": "3", "host": "db"}),
        ("", {"keepalives": "1"}),
    ],
)
def test_tcp_keepalives_are_added_unless_given(dsn: str, expected: dict[str, str]) -> None:
    params = psycopg.conninfo.conninfo_to_dict(with_tcp_defaults(dsn))
    assert {k: params[k] for k in expected} == expected


def test_tcp_defaults_leave_an_unparseable_dsn_alone() -> None:
    assert with_tcp_defaults("host='unterminated") == "host='unterminated"


def test_pgwork_queue_still_imports_what_it_did_from_pgwork_db() -> None:
    import pgwork.db
    import pgwork.queue

    for name in ("Queue", "migrate", "grant", "connect", "claim_statement", "Listener", "AnyConnection", "new_token"):
        assert getattr(pgwork.queue, name) is getattr(pgwork.db, name)
    # The shim for users re-exports every name it lists, each the very object pgwork.db holds.
    assert {n: getattr(pgwork.queue, n) for n in pgwork.queue.__all__} == {
        n: getattr(pgwork.db, n) for n in pgwork.queue.__all__
    }
