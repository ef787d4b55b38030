"""The child side of process isolation: a spawned process that imports the app once, then runs
one job at a time on its main thread for as long as the worker keeps it.

Messages on the pipes (tuples, pickled): the worker sends ("run", fields) (a list of them for a
batch handler's call), ("saved", ok, error) and ("exit",) on the work pipe, ("stop", id, reason)
on the control pipe; the child
answers ("ready", pid) once the app is imported (or ("load_failed", text)), then per call any
number of ("progress", id, fraction, note) and ("checkpoint", id, state), and one ("done", value,
rss) (for a batch, value is a list of ("value", v) or ("error", *exception) entries) or ("error",
described, type, module, message, permanent, rss) when the call raised. The main thread reads
the work pipe itself; a reader thread takes the control pipe, so a stop request reaches
`job.should_stop` (and cancels an async handler's task) while the handler runs; when the pipes
close (the worker died) the child exits at once rather than run on unwatched.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib
import os
import resource
import signal
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from pgwork.worker.describe import describe_error, safe_str
from pgwork.worker.job import Job, PermanentError, StopReason, running
from pgwork.worker.registry import REGISTRY, Registry


class _Channel:
    """The child's ends of its two pipes. The work pipe is read by the main thread itself (a job,
    a checkpoint's answer: no hand-off from another thread on the way to the handler); the control
    pipe, by a reader thread that delivers stop requests while the handler runs and ends the
    child when the worker is gone."""

    def __init__(self, conn: Connection, control: Connection) -> None:
        self.conn = conn
        self.control = control
        self.lock = threading.Lock()  # one sender at a time (a handler's own threads may report)
        self.saving = threading.Lock()  # one checkpoint's question and answer at a time
        self.running: dict[int, Job] = {}  # the call's jobs by id (several for a batch handler)
        self.job_lock = threading.Lock()

    def send(self, *message: Any) -> None:
        with self.lock:
            self.conn.send(message)

    def read_control(self) -> None:
        try:
            while True:
                _, job_id, reason = self.control.recv()  # ("stop", id, reason)
                with self.job_lock:
                    job = self.running.get(job_id)
                if job is not None:  # a late one, for a job already done, is dropped
                    job.request_stop(StopReason(reason))
        except (EOFError, OSError):
            os._exit(70)  # the worker is gone: nobody would read this child's outcome


class _ChildJob(Job):
    """A Job whose progress and checkpoints travel to the worker, which writes them."""

    _channel: _Channel | None = None

    def progress(self, fraction: float, note: str | None = None) -> None:
        super().progress(fraction, note)  # checked here: a bad fraction raises in the handler
        reported = self.reported_progress
        if self._channel is not None and reported is not None:
            self._channel.send("progress", self.id, reported.fraction, reported.note)


def _saver(channel: _Channel, job_id: int) -> Any:
    def save(state: Any) -> bool:
        with channel.saving:
            channel.send("checkpoint", job_id, state)
            _, ok, error = channel.conn.recv()  # ("saved", ok, error): the worker answers at once
        if error is not None:
            raise error
        return bool(ok)

    return save


def _parents(channel: _Channel, job_id: int) -> Any:
    """job.parent_results() in a child: the worker reads them on its connection and answers."""

    def read() -> dict[int, tuple[str, Any]]:
        with channel.saving:  # one question and answer at a time, as for a checkpoint
            channel.send("parents", job_id)
            _, value, error = channel.conn.recv()  # ("parents", {id: (status, result)}, error)
        if error is not None:
            raise error
        return dict(value)

    return read


def rss_bytes() -> int:
    """The resident memory now (not the peak): what --max-memory-per-child compares."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


CHILD_ENV = "PGWORK_CHILD"  # set to "1" in every handler process before it imports the app

# glibc's mallopt parameters, and what a child sets them to (see keep_freed_memory).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
TRIM_THRESHOLD = 256 << 20
MMAP_THRESHOLD = 32 << 20  # glibc's largest


