"""The worker side of process isolation (`--isolation process`, or `isolation="process"` on a
handler): a pool of spawned child processes (pgwork.worker.childproc) that import the app once
and keep what it loaded (a model on a GPU) from one job to the next.

A runner thread hands its job to an idle child and waits on the pipe, relaying progress and
checkpoints to the database and stop requests to the child; the handler runs on the child's
main thread, so the worker's own threads never take the interpreter lock from it. A child is
killed, and replaced, when a job's timeout grace passes or a stop request (cancel, lost lease)
is ignored for STOP_GRACE; a child that dies on its own (SIGKILL, a segfault, os._exit) fails
only the job it ran, with "handler process died: signal 9 (killed) after 2.4 s". Children are
recycled between jobs after --max-jobs-per-child jobs or above --max-memory-per-child.
Always the spawn start method: a fork after CUDA (or any thread) started is unsafe.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Protocol

from pgwork.errors import PgworkError
from pgwork.models import ClaimedJob
from pgwork.worker.childpolicy import STOP_GRACE, death_message, killed_message, recycle_reason
from pgwork.worker.childproc import child_main
from pgwork.worker.describe import first_line
from pgwork.worker.job import Job, PermanentError
from pgwork.worker.outcome import Ended
from pgwork.worker.timeouts import abandon_grace

log = logging.getLogger("pgwork.worker")

# How long a child may take to import the app before the worker gives up on it.
START_SECONDS = 600.0
# How often a waiting runner looks at its job's stop request and deadline.
TICK = 0.1


class Running(Protocol):
    """What the pool needs of a held attempt: its job, its timeout, and a place for `kill`."""

    claimed: ClaimedJob
    job: Job
    timeout: float | None
    kill: Callable[[str], None] | None


def job_fields(job: Job) -> dict[str, Any]:
    """What a child process needs to make the handler's Job."""
    return {
        "id": job.id,
        "job_type": job.job_type,
        "payload": job.payload,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "idempotency_key": job.idempotency_key,
        "trace_context": job.trace_context,
        "last_checkpoint": job.last_checkpoint,
    }


class HandlerProcessDied(Exception):
    """The child running the handler ended under it (or was killed by the worker)."""


def died(text: str) -> HandlerProcessDied:
    exc = HandlerProcessDied(text)
    exc.pgwork_described = text  # type: ignore[attr-defined]  # last_error is the sentence alone
    return exc


class ChildStartFailed(PgworkError):
    """A child could not import the app: every job sent to it would fail the same way (the
    CLI prints it as one line and exits non-zero)."""


class RemoteError(Exception):
    """An exception raised by a handler in a child, as its type, message and traceback text."""

    pgwork_described: str = ""


_REMOTE: dict[tuple[str, str, bool], type[BaseException]] = {}


def remote_error(described: str, qualname: str, module: str, message: str, permanent: bool) -> BaseException:
    """An exception standing for the child's: same type name (for error.type and last_error),
    a PermanentError when the child's was one (so the job goes dead, not retried)."""
    key = (module, qualname, permanent)
    cls = _REMOTE.get(key)
    if cls is None:
        base: type[BaseException] = PermanentError if permanent else RemoteError
        cls = _REMOTE[key] = type(qualname.rsplit(".", 1)[-1], (base,), {"__module__": module})
        cls.__qualname__ = qualname
    exc = cls(message)
    exc.pgwork_described = described  # type: ignore[attr-defined]
    return exc


