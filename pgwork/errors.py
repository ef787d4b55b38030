"""Errors pgwork raises on purpose. Each message names what is wrong and how to fix it."""

from __future__ import annotations


class PgworkError(Exception):
    """Base class: the CLI prints these as one line, without a traceback."""


class InvalidArgument(PgworkError, ValueError):
    """A caller passed a value pgwork refuses; nothing was written."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        super().__init__(f"{field}: {problem} ({fix})")


class DatabaseError(PgworkError):
    """The database cannot be used as it is (encoding, schema version, reachability)."""


class EncodingRefused(DatabaseError):
    pass


class NotMigrated(DatabaseError):
    pass


class SchemaTooNew(DatabaseError):
    pass


class Unreachable(DatabaseError):
    pass


# Both below are kinds of Unreachable (code that reports "cannot reach the database" keeps
# working), but callers that retry Unreachable should give up on them at once.
class BadConnectionString(Unreachable):
    """The connection string itself is wrong; retrying cannot help."""


class AccessDenied(Unreachable):
    """The server answered and refused us (password, pg_hba, unknown role or database);
    retrying cannot help until someone changes the credentials or the server."""


PERMANENT_CONNECT_ERRORS = (BadConnectionString, AccessDenied)