def keep_freed_memory() -> bool:
    """Keep what a job frees for the next one instead of handing it back to the system (in
    every child, and in a `pgwork worker` whose handlers run on its threads).

    The handler runs on the child's main thread, whose malloc arena glibc trims back to the
    system whenever more than twice the largest recent allocation lies free at its top, and
    numpy's arrays are such allocations: each job then faults its memory in again (about 3,800
    page faults and a fifth more CPU per job of 0.7 MB matrices, measured by the lab's cpu-bound
    experiment, against 90 on a thread's arena). Up to TRIM_THRESHOLD stays with the process;
    --max-memory-per-child bounds the rest. Not on another C library, nor when the environment
    already chose (MALLOC_TRIM_THRESHOLD_ / MALLOC_MMAP_THRESHOLD_)."""
    if any(k in os.environ for k in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    except (OSError, AttributeError):
        return False


def child_main(conn: Connection, control: Connection, app: str) -> None:
    """The spawned process's entry point (named by the worker; imports nothing of the parent's)."""
    keep_freed_memory()
    # The worker decides when a child ends: a Ctrl-C or SIGTERM sent to the whole process group
    # must not kill a job the worker is draining.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    channel = _Channel(conn, control)
    # The app may ask where it is imported: a model is worth loading here, not in the worker
    # process above, which imports the app only to learn its handlers (docs/worker.md).
    os.environ[CHILD_ENV] = "1"
    try:
        registry = load_registry(app)
    except BaseException as exc:  # SystemExit too: whatever the import did, the worker must hear it
        conn.send(("load_failed", f"{type(exc).__name__}: {safe_str(exc)}"))
        return
    threading.Thread(target=channel.read_control, name="pgwork-child-control", daemon=True).start()
    channel.send("ready", os.getpid())
    loop: asyncio.AbstractEventLoop | None = None
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break  # the worker is gone
        if message[0] == "exit":
            break
        batch = isinstance(message[1], list)  # a batch handler's call: a list of jobs, one list back
        jobs: list[Job] = [_child_job(channel, fields) for fields in (message[1] if batch else [message[1]])]
        with channel.job_lock:
            channel.running = {job.id: job for job in jobs}
        if registry.is_async(jobs[0].job_type) and loop is None:
            loop = asyncio.new_event_loop()  # kept: a client opened by one job may serve the next
        try:
            value = _call(registry, jobs if batch else jobs[0], loop)
            if batch:
                _send_batch(channel, value, len(jobs))
            else:
                channel.send("done", value, rss_bytes())
        except BaseException as exc:  # nothing a handler does may end the child but a crash
            _send_error(channel, exc)
        finally:
            with channel.job_lock:
                channel.running = {}
    sys.stdout.flush()


def _child_job(channel: _Channel, fields: dict[str, Any]) -> _ChildJob:
    job = _ChildJob(**fields)
    job._channel = channel
    job.saver = _saver(channel, job.id)
    job.parent_reader = _parents(channel, job.id)
    return job


def _send_batch(channel: _Channel, value: Any, count: int) -> None:
    """A batch handler's list, one entry per job: its value, or the exception that fails it alone
    (as text: the worker rebuilds it). Anything but a list of `count` fails the whole call."""
    if not isinstance(value, list | tuple) or len(value) != count:
        what = f"{len(value)} entries" if isinstance(value, list | tuple) else f"a {type(value).__name__}"
        raise RuntimeError(
            f"the batch handler returned {what} for {count} jobs: return a list with one result (or an "
            "exception, to fail that job alone) per job, in the order of the jobs it was given"
        )
    entries = [("error", *_error_fields(v)) if isinstance(v, BaseException) else ("value", v) for v in value]
    channel.send("done", entries, rss_bytes())


def load_registry(target: str) -> Registry:
    """The handlers of `--app` (MODULE, or MODULE:APP for a pgwork.App), imported here, in the
    child: what the worker's own loading found (pgwork.worker.command), read the same way. Its
    own few lines, so that the worker's runtime never imports the command line."""
    module, _, name = target.partition(":")
    before = REGISTRY.snapshot()
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    loaded = importlib.import_module(module)
    if not name:
        return REGISTRY.registered_by(module, before)
    registry = getattr(getattr(loaded, name, None), "registry", None)
    if not isinstance(registry, Registry):
        raise TypeError(f"{target} names no pgwork.App")
    return registry


def _call(registry: Registry, call: Job | list[Job], loop: asyncio.AbstractEventLoop | None) -> Any:
    jobs = call if isinstance(call, list) else [call]
    handler: Any = registry.get(jobs[0].job_type)  # a batch handler takes the list
    if handler is None:
        raise PermanentError(f"no handler for {jobs[0].job_type!r} in the handler process")
    # current_job() is the job, as on a thread; a batch handler has no one job (it has the list).
    with running(call) if isinstance(call, Job) else contextlib.nullcontext():
        if loop is None:
            return handler(call)
        task = loop.create_task(handler(call))

        def cancel() -> None:  # a batch's call once every job in it was told to stop, as on a thread
            if all(job.should_stop for job in jobs):
                loop.call_soon_threadsafe(task.cancel)

        for job in jobs:
            job.when_stopped(cancel)
        return loop.run_until_complete(task)


def _error_fields(exc: BaseException) -> tuple[str, str, str, str, bool]:
    cls = type(exc)
    return describe_error(exc), cls.__qualname__, cls.__module__, safe_str(exc), isinstance(exc, PermanentError)


def _send_error(channel: _Channel, exc: BaseException) -> None:
    """The call failed (every job of a batch): the exception as text, which pickles."""
    channel.send("error", *_error_fields(exc), rss_bytes())