class Child:
    def __init__(self, context: Any, app: str, number: int) -> None:
        parent, child = context.Pipe()
        control, child_control = context.Pipe(duplex=False)  # stop requests, read by the child's own thread
        self.conn: Connection = parent
        self.control: Connection = child_control
        self.process: BaseProcess = context.Process(
            target=child_main, args=(child, control, app), name=f"pgwork-child-{number}", daemon=True
        )
        self.process.start()
        child.close()
        control.close()
        self.number = number
        self.jobs = 0
        self.rss = 0
        self.ready = False
        self._send_lock = threading.Lock()
        self._control_lock = threading.Lock()
        self.killed_because: str | None = None
        self.running: set[int] = set()  # the ids of the jobs it runs now (a batch's several)

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def send(self, *message: Any) -> bool:
        with self._send_lock:
            try:
                self.conn.send(message)
                return True
            except (OSError, ValueError):
                return False  # it died: the waiting runner reads the end of the pipe

    def stop_job(self, job_id: int, reason: str) -> None:
        """Tell the handler of job `job_id` to stop (on the control pipe, read while it runs)."""
        # A dead child's pipe refuses it: the waiting runner reads the end of the work pipe.
        with self._control_lock, contextlib.suppress(OSError, ValueError):
            self.control.send(("stop", job_id, reason))

    def wait_ready(self) -> None:
        if self.ready:
            return
        if not self.conn.poll(START_SECONDS):
            self.kill("it did not start in time")
            raise ChildStartFailed(f"the handler process did not import the app in {START_SECONDS:g}s")
        try:
            message = self.conn.recv()
        except (EOFError, OSError):
            self.process.join(1.0)
            raise ChildStartFailed(death_message(self.process.exitcode, 0.0) + " while importing the app") from None
        if message[0] != "ready":
            raise ChildStartFailed(
                f"a handler process could not import the app: {message[1]} (with process isolation each child "
                "imports --app itself; an App run by run_worker must be named by its import path, MODULE:APP)"
            )
        self.ready = True

    def kill_job(self, job_id: int, why: str) -> None:
        """Kill it if it still runs job `job_id` (a late request must not stop the next job)."""
        with self._send_lock:
            if job_id in self.running:
                self.kill(why)

    def kill(self, why: str) -> None:
        if self.killed_because is None:
            self.killed_because = why
        if self.process.is_alive():
            self.process.kill()

    def close(self, timeout: float) -> None:
        """Ask it to exit; kill it if it has not within `timeout`."""
        self.send("exit")
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(1.0)
        self.conn.close()
        self.control.close()


class ChildPool:
    """At most `size` children (one per runner thread that runs a process-isolated job)."""

    def __init__(self, app: str, size: int, *, max_jobs: int = 0, max_memory: int = 0) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._app = app
        self._size = size
        self._max_jobs = max_jobs
        self._max_memory = max_memory
        self._idle: list[Child] = []
        self._lock = threading.Lock()
        self._made = 0
        self._closed = False
        self.replaced = 0  # children killed, dead or recycled, and replaced

    def _new(self) -> Child:
        with self._lock:
            self._made += 1
            number = self._made
        return Child(self._context, self._app, number)

    def start(self) -> None:
        """Spawn every child now, so the app (a model) loads before the first job arrives."""
        children = [self._new() for _ in range(self._size)]
        with self._lock:
            self._idle.extend(children)

    def wait_ready(self, stop: threading.Event) -> None:
        """Block until every child started by `start` has imported the app (a worker claims
        nothing before: a job claimed meanwhile would wait for a model to load, its lease
        running), or `stop` is set. ChildStartFailed if one could not import it."""
        with self._lock:
            children = list(self._idle)
        for child in children:
            while not stop.is_set() and not child.ready:
                if child.conn.poll(TICK) or not child.process.is_alive():
                    child.wait_ready()

    def _take(self) -> Child:
        with self._lock:
            child = self._idle.pop(0) if self._idle else None
        return child if child is not None else self._new()

    def _give_back(self, child: Child) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(child)
                return
        child.close(1.0)

    def _replace(self, child: Child, why: str) -> None:
        """Retire `child` and spawn its successor at once (it imports while the worker writes)."""
        self.replaced += 1
        log.info("handler process %s (pid %s) replaced: %s", child.number, child.pid, why)
        threading.Thread(target=child.close, args=(2.0,), daemon=True).start()
        if not self._closed:
            self._give_back(self._new())

    def run(self, held: Running, fields: dict[str, Any]) -> Ended:
        """Run `held`'s job in a child, relaying its messages; how it ended."""
        ended = self._call([held], fields)
        if isinstance(ended, list):
            return ended[0]
        return ended if isinstance(ended, Ended) else Ended(error=ended)

    def run_batch(self, held: Sequence[Running], fields: list[dict[str, Any]]) -> list[Ended] | BaseException:
        """A batch handler's call in one child: one ending per job, in order, or the exception
        that fails them all (the handler raised, or returned no list of one entry per job)."""
        ended = self._call(held, fields)
        return [ended] * len(held) if isinstance(ended, Ended) else ended

    def _call(self, held: Sequence[Running], payload: Any) -> Ended | list[Ended] | BaseException:
        child = self._take()
        try:
            child.wait_ready()
        except ChildStartFailed as exc:
            self._replace(child, str(exc))
            return Ended(error=exc)
        with child._send_lock:
            child.running = {h.claimed.id for h in held}
        for h in held:
            h.kill = _killer(child, h.claimed.id)
            h.job.when_stopped(_teller(child, h))
        child.send("run", payload)
        ended = _relay(child, {h.claimed.id: h for h in held}, time.monotonic())
        for h in held:
            h.kill = None
        with child._send_lock:
            child.running = set()
        child.jobs += 1
        dead = ended.error if isinstance(ended, Ended) and isinstance(ended.error, HandlerProcessDied) else None
        why = str(dead) if dead is not None else None
        why = why or recycle_reason(child.jobs, child.rss, max_jobs=self._max_jobs, max_memory=self._max_memory)
        if why is not None:
            self._replace(child, why)
        else:
            self._give_back(child)
        return ended

    def close(self, timeout: float = 2.0) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for child in idle:
            child.send("exit")
        until = time.monotonic() + timeout
        for child in idle:
            child.close(max(0.0, until - time.monotonic()))


