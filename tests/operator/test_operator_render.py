"""Rendering: JobQueue dict → manifests, checked as a table and against Kubernetes' own schemas."""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
import pytest

from pgwork.durations import parse_duration
from pgwork.operator.fields import SpecError
from pgwork.operator.render import DELETION_COST, names, render_all, seconds_flag, selector_string
from tests.support.manifests import env_entries

UID = "0b6f2d6e-1111-4a8e-9f3a-5c2a9c3f0001"


def body(**spec_overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "database": {"secretName": "db", "secretKey": "url"},
        "jobTypes": ["ocr", "extract"],
        "worker": {"image": "img:1", "app": "myapp.jobs", "concurrency": 4},
    }
    for key, value in spec_overrides.items():
        spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
    return {
        "apiVersion": "pgwork.dev/v1alpha1",
        "kind": "JobQueue",
        "metadata": {"name": "ocr", "namespace": "team-a", "uid": UID},
        "spec": spec,
    }


def by_kind(manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in manifests}


def worker(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    return by_kind(manifests)["ocr-worker"]["spec"]["template"]["spec"]["containers"][0]


def test_names_are_stable() -> None:
    assert names("ocr") == {
        "deployment": "ocr-worker",
        "reaper": "ocr-reaper",
        "prune": "ocr-prune",
        "service": "ocr-metrics",
    }
    assert sorted(m["metadata"]["name"] for m in render_all(body())) == sorted(names("ocr").values())


def test_rendering_is_pure_and_repeatable() -> None:
    assert render_all(body()) == render_all(body())


def test_every_object_is_owned_by_the_jobqueue() -> None:
    for manifest in render_all(body()):
        assert manifest["metadata"]["namespace"] == "team-a"
        assert manifest["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "pgwork.dev/v1alpha1",
                "kind": "JobQueue",
                "name": "ocr",
                "uid": UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert manifest["metadata"]["labels"]["pgwork.dev/jobqueue"] == "ocr"


@pytest.mark.parametrize(
    ("overrides", "expected_args"),
    [
        (
            {},
            [
                "worker", "--app", "myapp.jobs", "--job-types", "ocr,extract", "--concurrency", "4",
                "--lease", "30s", "--heartbeat", "10s", "--metrics-port", "9100", "--grace", "55s",
                "--id", "$(POD_NAME)",
            ],
        ),
        (
            {
                "lease": {"durationSeconds": 90, "heartbeatSeconds": 7.5},
                "worker": {"terminationGracePeriodSeconds": 10},
            },
            [
                "worker", "--app", "myapp.jobs", "--job-types", "ocr,extract", "--concurrency", "4",
                "--lease", "90s", "--heartbeat", "7.5s", "--metrics-port", "9100", "--grace", "5s",
                "--id", "$(POD_NAME)",
            ],
        ),
        ({"worker": {"args": ["worker", "--app", "x", "--burst"]}}, ["worker", "--app", "x", "--burst"]),
        # maxAbandoned goes in only when set (0 is a value, not "unset"), before --id.
        (
            {"worker": {"maxAbandoned": 0}},
            [
                "worker", "--app", "myapp.jobs", "--job-types", "ocr,extract", "--concurrency", "4",
                "--lease", "30s", "--heartbeat", "10s", "--metrics-port", "9100", "--grace", "55s",
                "--max-abandoned", "0", "--id", "$(POD_NAME)",
            ],
        ),
        (
            {"worker": {"maxAbandoned": 12}},
            [
                "worker", "--app", "myapp.jobs", "--job-types", "ocr,extract", "--concurrency", "4",
                "--lease", "30s", "--heartbeat", "10s", "--metrics-port", "9100", "--grace", "55s",
                "--max-abandoned", "12", "--id", "$(POD_NAME)",
            ],
        ),
    ],
)  # fmt: skip
def test_worker_arguments(overrides: dict[str, Any], expected_args: list[str]) -> None:
    assert worker(render_all(body(**overrides)))["args"] == expected_args


def test_worker_pod() -> None:
    manifests = by_kind(render_all(body(worker={"env": [{"name": "LOG_LEVEL", "value": "debug"}]})))
    deployment = manifests["ocr-worker"]
    assert "replicas" not in deployment["spec"]  # the scaler owns it after creation
    assert render_all(body(), replicas=3)[0]["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["env"][0] == {"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": "db", "key": "url"}}}
    assert {"name": "LOG_LEVEL", "value": "debug"} in container["env"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert pod["terminationGracePeriodSeconds"] == 60
    assert pod["initContainers"][0]["args"] == ["migrate"]
    assert (
        deployment["spec"]["selector"]["matchLabels"].items()
        <= deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    assert DELETION_COST not in str(deployment)
    assert selector_string("ocr") == "app.kubernetes.io/component=worker,pgwork.dev/jobqueue=ocr"


@pytest.mark.parametrize(
    ("overrides", "reaper_args", "reaper_suspended", "prune_suspended"),
    [
        ({}, ["reap", "--loop-for", "50s", "--every", "10s"], False, False),
        ({"reaper": {"loopSeconds": 0, "suspend": True}}, ["reap"], True, False),
        ({"retention": {"enabled": False, "olderThan": "30d"}}, ["reap", "--loop-for", "50s", "--every", "10s"],
         False, True),
        ({"retention": {"archiveAfter": "1d", "olderThan": "30d"}},
         ["reap", "--loop-for", "50s", "--every", "10s", "--archive-after", "1d"], False, False),
    ],
)  # fmt: skip
def test_cronjobs(
    overrides: dict[str, Any], reaper_args: list[str], reaper_suspended: bool, prune_suspended: bool
) -> None:
    manifests = by_kind(render_all(body(**overrides)))
    reaper, prune = manifests["ocr-reaper"], manifests["ocr-prune"]
    assert reaper["spec"]["concurrencyPolicy"] == prune["spec"]["concurrencyPolicy"] == "Forbid"
    assert reaper["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] == reaper_args
    assert reaper["spec"]["suspend"] is reaper_suspended
    assert prune["spec"]["suspend"] is prune_suspended
    retention = overrides.get("retention", {})
    # With archiving on, retention drops whole days of pgwork.job_history instead of deleting rows.
    command = "drop-history" if "archiveAfter" in retention else "prune"
    assert prune["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] == [
        command, "--older-than", retention.get("olderThan", "7d"),
    ]  # fmt: skip


def test_no_migrate_init_container_when_turned_off() -> None:
    deployment = by_kind(render_all(body(database={"migrate": False})))["ocr-worker"]
    assert "initContainers" not in deployment["spec"]["template"]["spec"]


def test_service_account_reaches_every_pod() -> None:
    manifests = by_kind(render_all(body(worker={"serviceAccountName": "ocr-sa"})))
    assert manifests["ocr-worker"]["spec"]["template"]["spec"]["serviceAccountName"] == "ocr-sa"
    assert manifests["ocr-reaper"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"] == "ocr-sa"


@pytest.mark.parametrize(
    "overrides", [{}, {"worker": {"resources": {"requests": {"cpu": "500m"}}}}, {"reaper": {"loopSeconds": 0}}]
)
def test_manifests_pass_the_kubernetes_schemas(overrides: dict[str, Any]) -> None:
    for manifest in render_all(body(**overrides), replicas=2):
        kubernetes_validate.validate(manifest, "1.30", strict=True)


def test_a_bad_spec_renders_nothing() -> None:
    with pytest.raises(SpecError, match=r"^spec\.scaling\.minReplicas"):
        render_all(body(scaling={"minReplicas": 4, "maxReplicas": 3}))
    bad_name = body()
    bad_name["metadata"]["name"] = "x" * 50
    with pytest.raises(SpecError, match=r"^metadata\.name"):
        render_all(bad_name)


def _pod_specs(manifests: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    pods = []
    for m in manifests:
        if m["kind"] == "Deployment":
            pods.append((m["metadata"]["name"], m["spec"]["template"]["spec"]))
        elif m["kind"] == "CronJob":
            pods.append((m["metadata"]["name"], m["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
    return pods


@pytest.mark.parametrize("overrides", [{}, {"database": {"migrate": False}}])
def test_every_pod_meets_the_restricted_pod_security_standard(overrides: dict[str, Any]) -> None:
    pods = _pod_specs(render_all(body(**overrides)))
    assert {name for name, _ in pods} == {"ocr-worker", "ocr-reaper", "ocr-prune"}
    for name, pod in pods:
        security = pod["securityContext"]
        assert security["runAsNonRoot"] is True and security["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in pod["containers"] + pod.get("initContainers", []):
            c = container["securityContext"]
            assert c["allowPrivilegeEscalation"] is False, (name, container["name"])
            assert c["readOnlyRootFilesystem"] is True, (name, container["name"])
            assert c["capabilities"] == {"drop": ["ALL"]}, (name, container["name"])
            # A read-only root needs somewhere writable for temporary files.
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]


# ---------------------------------------------------------------- numbers and strings the worker parses


@pytest.mark.parametrize(
    "value",
    [0.1, 0.30000000000000004, 0.123456789, 7.5, 10.0, 33.33346, 100.0004, 1234.5678, 86399.999999, 86400.0,
     1 / 3, 2.675, 1e-1, 3599.9999999999995],
)  # fmt: skip
def test_duration_flags_round_trip_exactly(value: float) -> None:
    text = seconds_flag(value)
    assert "e" not in text.lower().removesuffix("s") and text.endswith("s"), text
    assert parse_duration(text) == value  # exactly, not nearly: %g kept six digits


def _worker_options(manifests: list[dict[str, Any]]) -> Any:
    """The rendered worker arguments, parsed by the real `pgwork worker` parser and option checks."""
    from pgwork.cli import build_parser
    from pgwork.worker.command import options_from_args

    args = [a.replace("$(POD_NAME)", "ocr-worker-5d4f-abcde") for a in worker(manifests)["args"]]
    return options_from_args(build_parser().parse_args(args))


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        # %g rendered these as --lease 100s --heartbeat 33.3335s: more than a third, refused by the worker.
        {"lease": {"durationSeconds": 100.0004, "heartbeatSeconds": 33.33346}},
        {"lease": {"durationSeconds": 1.2345678, "heartbeatSeconds": 0.4115226}},
        {"lease": {"durationSeconds": 86400, "heartbeatSeconds": 28800}},
        {"lease": {"durationSeconds": 0.30000000000000004 * 10, "heartbeatSeconds": 0.1}},
        {"jobTypes": ["_private", "a/b:c", "x@y+z=1", "demo.extract_invoice", "9lives"]},
        {"worker": {"app": "_pkg.sub_mod2.jobs"}},
        {"worker": {"app": "myapp.jobs:app"}},  # a pgwork.App
        {"worker": {"maxAbandoned": 0}},
        {"worker": {"maxAbandoned": 1000}},  # the CRD's maximum is the worker's
    ],
)
def test_rendered_worker_arguments_parse_in_the_worker(overrides: dict[str, Any]) -> None:
    from pgwork.worker.timeouts import DEFAULT_MAX_ABANDONED

    spec = body(**overrides)["spec"]
    options = _worker_options(render_all(body(**overrides)))
    lease = spec.get("lease", {})
    assert options.lease == float(lease.get("durationSeconds", 30))
    assert options.heartbeat == float(lease.get("heartbeatSeconds", 10))
    assert options.job_types == tuple(spec["jobTypes"])
    assert options.app == spec["worker"]["app"]
    assert options.max_abandoned == spec["worker"].get("maxAbandoned", DEFAULT_MAX_ABANDONED)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"jobTypes": ["-ocr"]}, "spec.jobTypes[0]"),
        ({"jobTypes": ["--burst"]}, "spec.jobTypes[0]"),
        ({"jobTypes": ["ocr", "$(DATABASE_URL)"]}, "spec.jobTypes[1]"),
        ({"jobTypes": ["ocr\n"]}, "spec.jobTypes[0]"),
        ({"worker": {"app": "my-app.jobs"}}, "spec.worker.app"),
        ({"worker": {"app": "-m"}}, "spec.worker.app"),
        ({"worker": {"app": "../jobs"}}, "spec.worker.app"),
        ({"worker": {"app": "jobs\n"}}, "spec.worker.app"),
        ({"worker": {"app": "jobs:app:x"}}, "spec.worker.app"),
        ({"worker": {"app": "jobs:"}}, "spec.worker.app"),
    ],
)
def test_arguments_the_worker_would_misread_are_refused_up_front(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as info:
        render_all(body(**overrides))
    assert info.value.field == field


def test_no_pod_mounts_a_service_account_token_unless_asked() -> None:
    """Handlers read producers' payloads: a worker holds a namespace token only when the JobQueue
    asks for one (spec.worker.automountServiceAccountToken); maintenance pods never do."""
    for name, pod in _pod_specs(render_all(body(worker={"serviceAccountName": "ocr-sa"}))):
        assert pod["automountServiceAccountToken"] is False, name
    asked = render_all(body(worker={"serviceAccountName": "ocr-sa", "automountServiceAccountToken": True}))
    for name, pod in _pod_specs(asked):
        assert pod["automountServiceAccountToken"] is (name == "ocr-worker"), name


def _secret_refs(manifests: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Container name → the Secret its DATABASE_URL comes from."""
    refs = {}
    for _, pod in _pod_specs(manifests):
        for container in pod["containers"] + pod.get("initContainers", []):
            (env,) = [e for e in container["env"] if e["name"] == "DATABASE_URL"]
            refs[container["name"]] = env["valueFrom"]["secretKeyRef"]
    return refs


def test_one_secret_serves_every_role_by_default() -> None:
    refs = _secret_refs(render_all(body()))
    assert set(refs) == {"worker", "migrate", "reaper", "retention"}
    assert all(ref == {"name": "db", "key": "url"} for ref in refs.values())


def test_the_schedules_secret_reaches_no_pod() -> None:
    """Only the operator reads spec.database.schedulesSecret (to fire schedules as a producer)."""
    manifests = render_all(body(database={"schedulesSecret": {"name": "queue-scheduler"}}))
    assert "queue-scheduler" not in json.dumps(manifests)
    assert _secret_refs(manifests) == _secret_refs(render_all(body()))


def _env_of(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> env entry of every container and init container in a rendered manifest."""
    return {entry["name"]: entry for entry in env_entries(manifest)}


def test_pooler_transaction_reaches_every_pod_and_listen_dsn_only_the_workers() -> None:
    database = {"pooler": "transaction", "listenSecret": {"name": "queue-direct"}}
    manifests = {m["kind"] + "/" + m["metadata"]["name"]: m for m in render_all(body(database=database))}
    pods = {k: _env_of(m) for k, m in manifests.items() if k.split("/")[0] in ("Deployment", "CronJob")}
    assert len(pods) == 3
    for name, env in pods.items():
        assert env["PGWORK_POOLER"] == {"name": "PGWORK_POOLER", "value": "transaction"}, name
        listen = env.get("PGWORK_LISTEN_DSN")
        if name.startswith("Deployment"):
            assert listen == {
                "name": "PGWORK_LISTEN_DSN",
                "valueFrom": {"secretKeyRef": {"name": "queue-direct", "key": "dsn"}},
            }
        else:
            assert listen is None, name
    plain = [_env_of(m) for m in render_all(body()) if m["kind"] in ("Deployment", "CronJob")]
    assert plain and all("PGWORK_POOLER" not in env and "PGWORK_LISTEN_DSN" not in env for env in plain)


def test_each_role_gets_its_own_secret_when_given() -> None:
    database = {
        "migrationsSecret": {"name": "queue-owner"},
        "workersSecret": {"name": "queue-worker", "key": "uri"},
        "maintenanceSecret": {"name": "queue-maintainer"},
    }
    refs = _secret_refs(render_all(body(database=database)))
    assert refs == {
        "migrate": {"name": "queue-owner", "key": "dsn"},
        "worker": {"name": "queue-worker", "key": "uri"},
        "reaper": {"name": "queue-maintainer", "key": "dsn"},
        "retention": {"name": "queue-maintainer", "key": "dsn"},
    }
    partial = _secret_refs(render_all(body(database={"workersSecret": {"name": "queue-worker"}})))
    assert partial["worker"] == {"name": "queue-worker", "key": "dsn"}
    assert partial["migrate"] == partial["reaper"] == {"name": "db", "key": "url"}
