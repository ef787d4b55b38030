"""Pipelines' pure parts: `Then` (a result and the follow-up jobs to create with it) and the
check of a job's parents (`after`). No I/O; docs/queue.md, Pipelines, says how they are used."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pgwork.errors import InvalidArgument
from pgwork.models import NewJob
from pgwork.quoting import quoted

# Parents of one job; a fan-in wider than this is better split into stages.
MAX_PARENTS = 10_000
# Follow-up jobs one finish may create (the database refuses more per call).
MAX_FOLLOWUPS = 10_000
_BIGINT_MAX = 2**63 - 1


@dataclass(frozen=True)
class Then:
    """A handler's return value that also creates jobs: `result` is stored as the job's result,
    and `jobs` are inserted in the same transaction that marks the job succeeded, so they exist if
    and only if it did (a lost lease or a cancel creates none). A follow-up's `after` may name an
    earlier follow-up of the same return by its key (fan-out, then a fan-in that waits for all)."""

    result: Any = None
    jobs: Sequence[NewJob] = field(default_factory=tuple)


def check_after(after: Any) -> tuple[int | str, ...]:
    """A job's parents as given to NewJob/enqueue: ids (positive ints) or idempotency keys (pure)."""
    if after is None:
        return ()
    if isinstance(after, str | bytes | int) or not isinstance(after, Sequence | set | frozenset):
        raise InvalidArgument(
            "after", f"must be a list of job ids or keys, got {quoted(after, 40)}", "e.g. after=[41, 42]"
        )
    parents = tuple(after)
    if len(parents) > MAX_PARENTS:
        raise InvalidArgument("after", f"names {len(parents)} parents", f"wait for at most {MAX_PARENTS}; add a stage")
    for parent in parents:
        if isinstance(parent, bool) or not isinstance(parent, int | str):
            raise InvalidArgument(
                "after", f"holds {quoted(parent, 40)}", "give job ids (int) or idempotency keys (str)"
            )
        if isinstance(parent, int) and not 1 <= parent <= _BIGINT_MAX:
            raise InvalidArgument("after", f"holds {parent}, not a job id", "job ids are positive")
        if isinstance(parent, str) and (not parent or len(parent) > 500 or "\x00" in parent):
            raise InvalidArgument("after", f"holds the key {quoted(parent, 40)}", "keys are 1..500 characters, no NUL")
    return parents


def check_on_parent_failure(policy: Any) -> bool:
    """A job's policy for a parent that ends dead or cancelled: True for "run" (it counts as
    ended and the job runs once every parent ended), False for "cancel" (the default: the job is
    cancelled, and revived when that parent is retried). Pure."""
    if policy == "cancel" and isinstance(policy, str):
        return False
    if policy == "run" and isinstance(policy, str):
        return True
    raise InvalidArgument(
        "on_parent_failure", f"must be 'cancel' or 'run', got {quoted(policy, 40)}", 'e.g. on_parent_failure="run"'
    )


def check_then(value: Then) -> Sequence[NewJob]:
    """The follow-ups of a `Then`, checked for shape (each job is validated as any enqueue's)."""
    jobs = value.jobs
    if isinstance(jobs, NewJob) or not isinstance(jobs, Sequence):
        raise InvalidArgument("jobs", f"must be a list of NewJob, got {quoted(jobs, 40)}", "Then(result, jobs=[...])")
    if len(jobs) > MAX_FOLLOWUPS:
        raise InvalidArgument("jobs", f"holds {len(jobs)} follow-ups", f"create at most {MAX_FOLLOWUPS} per finish")
    for job in jobs:
        if not isinstance(job, NewJob):
            raise InvalidArgument("jobs", f"holds {quoted(job, 40)}", "give pgwork.NewJob(...) values")
    return jobs
