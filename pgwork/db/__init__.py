"""pgwork's database layer: the only package that talks to PostgreSQL.

connect     connections, TCP keepalives, the decoding loaders, libpq errors as pgwork's
schema      schema version and checks, migrate, grant, the installed claim statement
statements  the named statements of sql/queries.sql, run by their declared row shape
rows        the typed rows they return
pool        the Queue's connection pool      listen   LISTEN on a session connection
base/queue  the Queue façade (questions in base, writes in queue, batches, limits)
"""

from pgwork.db.connect import AnyConnection, check_encoding, check_idle_connection, connect
from pgwork.db.listen import NOTIFY_CHANNEL, Listener
from pgwork.db.pool import POOL_TIMEOUT
from pgwork.db.queue import Queue, new_token
from pgwork.db.rows import DeadRow, JobContents, JobDetail, JobRow, ResultRow, RetryingRow, RunningRow
from pgwork.db.schema import (
    GRANT_PROFILES,
    MAX_ROLE_BYTES,
    check_grantee,
    check_schema,
    claim_statement,
    grant,
    migrate,
    schema_version,
)

__all__ = [
    "GRANT_PROFILES",
    "MAX_ROLE_BYTES",
    "NOTIFY_CHANNEL",
    "POOL_TIMEOUT",
    "AnyConnection",
    "DeadRow",
    "JobContents",
    "JobDetail",
    "JobRow",
    "Listener",
    "Queue",
    "ResultRow",
    "RetryingRow",
    "RunningRow",
    "check_encoding",
    "check_grantee",
    "check_idle_connection",
    "check_schema",
    "claim_statement",
    "connect",
    "grant",
    "migrate",
    "new_token",
    "schema_version",
]
