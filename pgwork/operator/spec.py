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
from pgwork.operator import kubenames, podtemplate

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

# Job types and the handler module reach the worker as command-line arguments. A job type starts
# with a letter, digit or `_` (never `-`, which argparse would read as a flag) and holds no comma
# (the list separator), space, `$` or parentheses (the kubelet expands `$(VAR)` in arguments).
JOB_TYPE_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.:/@+=-]*"
JOB_TYPE_MAX = 200
# What `pgwork worker --app` imports: a dotted module path (the worker's own rule).
APP_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
APP_MAX = 200
# The age `pgwork prune --older-than` takes, always with a unit (a bare number is not an age).
OLDER_THAN_PATTERN = r"([0-9]+(\.[0-9]+)?(ms|s|m|h|d))+"
# The shape of a schedule; its fields are then checked one by one (the CRD checks the same ranges
# with one long pattern, and tests/operator/test_operator_crd.py holds both to one table).
SCHEDULE_PATTERN = r"@(yearly|annually|monthly|weekly|daily|midnight|hourly)|[^\s]+([ \t]+[^\s]+){4}"
_IMAGE = re.compile(r"[^\s\x00-\x1f\x7f]+")
CRON_MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
# (name, low, high, names that stand for numbers): the bounds of the parser the CronJob controller
# uses (robfig/cron v3 ParseStandard), whose day of week is 0-6 (7 is refused).
_CRON_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    ("day of week", 0, 6, {d: i for i, d in enumerate(_DAYS)}),
)
_DIGITS = re.compile(r"[0-9]{1,2}")
SCHEDULE_MAX = 200
_RESERVED_ENV = frozenset({"DATABASE_URL", "POD_NAME"})


class SpecError(InvalidArgument):
    """A JobQueue spec the operator refuses; `field` is the path, e.g. spec.lease.heartbeatSeconds."""


def _shown(value: Any) -> str:
    """A bad value as quoted in a message: repr (so a newline shows as \\n), cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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

    @property
    def default(self) -> SecretRef:
        return SecretRef(self.secret_name, self.secret_key, "spec.database.secretName")


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
    # Checked by podtemplate.check; merged under the operator's pod by render.
    pod_template: dict[str, Any] | None = None


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
            raise SpecError(self.field(name), f"must be a non-empty string, got {_shown(value)}", fix or "set a value")
        return value

    def matching(self, name: str, rule: str, max_length: int, fix: str, *, required: bool = False) -> str | None:
        """A string that must match `rule` whole (fullmatch: no trailing newline slips through)."""
        value = self.string(name, required=required, fix=fix)
        if value is not None and (len(value) > max_length or not re.fullmatch(rule, value)):
            raise SpecError(self.field(name), f"{_shown(value)} is not allowed here", fix)
        return value

    def checked(self, name: str, valid: bool, value: str | None, fix: str) -> str | None:
        if value is not None and not valid:
            raise SpecError(self.field(name), f"{_shown(value)} is not allowed here", fix)
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
    """A CronJob schedule the API server and the CronJob controller both accept: five fields
    (minute hour day-of-month month day-of-week) within the controller's ranges, or a macro."""
    fix = "write five fields such as '*/5 * * * *', or @hourly/@daily"
    if schedule.startswith("@"):
        if schedule not in CRON_MACROS:
            raise SpecError(field, f"{_shown(schedule)}: unknown macro", f"use one of {sorted(CRON_MACROS)}")
        return schedule
    if len(schedule) > SCHEDULE_MAX:
        raise SpecError(field, f"is {len(schedule)} characters long", f"at most {SCHEDULE_MAX}; {fix}")
    if not re.fullmatch(SCHEDULE_PATTERN, schedule) or not schedule.isascii():
        count = len(schedule.split())
        problem = f"has {count} fields, a schedule has 5" if count != 5 else "is not five fields separated by spaces"
        raise SpecError(field, f"{_shown(schedule)} {problem}", fix)
    for part, (name, low, high, names) in zip(schedule.split(), _CRON_FIELDS, strict=True):
        for item in part.split(","):
            _check_cron_item(item, name, low=low, high=high, names=names, field=field, schedule=schedule)
    return schedule


def _check_cron_item(
    item: str, name: str, *, low: int, high: int, names: Mapping[str, int], field: str, schedule: str
) -> None:
    def bad(problem: str) -> SpecError:
        return SpecError(
            field, f"{_shown(schedule)}: {name} {problem}", f"use values {low}-{high}, *, a-b, */n or lists"
        )

    def number(text: str) -> int:
        upper = text.upper()
        if upper in names:
            return names[upper]
        # Not str.isdigit(): that accepts '²' and other digits int() and the controller refuse.
        if not _DIGITS.fullmatch(text):
            raise bad(f"{_shown(text)} is not a number")
        value = int(text)
        if not low <= value <= high:
            raise bad(f"{value} is outside {low}-{high}")
        return value

    base, _, step = item.partition("/")
    if step and (not _DIGITS.fullmatch(step) or not 1 <= int(step) <= high + 1):
        raise bad(f"step {_shown(step)} must be a whole number from 1 to {high + 1}")
    if base in ("*", "?"):
        if base == "?" and name not in ("day of month", "day of week"):
            raise bad("'?' is allowed only for day of month and day of week")
        return
    start, dash, end = base.partition("-")
    first = number(start)
    if dash and number(end) < first:
        raise bad(f"range {_shown(base)} runs backwards")


