"""The JobQueue's `spec.worker`: the worker pods' image, command, resources and pod template,
parsed into a typed value with every rule the CRD states (pgwork/operator/spec.py parses the rest
of the spec and calls `parse_worker`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pgwork.operator import kubenames, podrules, podtemplate
from pgwork.operator.fields import Reader, SpecError, shown
from pgwork.operator.workerflags import WorkerFlags, parse_flags
from pgwork.operator.workervolumes import WorkerVolumes, check_template_clashes, parse_volumes

# What `pgwork worker --app` imports: a dotted module path, or MODULE:APP for a pgwork.App in it
# (the worker's own rule, pgwork/worker/options.py).
APP_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_]*)?"
APP_MAX = 200
# The bound `pgwork worker --max-abandoned` accepts (pgwork/worker/options.py, which the operator may not
# import); tests check the CRD and the worker say the same.
MAX_ABANDONED = 1000
_IMAGE = re.compile(r"[^\s\x00-\x1f\x7f]+")
_RESERVED_ENV = frozenset({"DATABASE_URL", "POD_NAME"})


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
    # Whether the pod gets a namespace token: handlers read producers' payloads, so not by default.
    automount_service_account_token: bool = False
    # `--max-abandoned` for the worker; None leaves the flag out, so the worker's own default holds
    # (and a JobQueue that never set it renders the same Deployment as before the field existed).
    max_abandoned: int | None = None
    # The typed flags rendered beside the generated ones, and the pod's writable volumes.
    flags: WorkerFlags = field(default_factory=WorkerFlags)
    volumes: WorkerVolumes = field(default_factory=WorkerVolumes)

    @property
    def capacity(self) -> int:
        """Jobs one worker pod takes at once: concurrency runners (or processes), each handed up to
        `batch` jobs. What the operator scales on."""
        return self.concurrency * self.flags.claim_size


def parse_worker(w: Reader) -> WorkerSpec:
    image = w.string("image", required=True, fix="name the worker image, e.g. registry.example/ocr:1.2")
    w.checked(
        "image",
        image is not None and bool(_IMAGE.fullmatch(image)),
        image,
        "an image reference without spaces or control characters",
    )
    assert image is not None
    pull = w.one_of("imagePullPolicy", ("Always", "IfNotPresent", "Never"), "Always, IfNotPresent or Never")
    app = w.matching(
        "app",
        APP_PATTERN,
        APP_MAX,
        "the dotted Python module holding the handlers, as `pgwork worker --app` imports it, e.g. myapp.jobs, "
        "or myapp.jobs:app for a pgwork.App (letters, digits and _ in each part; no -, / or leading digit)",
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
                f"{shown(name)} is not a variable name",
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
    max_abandoned = None
    if w.get("maxAbandoned") is not None:
        max_abandoned = w.integer(
            "maxAbandoned",
            0,
            MAX_ABANDONED,
            "how many handler threads stuck past their timeout a worker tolerates before it drains and exits, "
            "e.g. 3 (0: at the first)",
        )
        if args is not None:
            # args replaces every rendered argument: the field would be dropped without a word.
            raise SpecError(
                w.field("maxAbandoned"),
                "has no effect when worker.args is given (args replaces the rendered --max-abandoned)",
                "put --max-abandoned N in worker.args, or remove worker.args",
            )
    raw_template = w.get("podTemplate")
    try:
        pod_template = None if raw_template is None else podtemplate.check(raw_template)
    except podtemplate.TemplateRefused as exc:
        raise SpecError(exc.field, exc.problem, exc.fix) from None
    volumes = parse_volumes(w)
    check_template_clashes(volumes, pod_template, w.field("podTemplate"))
    # The kubelet expands $(NAME) in command and args into the process's argv: a Secret's value there
    # is readable by every process on the node, so only plain variables may be expanded.
    plain = podrules.plain_env_names([*env, *podtemplate.worker_env(pod_template)]) | {"POD_NAME"}
    for part, argv in (("command", command), ("args", args or ())):
        problem = podrules.argv_problem(argv, plain)
        if problem is not None:
            raise SpecError(w.field(part), problem[1], problem[2])
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
        max_abandoned=max_abandoned,
        flags=parse_flags(w, has_args=args is not None),
        volumes=volumes,
        automount_service_account_token=w.boolean("automountServiceAccountToken"),
    )
