"""The JobQueue spec: parsed into typed values, with defaults and every rule the CRD states.

The CRD (crd.yaml) rejects bad specs at the API server; this module repeats those rules (kmock
and old clusters do not evaluate CEL) and adds what a schema cannot express, such as cron field
ranges. Every error names the field (`spec.scaling.minReplicas`) and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pgwork.durations import parse_duration
from pgwork.errors import InvalidArgument

GROUP = "pgwork.dev"
VERSION = "v1alpha1"
PLURAL = "jobqueues"
KIND = "JobQueue"
API_VERSION = f"{GROUP}/{VERSION}"

# Owned object names add at most "-metrics" (8) to the JobQueue's name; CronJob names must stay
# within 52 characters (the controller appends an 11-character suffix to Job names).
MAX_NAME_LENGTH = 45

# The values the CRD fills in when a field is left out; tests check crd.yaml says the same.
DEFAULTS: dict[str, Any] = {
    "database": {"secretKey": "dsn", "migrate": True},
    "worker": {
        "imagePullPolicy": "IfNotPresent",
        "command": ["pgwork"],
        "concurrency": 1,
        "terminationGracePeriodSeconds": 60,
        "metricsPort": 9100,
    },
    "scaling": {
        "minReplicas": 1,
        "maxReplicas": 10,
        "targetBacklogPerWorker": 5,
        "activationBacklog": 0,
        "scaleDownStabilizationSeconds": 300,
        "pollIntervalSeconds": 10,
    },
    "lease": {"durationSeconds": 30, "heartbeatSeconds": 10},
    "reaper": {"schedule": "* * * * *", "loopSeconds": 50, "everySeconds": 10, "suspend": False},
    "retention": {"enabled": True, "olderThan": "7d", "schedule": "17 3 * * *"},
}

JOB_TYPE_PATTERN = r"^[^,\s]+$"
CRON_MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
# (name, low, high, names that stand for numbers)
_CRON_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    ("day of week", 0, 7, {d: i for i, d in enumerate(_DAYS)}),
)
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RESERVED_ENV = frozenset({"DATABASE_URL", "POD_NAME"})


class SpecError(InvalidArgument):
    """A JobQueue spec the operator refuses; `field` is the path, e.g. spec.lease.heartbeatSeconds."""


@dataclass(frozen=True)
class DatabaseSpec:
    secret_name: str
    secret_key: str
    migrate: bool


@dataclass(frozen=True)
class WorkerSpec:
    image: str
    image_pull_policy: str
    app: str | None
    command: tuple[str, ...]
    args: tuple[str, ...] | None
    env: tuple[dict[str, Any], ...]
    resources: dict[str, Any]
    concurrency: int
    termination_grace_period_seconds: int
    metrics_port: int
    service_account_name: str | None


@dataclass(frozen=True)
class ScalingSpec:
    min_replicas: int
    max_replicas: int
    target_backlog_per_worker: int
    activation_backlog: int
    scale_down_stabilization_seconds: float
    poll_interval_seconds: float


@dataclass(frozen=True)
class LeaseSpec:
    duration_seconds: float
    heartbeat_seconds: float


@dataclass(frozen=True)
class ReaperSpec:
    schedule: str
    loop_seconds: float
    every_seconds: float
    suspend: bool


@dataclass(frozen=True)
class RetentionSpec:
    enabled: bool
    older_than: str
    schedule: str


@dataclass(frozen=True)
class JobQueueSpec:
    database: DatabaseSpec
    job_types: tuple[str, ...]
    worker: WorkerSpec
    scaling: ScalingSpec
    lease: LeaseSpec
    reaper: ReaperSpec
    retention: RetentionSpec
    # Set by `kubectl scale`, an HPA or KEDA through the scale subresource: then the operator
    # follows it (within the bounds) instead of its own backlog rule.
    replicas: int | None


class _Reader:
    """Reads one section of the spec, filling defaults and naming fields in errors."""

    def __init__(self, raw: Any, path: str, defaults: Mapping[str, Any]) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise SpecError(path, f"must be an object, got {type(raw).__name__}", "see the JobQueue reference")
        self.raw = raw
        self.path = path
        self.defaults = defaults

    def field(self, name: str) -> str:
        return f"{self.path}.{name}"

    def get(self, name: str) -> Any:
        value = self.raw.get(name)
        return self.defaults.get(name) if value is None else value

    def string(self, name: str, *, required: bool = False, fix: str = "") -> str | None:
        value = self.get(name)
        if value is None:
            if required:
                raise SpecError(self.field(name), "is required", fix or "set it")
            return None
        if not isinstance(value, str) or not value.strip():
            raise SpecError(self.field(name), f"must be a non-empty string, got {value!r}", fix or "set a value")
        return value

    def integer(self, name: str, low: int, high: int, fix: str) -> int:
        value = self.get(name)
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise SpecError(self.field(name), f"must be a whole number, got {value!r}", fix)
        if not low <= value <= high:
            raise SpecError(self.field(name), f"{value} is out of range {low}..{high}", fix)
        return value

    def number(self, name: str, low: float, high: float, fix: str) -> float:
        value = self.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(self.field(name), f"must be a number of seconds, got {value!r}", fix)
        if not low <= value <= high:
            raise SpecError(self.field(name), f"{value} is out of range {low}..{high}", fix)
        return float(value)

    def boolean(self, name: str) -> bool:
        value = self.get(name)
        if not isinstance(value, bool):
            raise SpecError(self.field(name), f"must be true or false, got {value!r}", "write true or false")
        return value

    def strings(self, name: str) -> tuple[str, ...] | None:
        value = self.get(name)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SpecError(self.field(name), f"must be a list of strings, got {value!r}", 'e.g. ["pgwork"]')
        return tuple(value)


def check_cron(schedule: str, field: str) -> str:
    """A CronJob schedule: five fields (minute hour day-of-month month day-of-week) or a macro."""
    text = schedule.strip()
    fix = "write five fields such as '*/5 * * * *', or @hourly/@daily"
    if text.startswith("@"):
        if text not in CRON_MACROS:
            raise SpecError(field, f"{schedule!r}: unknown macro", f"use one of {sorted(CRON_MACROS)}")
        return text
    parts = text.split()
    if len(parts) != 5:
        raise SpecError(field, f"{schedule!r} has {len(parts)} fields, a schedule has 5", fix)
    for part, (name, low, high, names) in zip(parts, _CRON_FIELDS, strict=True):
        for item in part.split(","):
            _check_cron_item(item, name, low=low, high=high, names=names, field=field, schedule=schedule)
    return text


def _check_cron_item(
    item: str, name: str, *, low: int, high: int, names: Mapping[str, int], field: str, schedule: str
) -> None:
    def bad(problem: str) -> SpecError:
        return SpecError(field, f"{schedule!r}: {name} {problem}", f"use values {low}-{high}, *, a-b, */n or lists")

    def number(text: str) -> int:
        upper = text.upper()
        if upper in names:
            return names[upper]
        if not text.isdigit():
            raise bad(f"{text!r} is not a number")
        value = int(text)
        if not low <= value <= high:
            raise bad(f"{value} is outside {low}-{high}")
        return value

    base, _, step = item.partition("/")
    if step and (not step.isdigit() or int(step) == 0):
        raise bad(f"step {step!r} must be a whole number above 0")
    if base in ("*", "?"):
        if base == "?" and name not in ("day of month", "day of week"):
            raise bad("'?' is allowed only for day of month and day of week")
        return
    start, dash, end = base.partition("-")
    first = number(start)
    if dash and number(end) < first:
        raise bad(f"range {base!r} runs backwards")


def parse_spec(spec: Mapping[str, Any] | None) -> JobQueueSpec:
    """The typed spec with defaults applied. Raises SpecError naming the first bad field."""
    root = _Reader(spec, "spec", {})

    db = _Reader(root.raw.get("database"), "spec.database", DEFAULTS["database"])
    if root.raw.get("database") is None:
        raise SpecError("spec.database", "is required", "name the Secret holding the DSN: database.secretName")
    if "dsn" in db.raw or "url" in db.raw:
        raise SpecError(
            "spec.database", "must not hold a connection string", "put it in a Secret and set database.secretName"
        )
    secret_name = db.string("secretName", required=True, fix="name the Secret that holds the DSN")
    assert secret_name is not None
    secret_key = db.string("secretKey")
    assert secret_key is not None
    database = DatabaseSpec(secret_name, secret_key, db.boolean("migrate"))

    job_types = root.raw.get("jobTypes")
    if not isinstance(job_types, list) or not job_types:
        raise SpecError("spec.jobTypes", "must list at least one job type", 'e.g. jobTypes: ["ocr"]')
    seen: set[str] = set()
    for i, job_type in enumerate(job_types):
        if not isinstance(job_type, str) or not re.match(JOB_TYPE_PATTERN, job_type) or len(job_type) > 200:
            raise SpecError(
                f"spec.jobTypes[{i}]", f"{job_type!r} is not a job type", "1-200 characters, no commas or spaces"
            )
        if job_type in seen:
            raise SpecError(f"spec.jobTypes[{i}]", f"{job_type!r} is listed twice", "list each job type once")
        seen.add(job_type)

    worker = _parse_worker(_Reader(root.raw.get("worker"), "spec.worker", DEFAULTS["worker"]))
    scaling = _parse_scaling(_Reader(root.raw.get("scaling"), "spec.scaling", DEFAULTS["scaling"]))

    ls = _Reader(root.raw.get("lease"), "spec.lease", DEFAULTS["lease"])
    lease = LeaseSpec(
        ls.number("durationSeconds", 1, 86400, "e.g. 30"),
        ls.number("heartbeatSeconds", 0.1, 86400, "e.g. 10"),
    )
    if lease.heartbeat_seconds * 3 > lease.duration_seconds:
        raise SpecError(
            "spec.lease.heartbeatSeconds",
            f"{lease.heartbeat_seconds:g}s is more than a third of the lease ({lease.duration_seconds:g}s)",
            "renew at least three times per lease, e.g. heartbeatSeconds 10 with durationSeconds 30",
        )

    rp = _Reader(root.raw.get("reaper"), "spec.reaper", DEFAULTS["reaper"])
    schedule = rp.string("schedule")
    assert schedule is not None
    reaper = ReaperSpec(
        check_cron(schedule, "spec.reaper.schedule"),
        rp.number("loopSeconds", 0, 3600, "e.g. 50 to reap every 10s within a once-a-minute run"),
        rp.number("everySeconds", 1, 3600, "e.g. 10"),
        rp.boolean("suspend"),
    )
    if reaper.loop_seconds and reaper.every_seconds > reaper.loop_seconds:
        raise SpecError(
            "spec.reaper.everySeconds",
            f"{reaper.every_seconds:g}s is longer than loopSeconds ({reaper.loop_seconds:g}s)",
            "make everySeconds at most loopSeconds, or set loopSeconds 0 for one pass per run",
        )

    rt = _Reader(root.raw.get("retention"), "spec.retention", DEFAULTS["retention"])
    older_than = rt.string("olderThan")
    assert older_than is not None
    try:
        parse_duration(older_than, "spec.retention.olderThan")
    except ValueError as exc:
        raise SpecError("spec.retention.olderThan", f"{older_than!r} is not a duration", "e.g. 7d, 36h") from exc
    retention_schedule = rt.string("schedule")
    assert retention_schedule is not None
    retention = RetentionSpec(
        rt.boolean("enabled"), older_than, check_cron(retention_schedule, "spec.retention.schedule")
    )

    replicas = root.raw.get("replicas")
    if replicas is not None:
        replicas = root.integer("replicas", 0, 10_000, "a whole number of workers")

    return JobQueueSpec(database, tuple(job_types), worker, scaling, lease, reaper, retention, replicas)


def _parse_worker(w: _Reader) -> WorkerSpec:
    image = w.string("image", required=True, fix="name the worker image, e.g. registry.example/ocr:1.2")
    assert image is not None
    pull = w.string("imagePullPolicy")
    if pull not in ("Always", "IfNotPresent", "Never"):
        raise SpecError(w.field("imagePullPolicy"), f"{pull!r} is not a pull policy", "Always, IfNotPresent or Never")
    app = w.string("app")
    command = w.strings("command")
    assert command is not None
    if not command:
        raise SpecError(w.field("command"), "is empty", 'leave it out for ["pgwork"]')
    args = w.strings("args")
    if app is None and args is None:
        raise SpecError(
            w.field("app"),
            "is required unless worker.args is given",
            "name the module with your handlers, e.g. myapp.jobs",
        )
    env = w.get("env") or []
    if not isinstance(env, list):
        raise SpecError(w.field("env"), "must be a list of {name, value} entries", "see a Pod's env")
    for i, entry in enumerate(env):
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise SpecError(f"{w.field('env')}[{i}].name", f"{name!r} is not a variable name", "e.g. LOG_LEVEL")
        if name in _RESERVED_ENV:
            raise SpecError(
                f"{w.field('env')}[{i}].name",
                f"{name} is set by the operator",
                "the DSN comes from spec.database; remove this entry",
            )
    resources = w.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise SpecError(w.field("resources"), "must be an object", "e.g. {requests: {cpu: 500m}}")
    sa = w.string("serviceAccountName")
    if sa is not None and not _DNS_LABEL.match(sa):
        raise SpecError(w.field("serviceAccountName"), f"{sa!r} is not a valid name", "lower-case letters, digits, -")
    return WorkerSpec(
        image=image,
        image_pull_policy=pull,
        app=app,
        command=command,
        args=args,
        env=tuple(dict(e) for e in env),
        resources=dict(resources),
        concurrency=w.integer("concurrency", 1, 1000, "jobs one worker runs at once, e.g. 4"),
        termination_grace_period_seconds=w.integer(
            "terminationGracePeriodSeconds", 10, 86400, "long enough for a job to finish after SIGTERM"
        ),
        metrics_port=w.integer("metricsPort", 1024, 65535, "an unprivileged port, e.g. 9100"),
        service_account_name=sa,
    )


def _parse_scaling(s: _Reader) -> ScalingSpec:
    scaling = ScalingSpec(
        min_replicas=s.integer("minReplicas", 0, 10_000, "0 lets an idle queue scale to zero"),
        max_replicas=s.integer("maxReplicas", 1, 10_000, "the most workers to run"),
        target_backlog_per_worker=s.integer("targetBacklogPerWorker", 1, 1_000_000, "jobs per worker, e.g. 5"),
        activation_backlog=s.integer("activationBacklog", 0, 1_000_000, "0 wakes a queue at zero for any job"),
        scale_down_stabilization_seconds=s.number("scaleDownStabilizationSeconds", 0, 86400, "e.g. 300"),
        poll_interval_seconds=s.number("pollIntervalSeconds", 0.1, 3600, "e.g. 10"),
    )
    if scaling.min_replicas > scaling.max_replicas:
        raise SpecError(
            "spec.scaling.minReplicas",
            f"{scaling.min_replicas} is above maxReplicas ({scaling.max_replicas})",
            "make minReplicas at most maxReplicas",
        )
    return scaling


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not _DNS_LABEL.match(name) or len(name) > MAX_NAME_LENGTH:
        raise SpecError(
            "metadata.name",
            f"{name!r} is not usable",
            f"at most {MAX_NAME_LENGTH} lower-case letters, digits and '-' (owned objects append suffixes)",
        )
    return name
