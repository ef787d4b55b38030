"""pgwork: a work queue for slow, failure-prone jobs, inside PostgreSQL."""

from pgwork.backoff import Backoff
from pgwork.errors import InvalidArgument, PgworkError
from pgwork.models import ClaimedJob, Completion, FailOutcome, Lease, LeaseState, NewJob
from pgwork.queue import Queue, migrate

__version__ = "0.1.0"

__all__ = [
    "Backoff",
    "ClaimedJob",
    "Completion",
    "FailOutcome",
    "InvalidArgument",
    "Lease",
    "LeaseState",
    "NewJob",
    "PgworkError",
    "Queue",
    "__version__",
    "migrate",
]