def _killer(child: Child, job_id: int) -> Callable[[str], None]:
    return lambda why: child.kill_job(job_id, why)


def _teller(child: Child, held: Running) -> Callable[[], None]:
    return lambda: _tell_stop(child, held)


def _tell_stop(child: Child, held: Running) -> None:
    reason = held.job.stop_reason
    if reason is not None:
        child.stop_job(held.claimed.id, reason.value)


def _relay(child: Child, held: dict[int, Running], started: float) -> Ended | list[Ended] | BaseException:
    """Until the call ends: progress and checkpoints to the database, and the child killed once
    every job of the call was told to stop and the grace passed (a batch's call goes on while
    some of its jobs still count on it, as on a thread). One Ended for a dead child."""
    stopped_at: float | None = None
    while True:
        try:
            message = child.conn.recv() if child.conn.poll(TICK) else None
        except (EOFError, OSError):
            child.process.join(2.0)
            seconds = time.monotonic() - started
            if child.killed_because is not None:
                return Ended(error=died(killed_message(child.killed_because, seconds)), killed=True)
            return Ended(error=died(death_message(child.process.exitcode, seconds)))
        if message is None:
            if all(h.job.should_stop for h in held.values()):
                stopped_at = stopped_at or time.monotonic()
                first = next(iter(held.values()))
                grace = abandon_grace(first.timeout) if first.timeout else STOP_GRACE
                if time.monotonic() - stopped_at > grace:
                    reason = first.job.stop_reason.value if first.job.stop_reason else "stop"
                    child.kill_job(first.claimed.id, f"it ignored the stop request ({reason}) for {grace:g}s")
            continue
        kind = message[0]
        if kind == "progress":
            held[message[1]].job.progress(message[2], message[3])
        elif kind == "checkpoint":
            _checkpoint(child, held[message[1]].job.checkpoint, message[2])
        elif kind == "parents":
            _parents(child, held[message[1]].job.all_parents)
        elif kind == "done":
            child.rss = message[2]
            if isinstance(message[1], list):  # a batch: one entry per job
                return [Ended(value=e[1]) if e[0] == "value" else Ended(error=remote_error(*e[1:])) for e in message[1]]
            return Ended(value=message[1])
        elif kind == "error":
            child.rss = message[6]
            exc = remote_error(*message[1:6])
            return Ended(error=exc) if len(held) == 1 else exc


def _parents(child: Child, read: Callable[[], dict[int, tuple[str, Any]]]) -> None:
    try:
        value = read()
    except Exception as exc:  # the handler sees the error (as text: it may not pickle), as in a thread
        child.send("parents", None, RuntimeError(f"parent results not read: {first_line(exc)}"))
        return
    child.send("parents", value, None)


def _checkpoint(child: Child, save: Callable[[Any], bool], state: Any) -> None:
    try:
        ok = save(state)
    except Exception as exc:  # the handler sees the error (as text: it may not pickle), as in a thread
        child.send("saved", False, RuntimeError(f"checkpoint not saved: {first_line(exc)}"))
        return
    child.send("saved", ok, None)
