"""What the server stores, the worker can read back (issue 24, class 4): a checkpoint is measured
by the client the way pgwork.checkpoint measures it, and its shape is refused alike on both sides,
so neither a raw database error nor an undecodable `last_checkpoint` can come of it."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.decoding import loads
from pgwork.errors import InvalidArgument
from pgwork.jsonshape import jsonb_text_bytes
from pgwork.progress import MAX_CHECKPOINT_BYTES, checkpoint_json
from tests.support.rows import Rows


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


SAMPLES: list[Any] = [
    {"xs": [1e300] * 3},
    {"tiny": 1.5e-300, "neg": -2.5e20, "int": 10**40, "f": 0.1, "e": 1e16},
    {"text": 'é\u00e9\n\t"\\ ünïcödé ✓', "nested": {"a": [1, {"b": None}], "t": True}},
    [],
    {},
    "plain",
    12345,
]


@pytest.mark.parametrize("value", SAMPLES, ids=range(len(SAMPLES)))
def test_the_client_measures_a_checkpoint_as_the_server_does(queue: Queue, value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    with psycopg.connect(queue.dsn) as conn:
        row = conn.execute("SELECT octet_length(%s::jsonb::text)", (text,)).fetchone()
    assert row is not None and jsonb_text_bytes(value, text) == row[0]


def test_a_checkpoint_small_as_python_writes_it_but_large_as_stored_is_refused_naming_state(queue: Queue) -> None:
    state = {"xs": [1e300] * 250}  # ~2 KB as json.dumps writes it, ~75 KB as jsonb prints it
    assert len(json.dumps(state)) < 3000
    with pytest.raises(InvalidArgument) as caught:
        checkpoint_json(state)
    assert caught.value.field == "state" and f"over the limit of {MAX_CHECKPOINT_BYTES}" in str(caught.value)
    held = Rows(queue, "pages").running()
    with pytest.raises(InvalidArgument) as again:
        queue.checkpoint(held.lease, state)
    assert again.value.field == "state"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[" * 5000 + "]" * 5000, "nested more than 100 levels"),
        ("[" * 101 + "]" * 101, "nested more than 100 levels"),
        ('{"n": 1' + "0" * 4300 + "}", "4300 digits"),
        ('{"n": [-1' + "0" * 5000 + "]}", "4300 digits"),
    ],
    ids=["5000 deep", "101 deep", "4301 digits", "negative 5001 digits"],
)
def test_the_server_refuses_what_the_next_attempt_could_not_decode(queue: Queue, text: str, words: str) -> None:
    """A lease holder calling pgwork.checkpoint itself, past the client's checks."""
    held = Rows(queue, "pages").running()
    with psycopg.connect(queue.dsn) as conn, pytest.raises(psycopg.errors.InvalidParameterValue, match=words):
        conn.execute("SELECT * FROM pgwork.checkpoint(%s, %s, %s::jsonb)", (held.id, held.lease.token, text))
    row = queue.job(held.id)
    assert row is not None and row.checkpoint is None


@pytest.mark.parametrize(
    "value", [_nested(100), {"n": 10**4299}, {"n": -(10**4299)}, {"n": 1e300, "m": 1.5e-300}], ids=range(4)
)
def test_what_the_server_accepts_the_next_attempt_decodes(queue: Queue, value: Any) -> None:
    held = Rows(queue, "pages").running()
    assert queue.checkpoint(held.lease, value) is True
    with psycopg.connect(queue.dsn) as conn:
        row = conn.execute("SELECT checkpoint::text FROM pgwork.jobs WHERE id = %s", (held.id,)).fetchone()
    assert row is not None
    decoded = loads(row[0])
    assert decoded == json.loads(row[0])  # a real value, not pgwork.decoding's undecodable marker


def test_a_server_refusal_reaches_the_caller_as_invalid_argument(queue: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client whose own check let something through (an older one) still sees InvalidArgument."""
    import pgwork.db.checkpoints as checkpoints

    monkeypatch.setattr(checkpoints, "checkpoint_json", json.dumps)
    held = Rows(queue, "pages").running()
    with pytest.raises(InvalidArgument) as caught:
        queue.checkpoint(held.lease, _nested(150))
    assert caught.value.field == "state" and "nested more than 100 levels" in str(caught.value)
    with pytest.raises(InvalidArgument) as big:
        queue.checkpoint(held.lease, {"blob": "x" * MAX_CHECKPOINT_BYTES})
    assert big.value.field == "state" and "at most 65536 bytes" in str(big.value)


# -- results follow the same rule (migration 0020) ----------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["[" * 101 + "]" * 101, "[" * 5000 + "]" * 5000, '{"n": 1' + "0" * 4300 + "}"],
    ids=["101 deep", "5000 deep", "4301 digits"],
)
def test_the_server_refuses_a_result_no_reader_could_decode(queue: Queue, text: str) -> None:
    held = Rows(queue, "pages").running()
    with psycopg.connect(queue.dsn) as conn, pytest.raises(psycopg.errors.CheckViolation, match="job_results_result"):
        conn.execute("SELECT * FROM pgwork.succeed(%s, %s, %s::jsonb)", (held.id, held.lease.token, text))
    row = queue.job(held.id)
    assert row is not None and row.status == "running"


def test_the_client_refuses_the_same_results_and_the_server_takes_the_rest(queue: Queue) -> None:
    from pgwork.jsonshape import result_json

    for refused in (_nested(101), {"n": 10**4300}):
        with pytest.raises(InvalidArgument) as caught:
            result_json(refused)
        assert caught.value.field == "result"
    held = Rows(queue, "pages").running()
    assert queue.succeed(held.lease, {"deep": _nested(99), "big": 10**4299})
