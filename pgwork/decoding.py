"""Reading rows that Python cannot represent, without raising.

The schema lets plain SQL store values pgwork itself would never write: JSON nested thousands of
levels deep (Python's json gives up near 1000), an integer with more digits than Python converts
(4300 by default), a timestamp past the year 9999 or `infinity`. psycopg raises while it fetches
such a row; after a claim has committed that would kill the worker and leave the job `running`,
and every replacement would claim it and die the same way. So every connection pgwork opens
loads these types through the loaders below: an unreadable value becomes an `Undecodable`
marker that carries the reason, and only the rows that hold one are affected. The worker fails
a job whose payload is undecodable (dead at once: it will never decode); tables show the marker.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from psycopg import DataError, abc, postgres
from psycopg.abc import AdaptContext, Buffer
from psycopg.adapt import Loader
from psycopg.pq import Format
from psycopg.types.datetime import TimestamptzBinaryLoader, TimestamptzLoader
from psycopg.types.json import set_json_loads


class Undecodable:
    """A stored value Python cannot represent; `reason` says why. Falsy neither way: test with
    isinstance (or `undecodable_reason`)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"<undecodable: {self.reason}>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Undecodable) and other.reason == self.reason

    def __hash__(self) -> int:
        return hash(self.reason)


def undecodable_reason(value: Any) -> str | None:
    return value.reason if isinstance(value, Undecodable) else None


_decode = json.JSONDecoder().decode  # what json.loads uses, without its per-call checks


def loads(data: bytes | str) -> Any:
    """json.loads, or an Undecodable marker instead of any exception."""
    if data == b"{}":
        return {}  # most jobs' trace context: a claim decodes one per job (issue 28)
    # Decoded here rather than by json.loads, whose guess at the encoding of bytes (UTF-8, 16 or
    # 32, a BOM) costs as much as reading a small payload: PostgreSQL sends UTF-8 (issue 28).
    # Whatever this cannot read goes to json.loads, so the answer, or the error, stays its own.
    try:
        return _decode(data.decode("utf-8", "surrogatepass") if isinstance(data, bytes) else data)
    except Exception:
        return _loads_as_json_does(data)


def _loads_as_json_does(data: bytes | str) -> Any:
    try:
        return json.loads(data)
    except RecursionError:
        return Undecodable("JSON nested too deeply for Python to decode")
    except ValueError as exc:  # JSONDecodeError, and the int-str digit limit
        text = str(exc)
        if "digits" in text:
            return Undecodable(f"JSON holds a number too long for Python to decode ({text.split(';', maxsplit=1)[0]})")
        return Undecodable(f"JSON that Python cannot decode ({text[:200]})")
    except Exception as exc:  # a decoder bug must not stop a fetch either
        return Undecodable(f"JSON that Python cannot decode ({type(exc).__name__})")


# psycopg's own timestamptz loaders: its C ones where psycopg has its C extension (a C class
# cannot be subclassed from Python, so each is wrapped). The pure-Python ones are about 1.5 us a
# value slower, and a claim's row carries two (issue 28): in binary from a claim alone, as text
# from the one-message finish-and-claim.
_TIMESTAMPTZ_TEXT: type[abc.Loader] = (
    psycopg.adapters.get_loader(postgres.types["timestamptz"].oid, Format.TEXT) or TimestamptzLoader
)
_TIMESTAMPTZ_BINARY: type[abc.Loader] = (
    psycopg.adapters.get_loader(postgres.types["timestamptz"].oid, Format.BINARY) or TimestamptzBinaryLoader
)


def _safe_timestamptz(wrapped: type[abc.Loader], fmt: Format) -> type[Loader]:
    """A loader of `fmt` that reads a timestamptz as `wrapped` does, and one Python cannot
    represent (infinity, a year past 9999) as an Undecodable instead of failing the whole fetch."""

    class SafeTimestamptz(Loader):
        format = fmt

        def __init__(self, oid: int, context: AdaptContext | None = None) -> None:
            super().__init__(oid, context)
            self._load = wrapped(oid, context).load

        def load(self, data: Buffer) -> Any:
            try:
                return self._load(data)
            except DataError as exc:
                return Undecodable(f"a timestamp Python cannot represent ({str(exc)[:120]})")

    return SafeTimestamptz


SafeTimestamptzLoader = _safe_timestamptz(_TIMESTAMPTZ_TEXT, Format.TEXT)
SafeTimestamptzBinaryLoader = _safe_timestamptz(_TIMESTAMPTZ_BINARY, Format.BINARY)


def configure(context: AdaptContext) -> None:
    """Make `context` (a connection) load json, jsonb and timestamptz without ever raising."""
    set_json_loads(loads, context)
    context.adapters.register_loader("timestamptz", SafeTimestamptzLoader)
    context.adapters.register_loader("timestamptz", SafeTimestamptzBinaryLoader)
