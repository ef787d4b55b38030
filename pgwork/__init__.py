"""pgwork: a work queue for slow, failure-prone jobs, inside PostgreSQL."""

from pgwork.backoff import Backoff
from pgwork.db import Queue, migrate
from pgwork.db.aqueue import AsyncQueue
from pgwork.errors import InvalidArgument, JobFailed, PgworkError, WaitTimeout
from pgwork.models import ClaimedJob, Completion, FailOutcome, Lease, LeaseState, NewJob
from pgwork.pipeline import Then
from pgwork.progress import Progress
from pgwork.version import __version__
from pgwork.worker.app import App, periodic
from pgwork.worker.job import Job, PermanentError, current_job
from pgwork.worker.registry import handler

__all__ = [
    "App",
    "AsyncQueue",
    "Backoff",
    "ClaimedJob",
    "Completion",
    "FailOutcome",
    "InvalidArgument",
    "Job",
    "JobFailed",
    "Lease",
    "LeaseState",
    "NewJob",
    "PermanentError",
    "PgworkError",
    "Progress",
    "Queue",
    "Then",
    "WaitTimeout",
    "__version__",
    "current_job",
    "handler",
    "migrate",
    "periodic",
]
