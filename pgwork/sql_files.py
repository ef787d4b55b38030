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
class Step:
    """One statement of a no-transaction migration: build or drop one index concurrently."""

    kind: str  # "create" or "drop"
    schema: str  # the index's schema (a CREATE names the table's: the index lives beside it)
    index: str
    sql: LiteralString


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: LiteralString
    # Empty: the migration runs in the migrating transaction. Otherwise it carries the marker and
    # these statements run one by one in autocommit (parse_no_transaction).
    steps: tuple[Step, ...] = ()

    @property
    def transactional(self) -> bool:
        return not self.steps


# The first line of a migration whose statements must run outside a transaction: CREATE/DROP
# INDEX CONCURRENTLY, which PostgreSQL refuses inside one, and which leave writers running.
NO_TRANSACTION = "-- pgwork: no-transaction"
_DIRECTIVE = re.compile(r"^\s*--\s*pgwork\s*:", re.IGNORECASE)
_IDENT = r"[a-z_][a-z0-9_]*"
_CREATE = re.compile(
    rf"CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+(?P<index>{_IDENT})\s+"
    rf"ON\s+(?P<schema>{_IDENT})\.{_IDENT}\b.*",
    re.IGNORECASE | re.DOTALL,
)
_DROP = re.compile(
    rf"DROP\s+INDEX\s+CONCURRENTLY\s+IF\s+EXISTS\s+(?P<schema>{_IDENT})\.(?P<index>{_IDENT})", re.IGNORECASE
)
_ALLOWED = (
    "only `CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS name ON schema.table ...;` and "
    "`DROP INDEX CONCURRENTLY IF EXISTS schema.name;` may run outside a transaction; put anything else "
    "in a migration of its own without the marker"
)


def _refuse(where: str, line: int, problem: str) -> ValueError:
    return ValueError(f"{where}, line {line}: {problem}")


def parse_no_transaction(text: str, where: str = "migration") -> tuple[Step, ...]:
    """The statements of a migration that begins with NO_TRANSACTION, or ValueError naming the
    line and the fix (pure). Statements end with `;` at the end of a line; whole-line comments
    and blank lines may stand between them. Nothing but index builds and drops, each idempotent,
    is accepted: the migrator splits the file by lines, never by parsing SQL, and reruns it
    whole after an interruption."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != NO_TRANSACTION:
        raise _refuse(where, 1, f"a no-transaction migration begins with the line `{NO_TRANSACTION}`")
    found: list[tuple[int, str]] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(lines[1:], start=2):
        line = raw.strip()
        if _DIRECTIVE.match(line):
            raise _refuse(where, number, f"`{NO_TRANSACTION}` belongs on the first line, once")
        if not line or line.startswith("--"):
            continue
        if "--" in line or "/*" in line:
            raise _refuse(where, number, "comments go on lines of their own")
        if ";" in line[:-1]:
            raise _refuse(where, number, "one statement per `;`, and the `;` ends its line")
        if not parts:
            start = number
        parts.append(line.removesuffix(";"))
        if line.endswith(";"):
            found.append((start, " ".join(parts)))
            parts = []
    if parts:
        raise _refuse(where, start, "the statement does not end with `;` at the end of a line")
    if not found:
        raise _refuse(where, 1, f"holds no statement; {_ALLOWED}")
    return tuple(_step(where, number, statement) for number, statement in found)


def _step(where: str, number: int, statement: str) -> Step:
    for kind, pattern in (("create", _CREATE), ("drop", _DROP)):
        match = pattern.fullmatch(statement)
        if match is not None:
            # The text comes from files shipped inside the package, never from input (mypy reads
            # LiteralString as str, so no cast is needed to say so).
            return Step(kind, match["schema"].lower(), match["index"].lower(), statement)
    head = " ".join(statement.split()[:3])
    raise _refuse(where, number, f"`{head} ...` is refused: {_ALLOWED}")


def check_transactional(text: str, where: str = "migration") -> None:
    """ValueError unless a migration without the marker can run in a transaction (pure): no
    directive but the marker on the first line, and no CONCURRENTLY outside comments."""
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.strip() == NO_TRANSACTION:
            raise _refuse(where, number, f"`{NO_TRANSACTION}` belongs on the first line, once")
        if _DIRECTIVE.match(raw):
            raise _refuse(where, number, f"unknown directive {raw.strip()!r}; the only one is `{NO_TRANSACTION}`")
        if re.search(r"\bCONCURRENTLY\b", raw.split("--", 1)[0], re.IGNORECASE):
            raise _refuse(
                where, number, f"CONCURRENTLY cannot run in a transaction; begin the file with `{NO_TRANSACTION}`"
            )


def parse_migration(version: int, name: str, text: LiteralString) -> Migration:
    """A migration file's contents, checked (pure)."""
    where = f"migration {version:04d}_{name}.sql"
    if text.split("\n", 1)[0].strip() == NO_TRANSACTION:
        return Migration(version, name, text, parse_no_transaction(text, where))
    check_transactional(text, where)
    return Migration(version, name, text)


@cache
def migrations() -> tuple[Migration, ...]:
    folder = resources.files("pgwork").joinpath("sql/migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _MIGRATION.match(entry.name)
        if match is None:
            continue
        text: LiteralString = entry.read_text(encoding="utf-8")
        found.append(parse_migration(int(match.group(1)), match.group(2), text))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise ValueError(f"migrations must be numbered 1..N without gaps, found {versions}")
    return tuple(found)


def latest_version() -> int:
    return len(migrations())
