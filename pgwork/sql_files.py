"""SQL lives in .sql files; this module loads it by name.

`queries.sql` holds `-- name: NAME` blocks (the procrastinate layout); migrations are files named
`NNNN_description.sql` applied in order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import LiteralString, cast

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_MIGRATION = re.compile(r"^(\d{4})_(\w+)\.sql$")


def parse_queries(text: str) -> dict[str, LiteralString]:
    """Split a queries file into {name: statement}. Comment lines inside a block are kept."""
    parts = _NAME.split(text)
    queries: dict[str, LiteralString] = {}
    # parts = [preamble, name1, body1, name2, body2, ...]
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        statement = body.strip()
        if not statement:
            raise ValueError(f"query {name!r} is empty")
        # The text comes from files shipped inside the package, never from input.
        queries[name] = cast(LiteralString, statement)
    return queries


def read_text(path: str) -> str:
    """A file shipped inside the package, by its path below pgwork/."""
    return resources.files("pgwork").joinpath(path).read_text(encoding="utf-8")


@cache
def queries() -> dict[str, LiteralString]:
    return parse_queries(read_text("sql/queries.sql"))


def query(name: str) -> LiteralString:
    try:
        return queries()[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in pgwork/sql/queries.sql") from None


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: LiteralString


@cache
def migrations() -> tuple[Migration, ...]:
    folder = resources.files("pgwork").joinpath("sql/migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _MIGRATION.match(entry.name)
        if match is None:
            continue
        text: LiteralString = entry.read_text(encoding="utf-8")
        found.append(Migration(int(match.group(1)), match.group(2), text))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise ValueError(f"migrations must be numbered 1..N without gaps, found {versions}")
    return tuple(found)


def latest_version() -> int:
    return len(migrations())
