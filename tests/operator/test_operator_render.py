"""Rendering: JobQueue dict → manifests, checked as a table and against Kubernetes' own schemas."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from pgwork.operator.render import DELETION_COST, names, render_all, selector_string
from pgwork.operator.spec import SpecError

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
    older = overrides.get("retention", {}).get("olderThan", "7d")
    assert prune["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "prune", "--older-than", older,
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
