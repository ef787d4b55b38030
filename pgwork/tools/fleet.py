"""Real `pgwork worker` processes for the tools: one way to start, kill and stop them.

The lab's crash timeline and wake-up figures, the chaos run and the demo all run the worker a
Deployment would run, each process logging to its own file. The connection string goes in the
environment (`DATABASE_URL`), never on the command line: argv is visible to every local user
through `ps` and /proc, and a DSN may carry a password.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import pgwork

# Where this checkout's `pgwork` package lives, so workers import the same code as the tool.
PACKAGE_ROOT = str(Path(pgwork.__file__).resolve().parents[1])
STOP_SECONDS = 15.0


def worker_command(app: str, name: str, options: Sequence[str] = ()) -> list[str]:
    """`pgwork worker --app APP --id NAME OPTIONS`, with no metrics endpoint unless OPTIONS ask for one."""
    command = [sys.executable, "-m", "pgwork.cli", "worker", "--app", app, "--id", name]
    if "--metrics-port" not in options:
        command += ["--metrics-port", "0"]
    return command + list(options)


def worker_env(
    dsn: str, *, isolated: bool = False, pythonpath: Sequence[str] = (), base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The worker's environment: `base` (default ours) with DATABASE_URL = `dsn`.

    `isolated` drops the libpq PG* variables, so nothing but `dsn` decides where the worker connects
    (the chaos run's private server must never be confused with the machine's).
    """
    env = dict(os.environ if base is None else base)
    if isolated:
        env = {k: v for k, v in env.items() if not k.startswith("PG")}
    env["DATABASE_URL"] = dsn
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, *pythonpath, env.get("PYTHONPATH", "")) if p)
    return env


@dataclass(frozen=True)
class WorkerProcess:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


class WorkerFleet:
    """Named `pgwork worker --app APP` processes; each logs to `log_dir/NAME.log`.

    Used as a context manager it stops every live worker on the way out (SIGTERM, then SIGKILL
    for any still running after `STOP_SECONDS`).
    """

    def __init__(
        self,
        dsn: str,
        app: str,
        log_dir: Path,
        options: Sequence[str] = (),
        *,
        isolated: bool = False,
        pythonpath: Sequence[str] = (),
    ) -> None:
        self.app = app
        self.log_dir = log_dir
        self.options = tuple(options)
        self.env = worker_env(dsn, isolated=isolated, pythonpath=pythonpath)
        self._workers: dict[str, WorkerProcess] = {}

    def command(self, name: str, *extra: str) -> list[str]:
        return worker_command(self.app, name, (*self.options, *extra))

    def start(self, name: str, *extra: str) -> WorkerProcess:
        """Start a worker owning jobs as `name`; `extra` options go after the fleet's own."""
        if name in self._workers and self._workers[name].alive():
            raise ValueError(f"worker {name!r} is already running")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        # The child keeps its own descriptor; ours can close at once.
        with log_path.open("wb") as log:
            process = subprocess.Popen(self.command(name, *extra), stdout=log, stderr=subprocess.STDOUT, env=self.env)
        worker = WorkerProcess(name, process, log_path)
        self._workers[name] = worker
        return worker

    def __getitem__(self, name: str) -> WorkerProcess:
        return self._workers[name]

    def __contains__(self, name: object) -> bool:
        return name in self._workers

    def __iter__(self) -> Iterator[WorkerProcess]:
        return iter(list(self._workers.values()))

    def __len__(self) -> int:
        return len(self._workers)

    def kill(self, name: str, timeout: float = 30.0) -> int:
        """SIGKILL, as the OOM killer or an eviction would: no drain, leases left to lapse."""
        process = self._workers[name].process
        process.kill()
        return process.wait(timeout=timeout)

    def stop_all(self, timeout: float = STOP_SECONDS) -> dict[str, int]:
        """SIGTERM every live worker (they drain), SIGKILL those still running after `timeout` in all.

        Returns the exit codes of the workers that were live.
        """
        live = [w for w in self._workers.values() if w.alive()]
        for w in live:
            # A paused (SIGSTOPped) worker must run again to act on SIGTERM.
            w.process.send_signal(signal.SIGCONT)
            w.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        codes: dict[str, int] = {}
        for w in live:
            try:
                codes[w.name] = w.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.process.kill()
                codes[w.name] = w.process.wait(timeout=10)
        return codes

    def __enter__(self) -> WorkerFleet:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop_all()
