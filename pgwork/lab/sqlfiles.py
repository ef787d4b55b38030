"""The lab's own statements, from pgwork/lab/sql/*.sql, by name."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import LiteralString

from pgwork.sql_files import parse_queries

FILES = ("strategies.sql", "lab.sql")


@cache
def _queries() -> dict[str, LiteralString]:
    found: dict[str, LiteralString] = {}
    for name in FILES:
        text = resources.files("pgwork.lab").joinpath(f"sql/{name}").read_text(encoding="utf-8")
        for key, statement in parse_queries(text).items():
            if key in found:
                raise ValueError(f"lab query {key!r} is defined twice")
            found[key] = statement
    return found


def query(name: str) -> LiteralString:
    try:
        return _queries()[name]
    except KeyError:
        raise KeyError(f"no lab query named {name!r} in pgwork/lab/sql/") from None
