"""Hard timeouts: which applies, when a stuck handler is given up, what the job's error says,
and when a worker has given up on too many threads. Pure, no I/O; pgwork.worker.watchdog acts.

A timeout is enforced in two steps. At the deadline the handler is told to stop (the cooperative
cancellation every handler already sees through `job.should_stop` and `job.sleep`); one that
returns within a short grace fails the attempt as timed out. One that does not is abandoned: a
Python thread cannot be killed, so the attempt is failed without it, its runner slot goes to a
new thread, and whatever the old thread returns later is ignored (its lease token no longer
holds the job). Abandoned threads still use memory and CPU (or a GPU), so a worker that has
more than `--max-abandoned` of them stops claiming, drains, and exits non-zero for a restart.
"""

from __future__ import annotations

import enum

from pgwork.durations import format_duration

# How long a told-to-stop handler may take to return before it is abandoned: a tenth of the
# timeout, at least half a second (a handler checking should_stop between steps needs a moment),
# at most five seconds (the job is already late).
MIN_ABANDON_GRACE = 0.5
MAX_ABANDON_GRACE = 5.0
# The worker's exit code once abandoned threads passed --max-abandoned (2 is a usage or
# connection error, 130 an interrupt).
EXIT_ABANDONED = 3
DEFAULT_MAX_ABANDONED = 3


class Step(enum.Enum):
    WAIT = "wait"  # before the deadline, or the handler was already told and has grace left
    TELL = "tell"  # the deadline passed: tell the handler to stop
    ABANDON = "abandon"  # told, and the grace passed too: fail the attempt without the thread


def effective_timeout(job_timeout: float | None, handler_timeout: float | None) -> float | None:
    """The job's own timeout (set at enqueue) wins over its handler's; None: no timeout."""
    return job_timeout if job_timeout is not None else handler_timeout


def abandon_grace(timeout: float) -> float:
    return min(MAX_ABANDON_GRACE, max(MIN_ABANDON_GRACE, timeout / 10))


def next_step(now: float, deadline: float, timeout: float, *, told: bool) -> Step:
    """What the watchdog does now for a running attempt whose deadline is `deadline` (monotonic)."""
    if now < deadline:
        return Step.WAIT
    if not told:
        return Step.TELL
    return Step.ABANDON if now >= deadline + abandon_grace(timeout) else Step.WAIT


def wake_at(deadline: float, timeout: float, *, told: bool) -> float:
    """When the attempt next needs the watchdog (its deadline, or the end of its grace)."""
    return deadline + abandon_grace(timeout) if told else deadline


def timeout_message(timeout: float, *, returned: bool) -> str:
    """The attempt's last_error."""
    how = "the handler stopped when told; its result was discarded" if returned else "handler did not return"
    return f"timed out after {format_duration(timeout)} ({how})"


def too_many_abandoned(abandoned: int, limit: int) -> bool:
    """True once the threads abandoned and still running are more than the limit allows."""
    return abandoned > limit
