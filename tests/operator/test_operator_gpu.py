"""A GPU fleet without workarounds: spec.worker's typed flags rendered beside the generated ones,
the scratch, model-cache and /dev/shm volumes, the GPU example, and scaling on capacity, from the
render table to a real operator against the emulator."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from pgwork import NewJob, Queue
from pgwork.operator.fields import SpecError
from pgwork.operator.kube import Kube
from pgwork.operator.render import render_all
from pgwork.operator.spec import parse_spec
from tests.support import stories
from tests.support.crd import assert_agree
from tests.support.operator import OperatorThread, eventually

EXAMPLE_PATH = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "jobqueue-gpu.yaml"
GENERATED = ["--app", "--job-types", "--concurrency", "--lease", "--heartbeat", "--metrics-port", "--grace", "--id"]
BASE: dict[str, Any] = {"database": {"secretName": "db"}, "jobTypes": ["embed"], "worker": {"image": "i:1", "app": "m"}}


def with_worker(**fields: Any) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    spec["worker"].update(fields)
    return spec


def mounting(path: str) -> dict[str, Any]:
    """A podTemplate whose worker container mounts a volume of its own at `path`."""
    return {"spec": {"containers": [{"name": "worker", "volumeMounts": [{"name": "x", "mountPath": path}]}]}}


def body(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "embed", "namespace": "ml", "uid": "u-1"}, "spec": spec}


def pod(spec: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = render_all(body(spec))[0]["spec"]["template"]["spec"]
    return result


def worker_args(spec: dict[str, Any]) -> list[str]:
    args: list[str] = pod(spec)["containers"][0]["args"]
    return args


def flags_after_grace(args: list[str]) -> list[str]:
    """The typed flags: between the generated --grace value and --id."""
    return args[args.index("--grace") + 2 : args.index("--id")]


# ---------------------------------------------------------------- typed flags


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, []),
        ({"batch": 32}, ["--batch", "32"]),
        ({"batch": 32, "batchWait": "20ms"}, ["--batch", "32", "--batch-wait", "20ms"]),
        ({"isolation": "process"}, ["--isolation", "process"]),
        ({"isolation": "thread"}, ["--isolation", "thread"]),
        (
            {"maxJobsPerChild": 500, "maxMemoryPerChild": "4Gi"},
            ["--max-jobs-per-child", "500", "--max-memory-per-child", "4Gi"],
        ),
        ({"poll": "250ms"}, ["--poll", "250ms"]),
        ({"listen": False}, ["--no-listen"]),
        ({"listen": True}, []),  # LISTEN is the worker's default
        (
            {"listen": False, "poll": "2s", "batch": 8, "isolation": "process", "batchWait": "1m30s"},
            ["--batch", "8", "--batch-wait", "1m30s", "--isolation", "process", "--poll", "2s", "--no-listen"],
        ),
    ],
)  # fmt: skip
def test_typed_flags_are_rendered_beside_the_generated_ones(fields: dict[str, Any], expected: list[str]) -> None:
    args = worker_args(with_worker(**fields))
    assert flags_after_grace(args) == expected
    for flag in GENERATED:
        assert flag in args, flag  # never replaced: --id $(POD_NAME), --grace, --lease, --job-types stay
    assert args[-2:] == ["--id", "$(POD_NAME)"]


def test_existing_worker_flags_parse_in_the_worker() -> None:
    """--batch, --poll and --no-listen exist in `pgwork worker` today: the rendered values parse."""
    from pgwork.cli import build_parser
    from pgwork.worker.command import options_from_args

    args = worker_args(with_worker(batch=64, poll="250ms", listen=False, concurrency=2))
    options = options_from_args(build_parser().parse_args([a.replace("$(POD_NAME)", "p-1") for a in args]))
    assert (options.batch, options.poll, options.listen) == (64, 0.25, False)


def test_flag_bounds_are_the_workers() -> None:
    from pgwork.operator import workerflags
    from pgwork.worker import options

    assert workerflags.MAX_BATCH == options.MAX_BATCH


AGREED = [  # (case, spec, valid): the API server (schema + CEL) and the operator say the same
    ("batch", with_worker(batch=64), True),
    ("batch 0", with_worker(batch=0), False),
    ("batch above the worker's", with_worker(batch=10_001), False),
    ("batch a string", with_worker(batch="8"), False),
    ("batchWait", with_worker(batchWait="20ms"), True),
    ("batchWait 0", with_worker(batchWait="0s"), True),
    ("batchWait bare number", with_worker(batchWait="20"), False),
    ("batchWait negative", with_worker(batchWait="-1s"), False),
    ("batchWait trailing newline", with_worker(batchWait="20ms\n"), False),
    ("isolation process", with_worker(isolation="process"), True),
    ("isolation fork", with_worker(isolation="fork"), False),
    ("maxJobsPerChild", with_worker(maxJobsPerChild=1), True),
    ("maxJobsPerChild 0", with_worker(maxJobsPerChild=0), False),
    ("maxMemoryPerChild", with_worker(maxMemoryPerChild="512Mi"), True),
    ("maxMemoryPerChild no number", with_worker(maxMemoryPerChild="Gi"), False),
    ("maxMemoryPerChild as a flag", with_worker(maxMemoryPerChild="--burst"), False),
    ("maxMemoryPerChild zero", with_worker(maxMemoryPerChild="0"), False),
    ("poll", with_worker(poll="500ms"), True),
    ("poll with a space", with_worker(poll="1 s"), False),
    ("listen false", with_worker(listen=False), True),
    ("listen a string", with_worker(listen="no"), False),
    ("flags with args", {**BASE, "worker": {"image": "i", "args": ["worker"], "batch": 8}}, False),
    ("listen with args", {**BASE, "worker": {"image": "i", "args": ["worker"], "listen": False}}, False),
    ("scratch", with_worker(scratch={"sizeLimit": "10Gi"}), True),
    ("scratch in memory", with_worker(scratch={"sizeLimit": "1Gi", "medium": "Memory"}), True),
    ("scratch medium disk", with_worker(scratch={"medium": "Disk"}), False),
    ("scratch size fraction", with_worker(scratch={"sizeLimit": "0.5Gi"}), False),
    ("scratch size words", with_worker(scratch={"sizeLimit": "ten gigs"}), False),
    ("model cache", with_worker(modelCache={}), True),
    ("model cache sized", with_worker(modelCache={"sizeLimit": "50Gi", "mountPath": "/cache/models"}), True),
    ("model cache claim", with_worker(modelCache={"claimName": "models", "readOnly": True}), True),
    ("model cache claim sized", with_worker(modelCache={"claimName": "models", "sizeLimit": "1Gi"}), False),
    ("model cache read-only emptyDir", with_worker(modelCache={"readOnly": True}), False),
    ("model cache claim path", with_worker(modelCache={"claimName": "../x"}), False),
    ("model cache at /tmp", with_worker(modelCache={"mountPath": "/tmp"}), False),
    ("model cache in /dev", with_worker(modelCache={"mountPath": "/dev/shm"}), False),
    ("model cache over the image", with_worker(modelCache={"mountPath": "/opt/pgwork/lib"}), False),
    ("model cache relative", with_worker(modelCache={"mountPath": "models"}), False),
    ("model cache trailing slash", with_worker(modelCache={"mountPath": "/models/"}), False),
    ("model cache dot-dot", with_worker(modelCache={"mountPath": "/models/../tmp"}), False),
    ("shm", with_worker(shm={"sizeLimit": "2Gi"}), True),
    ("shm without size", with_worker(shm={}), False),
    (
        "template volume named like the cache",
        with_worker(modelCache={}, podTemplate={"spec": {"volumes": [{"name": "model-cache", "emptyDir": {}}]}}),
        False,
    ),
    (
        "template volume named like shm",
        with_worker(shm={"sizeLimit": "1Gi"}, podTemplate={"spec": {"volumes": [{"name": "dshm", "emptyDir": {}}]}}),
        False,
    ),
    (
        "template volume named like shm without shm",
        with_worker(podTemplate={"spec": {"volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}}),
        True,
    ),
]


@pytest.mark.parametrize(("case", "spec", "valid"), AGREED, ids=[c[0] for c in AGREED])
def test_crd_and_operator_agree_on_the_gpu_fields(case: str, spec: dict[str, Any], valid: bool) -> None:
    assert_agree(case, spec, valid)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (with_worker(batchWait="10m"), "spec.worker.batchWait"),  # a duration past 5m
        (with_worker(poll="5ms"), "spec.worker.poll"),  # below the worker's 10ms
        (with_worker(batchWait="20"), "spec.worker.batchWait"),
        (with_worker(isolation="fork"), "spec.worker.isolation"),
        (with_worker(modelCache={"readOnly": True}), "spec.worker.modelCache.readOnly"),
        (with_worker(scratch={"sizeLimit": "10Gi", "size": "1"}), "spec.worker.scratch.size"),
        (
            with_worker(
                shm={"sizeLimit": "1Gi"},
                podTemplate=mounting("/dev/shm"),
            ),
            "spec.worker.podTemplate.spec.containers[0].volumeMounts[0].mountPath",
        ),
        (
            with_worker(podTemplate=mounting("/tmp")),
            "spec.worker.podTemplate.spec.containers[0].volumeMounts[0].mountPath",
        ),
    ],
)  # fmt: skip
def test_invalid_values_name_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(spec)
    assert info.value.field == field


# ---------------------------------------------------------------- volumes


def test_left_out_the_pod_is_as_before() -> None:
    rendered = pod(BASE)
    assert rendered["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    assert rendered["containers"][0]["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert {e["name"] for e in rendered["containers"][0]["env"]} == {"DATABASE_URL", "POD_NAME"}


def test_scratch_cache_and_shm_volumes() -> None:
    rendered = pod(
        with_worker(
            scratch={"sizeLimit": "10Gi", "medium": "Memory"},
            modelCache={"sizeLimit": "50Gi"},
            shm={"sizeLimit": "4Gi"},
            podTemplate={"spec": {"containers": [{"name": "sidecar", "image": "s:1"}]}},
        )
    )
    assert rendered["volumes"] == [
        {"name": "tmp", "emptyDir": {"sizeLimit": "10Gi", "medium": "Memory"}},
        {"name": "model-cache", "emptyDir": {"sizeLimit": "50Gi"}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "4Gi"}},
    ]
    worker, sidecar = rendered["containers"]
    assert worker["volumeMounts"] == [
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "model-cache", "mountPath": "/models"},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    assert {"name": "HF_HOME", "value": "/models/huggingface"} in worker["env"]
    assert {"name": "TORCH_HOME", "value": "/models/torch"} in worker["env"]
    # The migrate step and sidecars get /tmp only: the cache and GPU memory are the worker's.
    assert rendered["initContainers"][0]["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert sidecar["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]


def test_a_shared_claim_and_the_users_own_cache_variables() -> None:
    rendered = pod(
        with_worker(
            modelCache={"claimName": "hf-models", "readOnly": True, "mountPath": "/cache"},
            env=[{"name": "HF_HOME", "value": "/cache/hub"}],
        )
    )
    assert {"name": "model-cache", "persistentVolumeClaim": {"claimName": "hf-models", "readOnly": True}} in rendered[
        "volumes"
    ]
    worker = rendered["containers"][0]
    assert {"name": "model-cache", "mountPath": "/cache", "readOnly": True} in worker["volumeMounts"]
    cache_env = [e for e in worker["env"] if e["name"] in ("HF_HOME", "TORCH_HOME")]
    assert cache_env == [{"name": "TORCH_HOME", "value": "/cache/torch"}, {"name": "HF_HOME", "value": "/cache/hub"}]


@pytest.mark.parametrize(
    "fields",
    [
        {
            "scratch": {"sizeLimit": "10Gi", "medium": "Memory"},
            "modelCache": {"sizeLimit": "50Gi"},
            "shm": {"sizeLimit": "4Gi"},
        },
        {"modelCache": {"claimName": "models", "readOnly": True}},
    ],
)  # fmt: skip
def test_the_volumes_keep_the_restricted_pod_security_standard(fields: dict[str, Any]) -> None:
    """Restricted allows emptyDir and persistentVolumeClaim volumes; every container stays hardened."""
    allowed = {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
    for manifest in render_all(body(with_worker(**fields)), replicas=1):
        kubernetes_validate.validate(manifest, "1.30", strict=True)
    rendered = pod(with_worker(**fields))
    for volume in rendered["volumes"]:
        assert set(volume) - {"name"} <= allowed, volume
    assert rendered["securityContext"]["runAsNonRoot"] is True
    for container in rendered["containers"] + rendered["initContainers"]:
        assert container["securityContext"]["readOnlyRootFilesystem"] is True


# ---------------------------------------------------------------- capacity


@pytest.mark.parametrize(
    ("fields", "capacity"),
    [({}, 1), ({"concurrency": 4}, 4), ({"batch": 32}, 32), ({"concurrency": 2, "batch": 32}, 64)],
)
def test_a_workers_capacity_is_concurrency_times_batch(fields: dict[str, Any], capacity: int) -> None:
    assert parse_spec(with_worker(**fields)).worker.capacity == capacity


# ---------------------------------------------------------------- the example


def example() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(EXAMPLE_PATH.read_text())
    loaded["metadata"].update(namespace="ml", uid="u-2")
    return loaded


def test_the_gpu_example_is_what_a_gpu_team_starts_from() -> None:
    manifests = render_all(example(), replicas=1)
    for manifest in manifests:
        kubernetes_validate.validate(manifest, "1.30", strict=True)
    spec = parse_spec(example()["spec"])
    assert spec.worker.flags.batch and spec.worker.flags.batch > 1  # a batch handler
    # Scaled on what a pod takes: the target is a whole number of batches per GPU pod.
    assert spec.scaling.target_backlog_per_worker % spec.worker.capacity == 0
    rendered = manifests[0]["spec"]["template"]["spec"]
    worker = rendered["containers"][0]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert rendered["nodeSelector"] and rendered["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert {"name": "dshm", "mountPath": "/dev/shm"} in worker["volumeMounts"]
    assert {"name": "HF_HOME", "value": "/models/huggingface"} in worker["env"]
    assert flags_after_grace(worker["args"]) == [
        "--batch", "32", "--batch-wait", "20ms", "--isolation", "process", "--max-memory-per-child", "24Gi",
    ]  # fmt: skip


# ---------------------------------------------------------------- real kopf against the emulator


@pytest.mark.slow
def test_emulated_gpu_jobqueue_renders_typed_fields_and_scales_on_capacity(
    operator: OperatorThread, client: Kube, namespace: str, queue: Queue, dsn: str
) -> None:
    """The story: a GPU team applies the example; the Deployment carries the typed flags beside the
    generated ones, and the volumes; 40 queued jobs on pods that take 32 at once ask for 2 pods
    (the example's target 64 would ask for 1; a target of 5 alone would ask for 8)."""
    stories.create_secret(client, namespace, "queue-db", dsn)
    spec = example()["spec"]
    spec["database"]["secretName"] = "queue-db"
    spec["scaling"].update(minReplicas=1, targetBacklogPerWorker=5, pollIntervalSeconds=0.2)
    stories.create_jobqueue(client, namespace, "embed", spec)
    deployment = eventually(lambda: stories.deployment(client, namespace, "embed"), what="the GPU Deployment")
    kubernetes_validate.validate(deployment, "1.30", strict=False)
    pod_spec = deployment["spec"]["template"]["spec"]
    worker = pod_spec["containers"][0]
    args = worker["args"]
    assert flags_after_grace(args)[:4] == ["--batch", "32", "--batch-wait", "20ms"]
    assert "--isolation" in args and args[-2:] == ["--id", "$(POD_NAME)"] and "--job-types" in args
    assert {"name": "model-cache", "emptyDir": {"sizeLimit": "50Gi"}} in pod_spec["volumes"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "4Gi"}} in pod_spec["volumes"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "10Gi"}} in pod_spec["volumes"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1

    queue.enqueue_many([NewJob("embed", {"text": f"t{i}"}) for i in range(40)])
    body = eventually(
        lambda: (
            (b := stories.jobqueue(client, namespace, "embed"))
            and b.get("status", {}).get("pending") == 40
            and b["status"].get("desiredReplicas") == 2
            and b
        ),
        what="desiredReplicas 2 for 40 jobs on pods of 32",
    )
    assert "counted as 32/worker" in (stories.condition(body, "Scaling") or {}).get("message", "")
    assert stories.replicas(client, namespace, "embed") == 2
