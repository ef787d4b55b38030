"""What the queue commands share: their usage error, argument readers and printing."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pgwork.db import Queue
from pgwork.dsn import default_database_note, resolve_dsn
from pgwork.durations import parse_age, parse_duration
from pgwork.errors import PgworkError
from pgwork.tables import json_safe, render
from pgwork.validation import parse_id, parse_whole

Handler = Callable[[argparse.Namespace], int]


class UsageError(PgworkError):
    pass


def adder(sub: Any) -> Callable[[str, Handler, str], argparse.ArgumentParser]:
    """`add(name, func, help)`: a subcommand whose help is also its description, running `func`."""

    def add(name: str, func: Handler, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    return add


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"--payload: not valid JSON ({exc.msg} at position {exc.pos}); "
            "quote it for the shell, e.g. --payload '{\"doc\": 1}'"
        ) from None
    except RecursionError:
        raise UsageError("--payload: nested too deeply to read (flatten it; pgwork accepts 100 levels)") from None
    except ValueError as exc:  # the int-str digit limit: a number with thousands of digits
        raise UsageError(f"--payload: cannot be read ({str(exc).split(';')[0]}; pass big numbers as strings)") from None
    if not isinstance(value, dict):
        raise UsageError(
            f"--payload: must be a JSON object, got {type(value).__name__}; e.g. --payload '{{\"value\": 1}}'"
        )
    return value


def job_ids(values: Sequence[str]) -> list[int]:
    return [parse_id(v, "ID") for v in values]


def whole(text: str | None, field: str, fix: str) -> int | None:
    return None if text is None else parse_whole(text, field, fix)


def bounded(text: str | None, field: str, low: int, high: int, default: int) -> int:
    """A whole-number option within low..high, `default` only when it was not given at all: 0 or
    a negative size is refused, never quietly replaced by the default."""
    if text is None:
        return default
    value = parse_whole(text, field, f"use {low}..{high}")
    if not low <= value <= high:
        raise UsageError(f"{field}: {value} is out of range (use {low}..{high})")
    return value


def seconds(text: str, field: str) -> float:
    try:
        return parse_duration(text, field)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def age_seconds(text: str, field: str) -> float:
    """An age such as 7d or 12h (pgwork.durations.parse_age), in seconds; a UsageError names the field."""
    try:
        return parse_age(text, field)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def dsn_of(args: argparse.Namespace) -> str:
    """The connection string for a command; says on stderr which database libpq will pick when
    nothing names one."""
    dsn = resolve_dsn(args.dsn)
    note = default_database_note(dsn, os.environ, getpass.getuser())
    if note is not None:
        print(f"pgwork {args.command}: {note}", file=sys.stderr)
    return dsn


def open_queue(args: argparse.Namespace) -> Queue:
    return Queue(dsn_of(args), pool_size=1)


def print_rows(rows: list[dict[str, Any]], as_json: bool, columns: Sequence[str] | None = None) -> None:
    if as_json:
        # Strict JSON (no NaN/Infinity) with every control character escaped by the encoder.
        print(json.dumps(json_safe(rows), default=str, indent=2, allow_nan=False))
    else:
        print(render(rows, columns))
