"""SQL lives in .sql files; this module loads it by name, for the core and the tools alike.

`queries.sql` holds `-- name: NAME :shape` blocks (the procrastinate and sqlc layout; the shape,
one of :one, :many, :scalar, :exec, :copy, says what the statement returns and pgwork.db.statements runs it
so); migrations are files named
`NNNN_description.sql` applied in order. The tools' own statements (the lab's strategies, the chaos
claim log) are `-- name:` blocks too, loaded through `Statements` from their own package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import LiteralString, cast

_NAME = re.compile(r"^-- name: (\w+)(?:[ \t]+:(\w+))?[ \t]*$", re.MULTILINE)
SHAPES = ("one", "many", "scalar", "exec", "copy")
_MIGRATION = re.compile(r"^(\d{4})_(\w+)\.sql$")


@dataclass(frozen=True)
class Block:
    sql: LiteralString
    shape: str | None  # None: the block declares no shape (the tools' statements may omit it)


def parse_blocks(text: str) -> dict[str, Block]:
    """Split a queries file into {name: Block}. Comment lines inside a block are kept."""
    parts = _NAME.split(text)
    blocks: dict[str, Block] = {}
    # parts = [preamble, name1, shape1, body1, name2, shape2, body2, ...]
    for name, shape, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        if name in blocks:
            raise ValueError(f"query {name!r} is defined twice")
        if shape is not None and shape not in SHAPES:
            raise ValueError(f"query {name!r} declares shape :{shape}; use one of :{', :'.join(SHAPES)}")
        statement = body.strip()
        if not statement:
            raise ValueError(f"query {name!r} is empty")
        # The text comes from files shipped inside the package, never from input.
        blocks[name] = Block(cast(LiteralString, statement), shape)
    return blocks


def parse_queries(text: str) -> dict[str, LiteralString]:
    """Split a queries file into {name: statement}."""
    return {name: block.sql for name, block in parse_blocks(text).items()}


def read_text(path: str, package: str = "pgwork") -> str:
    """A file shipped inside a package, by its path below that package's folder."""
    return resources.files(package).joinpath(path).read_text(encoding="utf-8")


class Statements:
    """The `-- name:` blocks of one or more .sql files shipped in `package`, read on first use.

    A name defined in two of the files is an error: each statement has one home.
    """

    def __init__(self, package: str, *files: str) -> None:
        if not files:
            raise ValueError("Statements needs at least one .sql file")
        self.package = package
        self.files = files
        self._loaded: dict[str, Block] | None = None

    def blocks(self) -> dict[str, Block]:
        if self._loaded is None:
            found: dict[str, Block] = {}
            for path in self.files:
                for name, block in parse_blocks(read_text(path, self.package)).items():
                    if name in found:
                        raise ValueError(f"query {name!r} is defined twice in {self._where()}")
                    found[name] = block
            self._loaded = found
        return self._loaded

    def all(self) -> dict[str, LiteralString]:
        return {name: block.sql for name, block in self.blocks().items()}

    def _block(self, name: str) -> Block:
        try:
            return self.blocks()[name]
        except KeyError:
            raise KeyError(f"no query named {name!r} in {self._where()}") from None

    def query(self, name: str) -> LiteralString:
        return self._block(name).sql

    def shape(self, name: str) -> str | None:
        return self._block(name).shape

    def _where(self) -> str:
        folder = self.package.replace(".", "/")
        return ", ".join(f"{folder}/{path}" for path in self.files)


CORE = Statements("pgwork", "sql/queries.sql")


def queries() -> dict[str, LiteralString]:
    return CORE.all()


def query(name: str) -> LiteralString:
    return CORE.query(name)


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
