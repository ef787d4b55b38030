"""Worker processes for tests: real `pgwork worker` subprocesses against the test database, and an
in-process burst worker over the test app (tests/support/apps/pgwork_test_app.py)."""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgwork.db import Queue
from pgwork.worker.options import WorkerOptions
from pgwork.worker.registry import REGISTRY
from pgwork.worker.runtime import Worker
from tests.support.cli import APPS, ROOT


def worker_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(APPS)])
    for key in [k for k in env if k.startswith("OTEL_")]:
        del env[key]
    env.update(extra)
    return env


class Kind:
    """Which kind of handler a test runs: `t("sleep")` is "sleep" for plain handlers and
    "async-sleep" for their `async def` twins in pgwork_test_app."""

    def __init__(self, name: str) -> None:
        self.name = name

    def t(self, job_type: str) -> str:
        return job_type if self.name == "sync" else f"async-{job_type}"

    def __repr__(self) -> str:
        return self.name


class WorkerProcess:
    def __init__(self, proc: subprocess.Popen[str], worker_id: str, log_path: Path) -> None:
        self.proc = proc
        self.id = worker_id
        self.log_path = log_path

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None


Spawn = Callable[..., WorkerProcess]


def worker_command(dsn: str, worker_id: str, *args: str) -> list[str]:
    """`pgwork worker` on the test app; the metrics endpoint is off unless `args` names a port."""
    cmd = [sys.executable, "-m", "pgwork.cli", "--dsn", dsn, "worker", "--app", "pgwork_test_app", "--id", worker_id]
    if "--metrics-port" not in args:
        cmd += ["--metrics-port", "0"]
    return cmd + list(args)


def start_worker(
    dsn: str,
    log_dir: Path,
    started: list[WorkerProcess],
    *args: str,
    worker_id: str | None = None,
    env: dict[str, str] | None = None,
) -> WorkerProcess:
    wid = worker_id or f"w{len(started) + 1}"
    log_path = log_dir / f"{wid}.log"
    cmd = worker_command(dsn, wid, *args)
    with log_path.open("w") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, text=True, env=env or worker_env(), cwd=str(ROOT)
        )
    wp = WorkerProcess(proc, wid, log_path)
    started.append(wp)
    return wp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_burst(queue: Queue, timeout: float = 30, **kw: Any) -> Worker:
    """An in-process worker in burst mode over pgwork_test_app: runs what is ready, then returns."""
    importlib.import_module("pgwork_test_app")  # registers its handlers in REGISTRY
    # Only its types: an app another test loaded in this process registered in REGISTRY too, and
    # a batch handler there would change how this worker claims (pgwork.worker.plan).
    kw.setdefault("job_types", _test_app_types())
    options = WorkerOptions(
        app="pgwork_test_app", worker_id=kw.pop("worker_id", "inproc"), burst=True, metrics_port=0, **kw
    )
    worker = Worker(queue, options, REGISTRY)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "burst worker did not exit"
    return worker


def _test_app_types() -> tuple[str, ...]:
    types: list[str] = []
    for t in REGISTRY.job_types():
        spec = REGISTRY.spec(t)
        if spec is not None and getattr(spec.func, "__module__", None) == "pgwork_test_app":
            types.append(t)
    return tuple(types)


class InProcess:
    """A Worker over `registry` on a thread of the test, on a Queue of its own (a quick lease and
    heartbeat, no metrics port): `stop()` drains it and closes that Queue."""

    def __init__(self, dsn: str, registry: Any, app: str, **options: Any) -> None:
        defaults: dict[str, Any] = {"worker_id": f"w-{app}", "metrics_port": 0, "heartbeat": 0.2, "lease": 3}
        self.worker = Worker(Queue(dsn), WorkerOptions(app=app, **{**defaults, **options}), registry)
        self.thread = threading.Thread(target=self.worker.run, daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 20) -> None:
        self.worker.request_stop()
        self.join(timeout)

    def join(self, timeout: float) -> None:
        """Wait for the worker to end on its own (a burst, a give-up), then close its Queue."""
        self.thread.join(timeout)
        self.worker.queue.close()
        assert not self.thread.is_alive(), "the in-process worker did not end"


def run_in_thread(worker: Any) -> threading.Thread:
    """An in-process pgwork.worker.runtime.Worker running on a daemon thread."""
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    return thread


def stop_in_thread(worker: Any, thread: threading.Thread, timeout: float = 20) -> None:
    """Drain it, wait for its thread, close its Queue."""
    worker.request_stop()
    thread.join(timeout)
    worker.queue.close()
    assert not thread.is_alive()
