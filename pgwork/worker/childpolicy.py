"""Process isolation's decisions, pure: what a dead child's jobs say, when a child is recycled,
how a memory limit is written. pgwork.worker.children acts on them."""

from __future__ import annotations

import re
import signal

from pgwork.durations import format_duration

ISOLATIONS = ("thread", "process")
# A stop request (cancel, lost lease, shutdown) that a handler in a child ignores for this long
# gets the child killed; a timeout uses its own grace (pgwork.worker.timeouts.abandon_grace).
STOP_GRACE = 5.0

# Kubernetes' quantities, as the JobQueue's maxMemoryPerChild takes them: Ki..Ti binary, k..T decimal.
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?\s*$")
_UNITS = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10**3, "M": 10**6, "G": 10**9}
_UNITS["T"] = 10**12


def parse_size(text: str) -> int:
    """'512Mi', '4Gi', '2G', '800000000' -> bytes, as Kubernetes reads a quantity (a Gi is 2**30,
    a G 10**9). ValueError naming the accepted forms otherwise."""
    m = _SIZE.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not a size (write bytes like 2147483648, or 512Mi, 4Gi, 2G)")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def death_message(exitcode: int | None, seconds: float) -> str:
    """last_error of a job whose child process ended under it: 'handler process died: signal 9
    (killed) after 2.4 s', or '... exit code 3 after 0.1 s'."""
    took = f"after {seconds:.1f} s"
    if exitcode is None:
        return f"handler process died: its pipe closed, exit status unknown, {took}"
    if exitcode < 0:
        number = -exitcode
        try:
            what = (signal.strsignal(number) or signal.Signals(number).name).lower()
        except ValueError:
            what = "unknown signal"
        return f"handler process died: signal {number} ({what}) {took}"
    return f"handler process died: exit code {exitcode} {took}"


def killed_message(why: str, seconds: float) -> str:
    """last_error of a job whose child the worker killed (a timeout's grace passed, or a stop
    request was ignored)."""
    return f"handler process killed: {why}; it had run {format_duration(seconds)}"


def recycle_reason(jobs: int, rss: int, *, max_jobs: int, max_memory: int) -> str | None:
    """Why a child that just finished a job is replaced before the next one (0: no limit)."""
    if max_jobs and jobs >= max_jobs:
        return f"it ran {jobs} jobs (--max-jobs-per-child {max_jobs})"
    if max_memory and rss > max_memory:
        return f"its memory is {rss >> 20} MiB (--max-memory-per-child {max_memory >> 20} MiB)"
    return None
