"""crd.yaml: structural, defaults equal to spec.py's, and its CEL rules and schema agree with
parse_spec — evaluated here with a real CEL interpreter and JSON-schema validator, the way an
API server would (defaults first, then schema, then the x-kubernetes-validations rules)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pgwork.operator.spec import DEFAULTS
from tests.support.crd import (
    BASE,
    CRD,
    SCHEMA,
    VERSION,
    api_server_verdict,
    assert_agree,
    operator_verdict,
    spec_with,
    walk,
)

GPU_EXAMPLE = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "manifests" / "examples" / "jobqueue-gpu.yaml").read_text()
)
GPU_TEMPLATE = GPU_EXAMPLE["spec"]["worker"]["podTemplate"]


def test_the_gpu_example_is_valid_for_the_api_server_and_the_operator() -> None:
    assert api_server_verdict(GPU_EXAMPLE["spec"], GPU_EXAMPLE["metadata"]["name"]) == []
    assert operator_verdict(GPU_EXAMPLE["spec"], GPU_EXAMPLE["metadata"]["name"]) is None


def pod_spec(**fields: Any) -> dict[str, Any]:
    return {"spec": fields}


def container(name: str = "worker", **fields: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": name, **fields}]}}


AGREED = [  # (case, spec, valid)
    ("minimal", BASE, True),
    ("bounds equal", spec_with("scaling", minReplicas=3, maxReplicas=3), True),
    ("min above max", spec_with("scaling", minReplicas=4, maxReplicas=3), False),
    ("heartbeat a third", spec_with("lease", durationSeconds=30, heartbeatSeconds=10), True),
    ("heartbeat above a third", spec_with("lease", durationSeconds=30, heartbeatSeconds=10.5), False),
    ("schedule 4 fields", spec_with("reaper", schedule="* * * *"), False),
    ("schedule macro", spec_with("reaper", schedule="@hourly"), True),
    ("retention schedule 6 fields", spec_with("retention", schedule="0 0 * * * *"), False),
    ("archive after a day", spec_with("retention", archiveAfter="1d"), True),
    ("archive after a bare number", spec_with("retention", archiveAfter="30"), False),
    ("every above loop", spec_with("reaper", loopSeconds=5, everySeconds=10), False),
    ("loop off", spec_with("reaper", loopSeconds=0, everySeconds=30), True),
    ("no app nor args", {**BASE, "worker": {"image": "i"}}, False),
    ("args without app", {**BASE, "worker": {"image": "i", "args": ["worker", "--app", "m"]}}, True),
    ("reserved env", spec_with("worker", env=[{"name": "DATABASE_URL", "value": "x"}]), False),
    ("ok env", spec_with("worker", env=[{"name": "LOG_LEVEL", "value": "x"}]), True),
    ("inline dsn", spec_with("database", dsn="postgresql://u:p@h/d"), False),
    ("no job types", {**BASE, "jobTypes": []}, False),
    ("comma in job type", {**BASE, "jobTypes": ["a,b"]}, False),
    ("concurrency 0", spec_with("worker", concurrency=0), False),
    ("maxAbandoned 0", spec_with("worker", maxAbandoned=0), True),
    ("maxAbandoned 1000", spec_with("worker", maxAbandoned=1000), True),
    ("maxAbandoned negative", spec_with("worker", maxAbandoned=-1), False),
    ("maxAbandoned above 1000", spec_with("worker", maxAbandoned=1001), False),
    ("maxAbandoned a string", spec_with("worker", maxAbandoned="3"), False),
    ("maxAbandoned a fraction", spec_with("worker", maxAbandoned=2.5), False),
    ("maxAbandoned with args", {**BASE, "worker": {"image": "i", "args": ["worker"], "maxAbandoned": 3}}, False),
    ("pull policy", spec_with("worker", imagePullPolicy="Sometimes"), False),
    ("poll too fast", spec_with("scaling", pollIntervalSeconds=0.01), False),
    ("bad olderThan", spec_with("retention", olderThan="a week"), False),
    ("replicas negative", {**BASE, "replicas": -1}, False),
    ("replicas set", {**BASE, "replicas": 3}, True),
    # Strings that become API paths, object names, arguments: the rule Kubernetes or the worker applies.
    ("secret path traversal", spec_with("database", secretName="../../kube-system/secrets/x"), False),
    ("secret name with slash", spec_with("database", secretName="a/b"), False),
    ("secret name upper case", spec_with("database", secretName="DB"), False),
    ("secret name trailing newline", spec_with("database", secretName="db\n"), False),
    ("secret name subdomain", spec_with("database", secretName="team-a.queue-db"), True),
    ("secret name too long", spec_with("database", secretName="a" * 254), False),
    ("secret key with slash", spec_with("database", secretKey="../dsn"), False),
    ("secret key dot-dot", spec_with("database", secretKey="..dsn"), False),
    ("secret key dot", spec_with("database", secretKey="."), False),
    ("secret key ok", spec_with("database", secretKey="DATABASE_URL.v2"), True),
    ("role secrets", spec_with("database", migrationsSecret={"name": "owner"}, maintenanceSecret={"name": "m"}), True),
    ("role secret key", spec_with("database", workersSecret={"name": "w", "key": "u"}), True),
    ("role secret traversal", spec_with("database", workersSecret={"name": "../x"}), False),
    ("role secret without name", spec_with("database", maintenanceSecret={"key": "dsn"}), False),
    ("schedules secret", spec_with("database", schedulesSecret={"name": "producer", "key": "url"}), True),
    ("schedules secret traversal", spec_with("database", schedulesSecret={"name": "../x"}), False),
    ("schedules secret without name", spec_with("database", schedulesSecret={"key": "dsn"}), False),
    ("pooler transaction", spec_with("database", pooler="transaction"), True),
    ("pooler none", spec_with("database", pooler="none"), True),
    ("pooler session", spec_with("database", pooler="session"), False),
    ("pooler as a bool", spec_with("database", pooler=True), False),
    ("listen dsn behind a pooler", spec_with("database", pooler="transaction", listenSecret={"name": "d"}), True),
    ("listen dsn without a pooler", spec_with("database", listenSecret={"name": "direct"}), False),
    ("listen dsn traversal", spec_with("database", pooler="transaction", listenSecret={"name": "../x"}), False),
    ("job type as a flag", {**BASE, "jobTypes": ["-ocr"]}, False),
    ("job type with space", {**BASE, "jobTypes": ["a b"]}, False),
    ("job type with newline", {**BASE, "jobTypes": ["ocr\n"]}, False),
    ("job type expanding $(VAR)", {**BASE, "jobTypes": ["$(POD_NAME)"]}, False),
    ("job type dotted", {**BASE, "jobTypes": ["demo.extract_invoice", "lab-crash", "a/b:c"]}, True),
    ("app with dash", spec_with("worker", app="my-app.jobs"), False),
    ("app as a flag", spec_with("worker", app="--burst"), False),
    ("app as a path", spec_with("worker", app="/srv/jobs.py"), False),
    ("app with an App", spec_with("worker", app="myapp.jobs:app"), True),
    ("app with a dotted attr", spec_with("worker", app="myapp.jobs:app.registry"), False),
    ("app with two colons", spec_with("worker", app="myapp:jobs:app"), False),
    ("app trailing newline", spec_with("worker", app="myapp.jobs\n"), False),
    ("app dotted", spec_with("worker", app="my_app.jobs2"), True),
    ("image with space", spec_with("worker", image="img:1 --privileged"), False),
    ("env name with space", spec_with("worker", env=[{"name": "A B", "value": "x"}]), False),
    ("service account path", spec_with("worker", serviceAccountName="../default"), False),
    ("olderThan bare number", spec_with("retention", olderThan="30"), False),
    ("olderThan trailing newline", spec_with("retention", olderThan="7d\n"), False),
    ("schedule newline separated", spec_with("reaper", schedule="* * *\n* *"), False),
    ("schedule trailing newline", spec_with("reaper", schedule="* * * * *\n"), False),
    # spec.worker.podTemplate: the GPU case passes; what would weaken the pod is refused by both.
    ("gpu pod template", spec_with("worker", podTemplate=GPU_TEMPLATE), True),
    ("pod template hostNetwork", spec_with("worker", podTemplate={"spec": {"hostNetwork": True}}), False),
    ("pod template hostPID", spec_with("worker", podTemplate={"spec": {"hostPID": True}}), False),
    ("pod template securityContext", spec_with("worker", podTemplate={"spec": {"securityContext": {}}}), False),
    ("pod template service account", spec_with("worker", podTemplate={"spec": {"serviceAccountName": "a"}}), False),
    ("pod template init containers", spec_with("worker", podTemplate={"spec": {"initContainers": []}}), False),
    (
        "pod template hostPath",
        spec_with("worker", podTemplate=pod_spec(volumes=[{"name": "r", "hostPath": {"path": "/"}}])),
        False,
    ),
    (
        "pod template tmp volume",
        spec_with("worker", podTemplate=pod_spec(volumes=[{"name": "tmp", "emptyDir": {}}])),
        False,
    ),
    (
        "pod template privileged",
        spec_with("worker", podTemplate=container(securityContext={"privileged": True})),
        False,
    ),
    (
        "pod template not privileged",
        spec_with("worker", podTemplate=container(securityContext={"privileged": False})),
        True,
    ),
    (
        "pod template escalation",
        spec_with("worker", podTemplate=container(securityContext={"allowPrivilegeEscalation": True})),
        False,
    ),
    (
        "pod template caps add",
        spec_with("worker", podTemplate=container(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}})),
        False,
    ),
    (
        "pod template DATABASE_URL",
        spec_with("worker", podTemplate=container(env=[{"name": "DATABASE_URL", "value": "x"}])),
        False,
    ),
    (
        "pod template POD_NAME in sidecar",
        spec_with("worker", podTemplate=container("s", image="i", env=[{"name": "POD_NAME"}])),
        False,
    ),
    ("pod template worker command", spec_with("worker", podTemplate=container(command=["sh"])), False),
    ("pod template worker image", spec_with("worker", podTemplate=container(image="evil:1")), False),
    ("pod template sidecar without image", spec_with("worker", podTemplate=container("s")), False),
    ("pod template migrate name", spec_with("worker", podTemplate=container("migrate", image="i")), False),
    ("pod template sidecar", spec_with("worker", podTemplate=container("proxy", image="p:1", args=["-v"])), True),
    ("pod template labels", spec_with("worker", podTemplate={"metadata": {"labels": {"team": "ml"}}}), True),
    ("pod template label not a string", spec_with("worker", podTemplate={"metadata": {"labels": {"n": 1}}}), False),
    # Second round (issue 24): what the restricted standard and Kubernetes' name rules refuse.
    *[
        (
            f"pod template {kind} volume",
            spec_with("worker", podTemplate=pod_spec(volumes=[{"name": "v", kind: {}}])),
            False,
        )
        for kind in ("nfs", "iscsi", "cephfs", "flexVolume", "gitRepo", "rbd", "awsElasticBlockStore")
    ],
    *[
        (
            f"pod template {kind} volume",
            spec_with("worker", podTemplate=pod_spec(volumes=[{"name": "v", kind: {}}])),
            True,
        )
        for kind in ("persistentVolumeClaim", "projected", "configMap", "secret", "emptyDir", "ephemeral", "csi")
    ],
    (
        "pod template hostPort",
        spec_with("worker", podTemplate=container("s", image="i", ports=[{"hostPort": 8}])),
        False,
    ),
    (
        "pod template port",
        spec_with("worker", podTemplate=container("s", image="i", ports=[{"containerPort": 8}])),
        True,
    ),
    (
        "pod template seccomp unconfined",
        spec_with(
            "worker", podTemplate=container("s", image="i", securityContext={"seccompProfile": {"type": "Unconfined"}})
        ),
        False,
    ),
    (
        "pod template apparmor unconfined",
        spec_with(
            "worker", podTemplate=container("s", image="i", securityContext={"appArmorProfile": {"type": "Unconfined"}})
        ),
        False,
    ),
    (
        "pod template seccomp default",
        spec_with(
            "worker",
            podTemplate=container("s", image="i", securityContext={"seccompProfile": {"type": "RuntimeDefault"}}),
        ),
        True,
    ),
    (
        "pod template apparmor annotation",
        spec_with(
            "worker",
            podTemplate={
                "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/s": "unconfined"}}
            },
        ),
        False,
    ),
    (
        "pod template seccomp annotation",
        spec_with(
            "worker",
            podTemplate={"metadata": {"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}},
        ),
        False,
    ),
    (
        "pod template confined annotation",
        spec_with(
            "worker",
            podTemplate={
                "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/s": "runtime/default"}}
            },
        ),
        True,
    ),
    ("pod template label too long", spec_with("worker", podTemplate={"metadata": {"labels": {"a": "x" * 64}}}), False),
    ("pod template label space", spec_with("worker", podTemplate={"metadata": {"labels": {"a": "x y"}}}), False),
    ("pod template label dash end", spec_with("worker", podTemplate={"metadata": {"labels": {"a": "x-"}}}), False),
    ("pod template label empty", spec_with("worker", podTemplate={"metadata": {"labels": {"a": ""}}}), True),
    ("args $(DATABASE_URL)", spec_with("worker", args=["worker", "--dsn", "$(DATABASE_URL)"]), False),
    ("command $(DATABASE_URL)", spec_with("worker", command=["sh", "-c", "x $(DATABASE_URL)"]), False),
    ("args $$(DATABASE_URL)", spec_with("worker", args=["worker", "--app", "m", "$$(DATABASE_URL)"]), True),
    ("args $(POD_NAME)", spec_with("worker", args=["worker", "--app", "m", "$(POD_NAME)"]), True),
    ("token asked", spec_with("worker", automountServiceAccountToken=True), True),
]


@pytest.mark.parametrize(("case", "spec", "valid"), AGREED, ids=[c[0] for c in AGREED])
def test_crd_and_operator_agree(case: str, spec: dict[str, Any], valid: bool) -> None:
    assert_agree(case, spec, valid)


SCHEDULES = [  # (schedule, valid for the CronJob controller)
    ("* * * * *", True), ("*/5 * * * *", True), ("0 3 * * 1-5", True), ("15,45 */2 1 JAN-MAR sun", True),
    ("0 0 ? * MON", True), ("@hourly", True), ("@daily", True), ("59 23 31 12 6", True), ("00 00 01 01 00", True),
    ("0\t0 * * *", True), ("0 0 1-31/2 * *", True), ("0 0 * jan,Feb,MAR *", True), ("5 4 * * mon-FRI", True),
    ("61 * * * *", False), ("* 24 * * *", False), ("* * 0 * *", False), ("* * 32 * *", False), ("* * * 13 *", False),
    ("* * * 0 *", False), ("0 0 * * 7", False), ("0 ² * * *", False), ("٣ * * * *", False), ("? * * * *", False),
    ("* * * * *\n", False), (" * * * * *", False), ("* * *\n* *", False), ("@hourly\n", False), ("@every 5m", False),
    ("TZ=UTC 0 * * * *", False), ("0 3 * * * *", False), ("* * * *", False), ("", False), ("L * * * *", False),
    ("0 0 1W * *", False), ("0 0 * * 5#3", False), ("*/100 * * * *", False), ("*/0 * * * *", False),
    ("005 * * * *", False), ("x" * 201, False),
]  # fmt: skip


@pytest.mark.parametrize(("schedule", "valid"), SCHEDULES, ids=[repr(s)[:40] for s, _ in SCHEDULES])
def test_schedules_are_judged_alike_by_the_crd_and_the_operator(schedule: str, valid: bool) -> None:
    for section in ("reaper", "retention"):
        spec = spec_with(section, schedule=schedule)
        assert (not api_server_verdict(spec)) is valid, (section, api_server_verdict(spec))
        assert (operator_verdict(spec) is None) is valid, (section, operator_verdict(spec))


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (spec_with("reaper", schedule="5 4 * * sat-sun"), "spec.reaper.schedule"),
        (spec_with("reaper", schedule="*/61 * * * *"), "spec.reaper.schedule"),
        (spec_with("retention", schedule="0 0 5-1 * *"), "spec.retention.schedule"),
        ({**BASE, "jobTypes": ["ocr", "ocr"]}, "spec.jobTypes[1]"),
        # The worker container takes only what merges; root is refused though the schema leaves it open.
        (
            spec_with("worker", podTemplate=container(lifecycle={})),
            "spec.worker.podTemplate.spec.containers[0].lifecycle",
        ),
        (
            spec_with("worker", podTemplate=container("s", image="i", securityContext={"runAsUser": 0})),
            "spec.worker.podTemplate.spec.containers[0].securityContext.runAsUser",
        ),
        # Allow-lists the schema cannot hold: a volume type it does not name, a Secret-backed $(NAME).
        (
            spec_with("worker", podTemplate=pod_spec(volumes=[{"name": "v", "someFutureDriver": {}}])),
            "spec.worker.podTemplate.spec.volumes[0].someFutureDriver",
        ),
        (
            spec_with(
                "worker",
                env=[{"name": "K", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                args=["worker", "--app", "m", "$(K)"],
            ),
            "spec.worker.args",
        ),
        (
            spec_with("worker", podTemplate={"metadata": {"labels": {"bad key": "x"}}}),
            "spec.worker.podTemplate.metadata.labels.bad key",
        ),
    ],
)
def test_what_only_the_operator_catches(spec: dict[str, Any], field: str) -> None:
    assert api_server_verdict(spec) == [] or "unique" in " ".join(api_server_verdict(spec))
    verdict = operator_verdict(spec)
    assert verdict is not None and verdict.startswith(field)


@pytest.mark.parametrize(
    ("name", "valid"),
    [("a" * 45, True), ("a" * 46, False), ("ocr-2", True), ("2ocr", False), ("a.b", False), ("ocr\n", False)],
)
def test_name_rule(name: str, valid: bool) -> None:
    assert (not api_server_verdict(BASE, name)) is valid
    assert (operator_verdict(BASE, name) is None) is valid


def test_schema_is_structural() -> None:
    for path, node in walk(SCHEMA):
        if path == ".metadata" or node.get("x-kubernetes-preserve-unknown-fields"):
            continue
        assert "type" in node, f"{path or '<root>'} has no type"


def test_crd_defaults_equal_the_operators() -> None:
    spec_props = SCHEMA["properties"]["spec"]["properties"]
    for section, defaults in DEFAULTS.items():
        props = spec_props[section]["properties"]
        for key, value in defaults.items():
            assert props[key].get("default") == value, f"spec.{section}.{key}"
        crd_defaults = {k: v["default"] for k, v in props.items() if "default" in v}
        assert crd_defaults == defaults, f"spec.{section}"


def test_subresources_and_columns() -> None:
    assert VERSION["subresources"]["status"] == {}
    assert VERSION["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    columns = [c["name"] for c in VERSION["additionalPrinterColumns"]]
    assert columns == ["Ready", "Pending", "Running", "Dead", "Waiting", "Replicas", "Age"]
    assert [c["name"] for c in VERSION["additionalPrinterColumns"] if c.get("priority")] == ["Waiting"]  # -o wide
    status = SCHEMA["properties"]["status"]["properties"]
    for column in VERSION["additionalPrinterColumns"]:
        field = column["jsonPath"].split(".")[2].split("[")[0]
        assert column["jsonPath"].startswith(".metadata") or field in status, column


def test_crd_is_a_valid_kubernetes_object() -> None:
    import kubernetes_validate

    kubernetes_validate.validate(CRD, "1.30", strict=True)


def test_max_abandoned_bounds_are_the_workers() -> None:
    """The CRD, the operator and `pgwork worker --max-abandoned` take the same range: a value one
    of them allows and the worker refuses would be a crash loop (the operator cannot import the
    worker, so the bound is written twice and compared here)."""
    from pgwork.operator.workerspec import MAX_ABANDONED
    from pgwork.worker.options import MAX_CONCURRENCY, OptionError, parse_options

    field = SCHEMA["properties"]["spec"]["properties"]["worker"]["properties"]["maxAbandoned"]
    assert (field["minimum"], field["maximum"]) == (0, MAX_ABANDONED) == (0, MAX_CONCURRENCY)
    assert "default" not in field  # unset: the worker's own default, and no new flag in old Deployments
    for outside in (-1, MAX_ABANDONED + 1):
        with pytest.raises(OptionError):
            parse_options(app="m", worker_id="w", environ={}, max_abandoned=str(outside))