def _secret_ref(db: _Reader, name: str, default: SecretRef) -> SecretRef:
    """spec.database.<name>: {name, key}, or the default Secret when left out."""
    raw = db.raw.get(name)
    if raw is None:
        return default
    ref = _Reader(raw, db.field(name), {"key": "dsn"})
    secret = ref.string("name", required=True, fix=_NAME_FIX)
    ref.checked("name", kubenames.is_dns1123_subdomain(secret), secret, _NAME_FIX)
    key = ref.string("key")
    ref.checked("key", kubenames.is_secret_key(key), key, _KEY_FIX)
    unknown = sorted(set(ref.raw) - {"name", "key"})
    if unknown:
        raise SpecError(ref.field(unknown[0]), "is not a field here", "give only name and key")
    assert secret is not None and key is not None
    return SecretRef(secret, key, ref.field("name"))


_NAME_FIX = (
    "name a Secret in the JobQueue's own namespace: at most 253 lower-case letters, digits, '-' and '.' "
    "(a DNS-1123 subdomain, no '/')"
)
_KEY_FIX = "name a key of the Secret: at most 253 letters, digits, '-', '_' and '.', e.g. dsn"
ROLE_SECRETS = ("migrationsSecret", "workersSecret", "maintenanceSecret")


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
    db.checked("secretName", kubenames.is_dns1123_subdomain(secret_name), secret_name, _NAME_FIX)
    secret_key = db.string("secretKey")
    db.checked("secretKey", kubenames.is_secret_key(secret_key), secret_key, _KEY_FIX)
    assert secret_name is not None and secret_key is not None
    unknown = sorted(set(db.raw) - {"secretName", "secretKey", "migrate", *ROLE_SECRETS})
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
                f"{_shown(job_type)} is not a job type",
                f"1-{JOB_TYPE_MAX} characters: letters, digits and _ . : / @ + = -, starting with a letter, "
                "digit or _ (no commas, spaces, $ or parentheses; a leading - would read as a flag)",
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
        if not re.fullmatch(OLDER_THAN_PATTERN, older_than):
            raise ValueError(older_than)
        parse_duration(older_than, "spec.retention.olderThan")
    except ValueError:
        raise SpecError(
            "spec.retention.olderThan",
            f"{_shown(older_than)} is not a duration with a unit",
            "e.g. 7d, 36h, 90m; a bare number is refused (seconds or days?)",
        ) from None
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
    w.checked(
        "image",
        image is not None and bool(_IMAGE.fullmatch(image)),
        image,
        "an image reference without spaces or control characters",
    )
    assert image is not None
    pull = w.string("imagePullPolicy")
    if pull not in ("Always", "IfNotPresent", "Never"):
        raise SpecError(w.field("imagePullPolicy"), f"{pull!r} is not a pull policy", "Always, IfNotPresent or Never")
    app = w.matching(
        "app",
        APP_PATTERN,
        APP_MAX,
        "the dotted Python module holding the handlers, as `pgwork worker --app` imports it, e.g. myapp.jobs "
        "(letters, digits and _ in each part; no -, /, : or leading digit)",
    )
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
        if not kubenames.is_env_name(name):
            raise SpecError(
                f"{w.field('env')}[{i}].name",
                f"{_shown(name)} is not a variable name",
                "letters, digits, '_', '-' and '.', not starting with a digit, e.g. LOG_LEVEL",
            )
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
    w.checked(
        "serviceAccountName",
        kubenames.is_dns1123_subdomain(sa),
        sa,
        "a ServiceAccount in the JobQueue's namespace: lower-case letters, digits, '-' and '.'",
    )
    raw_template = w.get("podTemplate")
    try:
        pod_template = None if raw_template is None else podtemplate.check(raw_template)
    except podtemplate.TemplateRefused as exc:
        raise SpecError(exc.field, exc.problem, exc.fix) from None
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
        pod_template=pod_template,
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
    """A JobQueue name every owned object's name can be made from: the metrics Service
    (`NAME-metrics`) is an RFC 1035 label, so it starts with a letter; the CronJobs
    (`NAME-reaper`, `NAME-prune`) stay within 52 characters; labels carry the name as it is."""
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH or not kubenames.DNS1035_LABEL.fullmatch(name):
        raise SpecError(
            "metadata.name",
            f"{_shown(name)} is not usable",
            f"at most {MAX_NAME_LENGTH} lower-case letters, digits and '-', starting with a letter "
            "(the metrics Service NAME-metrics must start with a letter; the CronJob NAME-reaper "
            "must stay within 52 characters)",
        )
    return name
