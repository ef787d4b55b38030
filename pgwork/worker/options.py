"""`pgwork worker` options: strings in, a checked WorkerOptions out. Pure, no I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pgwork.durations import MAX_LEASE_SECONDS, MAX_SECONDS, parse_duration
from pgwork.jsonshape import text_problem
from pgwork.worker.childpolicy import ISOLATIONS, parse_size

# MODULE, or MODULE:NAME for a pgwork.App object in it.
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_]*)?$")
MAX_CONCURRENCY = 1000
MAX_BATCH = 10_000
# --max-abandoned's default, and the worker's exit code once abandoned threads passed it (2 is a
# usage or connection error, 130 an interrupt); pgwork.worker.timeouts acts on them.
DEFAULT_MAX_ABANDONED = 3
EXIT_ABANDONED = 3
# A worker that met a transaction-mode pooler without PGWORK_POOLER=transaction releases what it
# holds and exits with this code (its last log line names the setting).
EXIT_POOLER = 4
# The longest --grace: a day, as the CRD's terminationGracePeriodSeconds (the kubelet's kill follows it).
MAX_GRACE_SECONDS = 86400.0


def is_app_name(text: str) -> bool:
    """MODULE or MODULE:APP, as --app takes it (an App's `name` must be one too: it is its label)."""
    return bool(text) and _MODULE.fullmatch(text) is not None


class OptionError(ValueError):
    """One bad option, named, with the fix."""

    def __init__(self, option: str, problem: str, fix: str) -> None:
        self.option = option
        super().__init__(f"{option}: {problem} ({fix})")


@dataclass(frozen=True)
class WorkerOptions:
    app: str
    worker_id: str
    job_types: tuple[str, ...] | None = None
    concurrency: int = 1
    batch: int = 1
    lease: float = 30.0
    heartbeat: float = 10.0
    burst: bool = False
    metrics_port: int = 9100  # 0: no metrics server
    grace: float = 30.0
    listen: bool = True
    poll: float = 1.0
    connect_patience: float = 60.0  # a starting worker's retries before it exits 2
    # Handler threads stuck past their timeout that a worker tolerates; one more and it drains
    # and exits EXIT_ABANDONED (pgwork.worker.timeouts).
    max_abandoned: int = DEFAULT_MAX_ABANDONED
    # Overrides every batch handler's own batch_wait (seconds); None: each handler's own.
    batch_wait: float | None = None
    # Where handlers run unless their own registration says (pgwork.worker.children): "thread"
    # (the worker's runner threads, or its event loop) or "process" (spawned children), and
    # when a child is replaced between jobs (0: never).
    isolation: str = "thread"
    max_jobs_per_child: int = 0
    max_memory_per_child: int = 0

    @property
    def capacity(self) -> int:
        """Jobs held at once: running plus claimed-and-waiting (a batch may exceed concurrency)."""
        return max(self.concurrency, self.batch)


def _duration(text: str, option: str, maximum: float = MAX_SECONDS) -> float:
    try:
        return parse_duration(text, option, maximum)
    except ValueError as exc:
        # parse_duration's message names the field and carries its own fix: one hint, not two.
        problem, _, fix = str(exc).split(": ", 1)[-1].removesuffix(")").partition(" (")
        raise OptionError(option, problem, fix or "write seconds like 30 or a duration like 30s, 5m") from None


def _int(text: str, option: str, low: int, high: int) -> int:
    stripped = text.strip()
    # [0-9], not \d: \d also matches '٣', which int() reads as 3.
    # At most 18 digits, so int() never meets Python's digit limit (a ValueError of its own).
    if not re.fullmatch(r"[0-9]{1,18}", stripped):
        raise OptionError(option, f"{text!r} is not a whole number", f"use {low}..{high}")
    value = int(stripped)
    if not low <= value <= high:
        raise OptionError(option, f"{value} is out of range", f"use {low}..{high}")
    return value


def _text(value: str, option: str) -> None:
    problem = text_problem(value)
    if problem is not None:
        raise OptionError(option, problem, "remove or replace that character")


def parse_options(
    *,
    app: str,
    worker_id: str | None,
    environ: Mapping[str, str],
    job_types: str | None = None,
    concurrency: str = "1",
    batch: str = "1",
    lease: str = "30s",
    heartbeat: str | None = None,
    burst: bool = False,
    metrics_port: str = "9100",
    grace: str = "30s",
    listen: bool = True,
    poll: str = "1s",
    connect_patience: str = "60s",
    max_abandoned: str = str(DEFAULT_MAX_ABANDONED),
    batch_wait: str | None = None,
    isolation: str = "thread",
    max_jobs_per_child: str = "0",
    max_memory_per_child: str = "0",
) -> WorkerOptions:
    """Check every option; the first bad one raises OptionError naming it and the fix."""
    if not is_app_name(app):
        raise OptionError(
            "--app",
            f"{app!r} is not an importable module name or MODULE:APP",
            "e.g. --app myproject.jobs, or --app myproject.jobs:app for a pgwork.App",
        )
    owner = worker_id if worker_id else environ.get("HOSTNAME", "")
    if not owner:
        raise OptionError("--id", "is empty and HOSTNAME is not set", "pass --id NAME; in Kubernetes, the pod name")
    if len(owner) > 200:
        raise OptionError("--id", f"is {len(owner)} characters long", "use at most 200 characters")
    _text(owner, "--id")
    types: tuple[str, ...] | None = None
    if job_types is not None:
        parts = tuple(t.strip() for t in job_types.split(","))
        if not parts or any(not t for t in parts):
            raise OptionError("--job-types", f"{job_types!r} has an empty name", "list types as a,b,c")
        if any(len(t) > 200 for t in parts):
            raise OptionError("--job-types", "a type is longer than 200 characters", "use shorter type names")
        for part in parts:
            _text(part, "--job-types")
        types = tuple(dict.fromkeys(parts))
    n_concurrency = _int(concurrency, "--concurrency", 1, MAX_CONCURRENCY)
    n_batch = _int(batch, "--batch", 1, MAX_BATCH)
    lease_s = _duration(lease, "--lease", MAX_LEASE_SECONDS)
    if lease_s < 1:
        raise OptionError("--lease", f"{lease!r} is under one second", "use at least 1s; 30s suits most jobs")
    heartbeat_s = lease_s / 3 if heartbeat is None else _duration(heartbeat, "--heartbeat")
    if heartbeat_s <= 0:
        raise OptionError("--heartbeat", f"{heartbeat!r} must be above zero", "e.g. 10s")
    if heartbeat_s > lease_s / 3 + 1e-9:
        raise OptionError(
            "--heartbeat",
            f"{heartbeat_s:g}s is more than a third of the {lease_s:g}s lease, so one late renewal would lose the job",
            f"use at most {lease_s / 3:g}s, or lengthen --lease",
        )
    port = _int(metrics_port, "--metrics-port", 0, 65535)
    grace_s = _duration(grace, "--grace", MAX_GRACE_SECONDS)
    poll_s = _duration(poll, "--poll")
    if not 0.01 <= poll_s <= 300:
        raise OptionError("--poll", f"{poll!r} is out of range", "use 10ms..5m; 1s is the default")
    patience_s = _duration(connect_patience, "--connect-patience")
    if patience_s > 3600:
        raise OptionError(
            "--connect-patience", f"{connect_patience!r} is over an hour", "use at most 1h; 60s is the default"
        )
    n_abandoned = _int(max_abandoned, "--max-abandoned", 0, MAX_CONCURRENCY)
    wait_s = None if batch_wait is None else _duration(batch_wait, "--batch-wait")
    if wait_s is not None and wait_s > 300:
        raise OptionError("--batch-wait", f"{batch_wait!r} is over 5 minutes", "use 0..5m, e.g. 20ms")
    if isolation not in ISOLATIONS:
        raise OptionError("--isolation", f"{isolation!r} is not a choice", f"use one of {', '.join(ISOLATIONS)}")
    n_child_jobs = _int(max_jobs_per_child, "--max-jobs-per-child", 0, 1_000_000_000)
    try:
        child_memory = parse_size(max_memory_per_child)
    except ValueError as exc:
        raise OptionError("--max-memory-per-child", str(exc).split(" (")[0], "write 2Gi, 512Mi, or bytes") from None
    return WorkerOptions(
        app=app,
        worker_id=owner,
        job_types=types,
        concurrency=n_concurrency,
        batch=n_batch,
        lease=lease_s,
        heartbeat=heartbeat_s,
        burst=burst,
        metrics_port=port,
        grace=grace_s,
        listen=listen,
        poll=poll_s,
        connect_patience=patience_s,
        max_abandoned=n_abandoned,
        batch_wait=wait_s,
        isolation=isolation,
        max_jobs_per_child=n_child_jobs,
        max_memory_per_child=child_memory,
    )
