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
from pgwork.operator import kubenames
from pgwork.operator.cron import check_cron
from pgwork.operator.fields import Reader, SpecError, shown
from pgwork.operator.schedules import parse_schedules
from pgwork.operator.workerspec import WorkerSpec, parse_worker
from pgwork.schedule import Schedule

GROUP = "pgwork.dev"
VERSION = "v1alpha1"
PLURAL = "jobqueues"
KIND = "JobQueue"
API_VERSION = f"{GROUP}/{VERSION}"

# Owned object names add at most "-metrics" (8) to the JobQueue's name; CronJob names must stay
# within 52 characters (the controller appends an 11-character suffix to Job names): 52 - len("-reaper").
MAX_NAME_LENGTH = kubenames.CRONJOB_NAME_MAX - len("-reaper")

# The values the CRD fills in when a field is left out; tests check crd.yaml says the same.
DEFAULTS: dict[str, Any] = {
    "database": {"secretKey": "dsn", "migrate": True, "pooler": "none"},
    "worker": {
        "imagePullPolicy": "IfNotPresent",
        "command": ["pgwork"],
        "concurrency": 1,
        "terminationGracePeriodSeconds": 60,
        "metricsPort": 9100,
        "automountServiceAccountToken": False,
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

# Job types and the handler module reach the worker as command-line arguments. A job type starts
# with a letter, digit or `_` (never `-`, which argparse would read as a flag) and holds no comma
# (the list separator), space, `$` or parentheses (the kubelet expands `$(VAR)` in arguments).
JOB_TYPE_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.:/@+=-]*"
JOB_TYPE_MAX = 200
# The age `pgwork prune --older-than` takes, always with a unit (a bare number is not an age).
OLDER_THAN_PATTERN = r"([0-9]+(\.[0-9]+)?(ms|s|m|h|d))+"


@dataclass(frozen=True)
class SecretRef:
    """A key of a Secret in the JobQueue's own namespace; `field` is where the spec names it."""

    name: str
    key: str
    field: str


@dataclass(frozen=True)
class DatabaseSpec:
    secret_name: str
    secret_key: str
    migrate: bool
    # One Secret per role when given (schema owner, workers, reaper and prune); each falls back to
    # secretName/secretKey, which the operator itself also reads the backlog with.
    migrations: SecretRef
    workers: SecretRef
    maintenance: SecretRef
    # "transaction" behind a transaction-mode pooler (PGWORK_POOLER in every pod), else None; and
    # the workers' direct connection string for LISTEN only (PGWORK_LISTEN_DSN), if any.
    pooler: str | None = None
    listen: SecretRef | None = None
    # The DSN the operator fires spec.schedules with (a producer role), if given; else the default
    # Secret's, usually a reader role that may not enqueue (issue 27). Never rendered into a pod.
    schedules: SecretRef | None = None

    @property
    def default(self) -> SecretRef:
        return SecretRef(self.secret_name, self.secret_key, "spec.database.secretName")


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
    # Set: the reaper archives finished jobs this old each round (`reap --archive-after`) and the
    # retention CronJob drops whole days of history (`drop-history --older-than`) instead of pruning.
    archive_after: str | None = None


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
    schedules: tuple[Schedule, ...] = ()


def _secret_ref(db: Reader, name: str, default: SecretRef) -> SecretRef:
    """spec.database.<name>: {name, key}, or the default Secret when left out."""
    raw = db.raw.get(name)
    if raw is None:
        return default
    ref = Reader(raw, db.field(name), {"key": "dsn"})
    secret = ref.string("name", required=True, fix=_NAME_FIX)
    ref.checked("name", kubenames.is_dns1123_subdomain(secret), secret, _NAME_FIX)
    key = ref.string("key")
    ref.checked("key", kubenames.is_secret_key(key), key, _KEY_FIX)
    unknown = sorted(set(ref.raw) - {"name", "key"})
    if unknown:
        raise SpecError(ref.field(unknown[0]), "is not a field here", "give only name and key")
    assert secret is not None and key is not None
    return SecretRef(secret, key, ref.field("name"))


def _pooler(db: Reader) -> str | None:
    value = db.raw.get("pooler", "none")
    if value not in POOLER_MODES:
        raise SpecError(
            "spec.database.pooler",
            f"{shown(value)} is not a pooler mode",
            "transaction behind PgBouncer's pool_mode = transaction (or any transaction-mode pooler), else none",
        )
    return "transaction" if value == "transaction" else None


POOLER_MODES = ("none", "transaction")
_NAME_FIX = (
    "name a Secret in the JobQueue's own namespace: at most 253 lower-case letters, digits, '-' and '.' "
    "(a DNS-1123 subdomain, no '/')"
)
_KEY_FIX = "name a key of the Secret: at most 253 letters, digits, '-', '_' and '.', e.g. dsn"
ROLE_SECRETS = ("migrationsSecret", "workersSecret", "maintenanceSecret")
# Secrets with no fallback: used only when given.
OPTIONAL_SECRETS = ("listenSecret", "schedulesSecret")


def _optional_secret(db: Reader, name: str, default: SecretRef) -> SecretRef | None:
    return _secret_ref(db, name, default) if db.raw.get(name) is not None else None


def parse_spec(spec: Mapping[str, Any] | None) -> JobQueueSpec:
    """The typed spec with defaults applied. Raises SpecError naming the first bad field."""
    root = Reader(spec, "spec", {})

    db = Reader(root.raw.get("database"), "spec.database", DEFAULTS["database"])
    if root.raw.get("database") is None:
        raise SpecError("spec.database", "is required", "name the Secret holding the DSN: database.secretName")
    if "dsn" in db.raw or "url" in db.raw:
        raise SpecError(
            "spec.database", "must not hold a connection string", "put it in a Secret and set database.secretName"
        )
    secret_name = db.string("secretName", required=True, fix="name the Secret that holds the DSN")
    db.checked("secretName", kubenames.is_dns1123_subdomain(secret_name), secret_name, _NAME_FIX)
    secret_key = db.string("secretKey")
    db.checked("secretKey", kubenames.is_secret_key(secret_key), secret_key, _KEY_FIX)
    assert secret_name is not None and secret_key is not None
    unknown = sorted(set(db.raw) - {"secretName", "secretKey", "migrate", "pooler", *OPTIONAL_SECRETS, *ROLE_SECRETS})
    if unknown:
        raise SpecError(f"spec.database.{unknown[0]}", "is not a field of spec.database", "see the JobQueue reference")
    default = SecretRef(secret_name, secret_key, "spec.database.secretName")
    database = DatabaseSpec(
        secret_name,
        secret_key,
        db.boolean("migrate"),
        migrations=_secret_ref(db, "migrationsSecret", default),
        workers=_secret_ref(db, "workersSecret", default),
        maintenance=_secret_ref(db, "maintenanceSecret", default),
        pooler=_pooler(db),
        listen=_optional_secret(db, "listenSecret", default),
        schedules=_optional_secret(db, "schedulesSecret", default),
    )
    if database.listen is not None and database.pooler is None:
        raise SpecError(
            "spec.database.listenSecret",
            "is used only behind a transaction-mode pooler",
            "set database.pooler: transaction, or leave listenSecret out (workers LISTEN on their own DSN)",
        )

    job_types = root.raw.get("jobTypes")
    if not isinstance(job_types, list) or not job_types:
        raise SpecError("spec.jobTypes", "must list at least one job type", 'e.g. jobTypes: ["ocr"]')
    seen: set[str] = set()
    for i, job_type in enumerate(job_types):
        if (
            not isinstance(job_type, str)
            or len(job_type) > JOB_TYPE_MAX
            or not re.fullmatch(JOB_TYPE_PATTERN, job_type)
        ):
            raise SpecError(
                f"spec.jobTypes[{i}]",
                f"{shown(job_type)} is not a job type",
                f"1-{JOB_TYPE_MAX} characters: letters, digits and _ . : / @ + = -, starting with a letter, "
                "digit or _ (no commas, spaces, $ or parentheses; a leading - would read as a flag)",
            )
        if job_type in seen:
            raise SpecError(f"spec.jobTypes[{i}]", f"{job_type!r} is listed twice", "list each job type once")
        seen.add(job_type)

    worker = parse_worker(Reader(root.raw.get("worker"), "spec.worker", DEFAULTS["worker"]))
    scaling = _parse_scaling(Reader(root.raw.get("scaling"), "spec.scaling", DEFAULTS["scaling"]))

    ls = Reader(root.raw.get("lease"), "spec.lease", DEFAULTS["lease"])
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

    rp = Reader(root.raw.get("reaper"), "spec.reaper", DEFAULTS["reaper"])
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

    rt = Reader(root.raw.get("retention"), "spec.retention", DEFAULTS["retention"])
    older_than = _age(rt, "olderThan", "would delete finished jobs as soon as they finish")
    assert older_than is not None
    archive_after = _age(rt, "archiveAfter", "would archive jobs the moment they finish")
    retention_schedule = rt.string("schedule")
    assert retention_schedule is not None
    retention = RetentionSpec(
        rt.boolean("enabled"), older_than, check_cron(retention_schedule, "spec.retention.schedule"), archive_after
    )

    replicas = root.raw.get("replicas")
    if replicas is not None:
        replicas = root.integer("replicas", 0, 10_000, "a whole number of workers")

    schedules = parse_schedules(root.raw.get("schedules"), tuple(job_types))
    return JobQueueSpec(database, tuple(job_types), worker, scaling, lease, reaper, retention, replicas, schedules)


def _parse_scaling(s: Reader) -> ScalingSpec:
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
    """A JobQueue name every owned object's name can be made from: the metrics Service
    (`NAME-metrics`) is an RFC 1035 label, so it starts with a letter; the CronJobs
    (`NAME-reaper`, `NAME-prune`) stay within 52 characters; labels carry the name as it is."""
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH or not kubenames.DNS1035_LABEL.fullmatch(name):
        raise SpecError(
            "metadata.name",
            f"{shown(name)} is not usable",
            f"at most {MAX_NAME_LENGTH} lower-case letters, digits and '-', starting with a letter "
            "(the metrics Service NAME-metrics must start with a letter; the CronJob NAME-reaper "
            "must stay within 52 characters)",
        )
    return name


def _age(rt: Reader, name: str, at_zero: str) -> str | None:
    """A retention age with a unit, over zero (None when not set and without a default)."""
    value = rt.string(name)
    if value is None:
        return None
    field = rt.field(name)
    try:
        if not re.fullmatch(OLDER_THAN_PATTERN, value):
            raise ValueError(value)
        age = parse_duration(value, field)
    except ValueError:
        raise SpecError(
            field,
            f"{shown(value)} is not a duration with a unit",
            "e.g. 7d, 36h, 90m; a bare number is refused (seconds or days?)",
        ) from None
    if age <= 0:
        # Every run would delete (or move) each job the moment it finishes, its last_error with it,
        # and a prune chasing jobs finishing as it runs may never reach the end.
        raise SpecError(
            field,
            f"{shown(value)} {at_zero}",
            "give an age such as 7d; to keep history forever set retention.enabled: false",
        )
    return value
