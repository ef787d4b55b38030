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


class MigrationLocked(DatabaseError):
    """Another migrator held the migration lock for longer than this one would wait."""


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


class JobFailed(PgworkError):
    """A waited-for job ended without a result: dead (attempts used up, or a permanent error)
    or cancelled. `last_error` is the job's final error as stored."""

    def __init__(self, job_id: int, status: str, attempts: int, last_error: str | None) -> None:
        self.job_id = job_id
        self.status = status
        self.attempts = attempts
        self.last_error = last_error
        first = (last_error or "").strip().splitlines()[0] if (last_error or "").strip() else "no error recorded"
        super().__init__(f"job {job_id} is {status} after {attempts} attempt(s): {first}")


class WaitTimeout(PgworkError, TimeoutError):
    """A waited-for job had not finished when the wait's timeout ran out (it may still finish)."""

    def __init__(self, job_id: int, timeout: float, status: str) -> None:
        self.job_id = job_id
        self.timeout = timeout
        self.status = status
        super().__init__(
            f"job {job_id} is still {status} after waiting {timeout:g}s (it keeps its place; wait again, or longer)"
        )


class PoolerNeeded(DatabaseError):
    """A transaction-mode pooler (PgBouncer `pool_mode = transaction`) moved a session's prepared
    statement to another server connection, and pgwork was not told it sits behind one."""
