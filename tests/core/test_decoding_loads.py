"""pgwork.decoding.loads (pure): JSON as json.loads reads it, an Undecodable marker instead of an
exception, and the empty object (most jobs' trace context) without the decoder, a new dict each time."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pgwork.decoding import Undecodable, loads


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"{}", {}),
        ("{}", {}),
        (b"{ }", {}),
        (b'{"n": 1}', {"n": 1}),
        (b"[]", []),
        (b"null", None),
        (b'"{}"', "{}"),
        (b'"\xed\xa0\x80"', "\ud800"),  # a lone surrogate, as json.loads lets it through
        (b"\xef\xbb\xbf{}", {}),  # a UTF-8 byte order mark
        ('{"a": 1}'.encode("utf-16"), {"a": 1}),  # what json.loads guesses as UTF-16
    ],
)
def test_loads_reads_json_as_json_loads_does(text: bytes | str, expected: Any) -> None:
    assert loads(text) == expected == json.loads(text)


def test_the_empty_object_is_a_new_dict_each_time() -> None:
    first, second = loads(b"{}"), loads(b"{}")
    first["changed"] = True
    assert second == {} and first is not second


@pytest.mark.parametrize("text", [b"{", b"[" * 100_000 + b"]" * 100_000, b"1" * 5000, b'"\xff"'])
def test_what_python_cannot_decode_is_a_marker_not_an_error(text: bytes) -> None:
    assert isinstance(loads(text), Undecodable)


def test_a_value_of_another_type_is_a_marker_not_an_error() -> None:
    assert isinstance(loads(memoryview(b"[1]")), Undecodable)  # type: ignore[arg-type]
