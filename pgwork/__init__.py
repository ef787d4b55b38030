"""pgwork: a work queue for slow, failure-prone jobs, inside PostgreSQL."""

from pgwork.backoff import Backoff
from pgwork.db import Queue, migrate
from pgwork.errors import InvalidArgument, PgworkError
from pgwork.models import ClaimedJob, Completion, FailOutcome, Lease, LeaseState, NewJob
from pgwork.version import __version__
from pgwork.worker.registry import Job, PermanentError, handler

__all__ = [
    "Backoff",
    "ClaimedJob",
    "Completion",
    "FailOutcome",
    "InvalidArgument",
    "Job",
    "Lease",
    "LeaseState",
    "NewJob",
    "PermanentError",
    "PgworkError",
    "Queue",
    "__version__",
    "handler",
    "migrate",
]
