"""spec.worker.podTemplate: what passes through, what merges, what the operator refuses."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from pgwork.operator import podtemplate
from pgwork.operator.fields import SpecError
from pgwork.operator.kube import Kube
from pgwork.operator.render import CONTAINER_SECURITY, TMP_MOUNT, render_all, selector_labels
from tests.support import stories
from tests.support.operator import OperatorThread, eventually
from tests.support.waiting import stays

SECURITY = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def operator_pod() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"pgwork.dev/jobqueue": "ocr", "app": "pgwork"}, "annotations": {"a": "op"}},
        "spec": {
            "securityContext": {"runAsNonRoot": True},
            "volumes": [{"name": "tmp", "emptyDir": {}}],
            "containers": [
                {
                    "name": "worker",
                    "command": ["pgwork"],
                    "env": [{"name": "DATABASE_URL", "value": "op"}, {"name": "LOG", "value": "op"}],
                    "resources": {"requests": {"cpu": "1"}},
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                    "securityContext": SECURITY,
                }
            ],
        },
    }


def merged(template: dict[str, Any]) -> dict[str, Any]:
    return podtemplate.merge(
        podtemplate.check(template), operator_pod(), SECURITY, ({"name": "tmp", "mountPath": "/tmp"},)
    )


def worker_of(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "worker")


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
SPREAD = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]

# (template, a function of the merged pod, what it must equal)
MERGES: list[tuple[str, dict[str, Any], Any, Any]] = [
    ("no template changes nothing", {}, lambda p: p, operator_pod()),
    (
        "user labels added, operator labels win",
        {"metadata": {"labels": {"team": "ml", "pgwork.dev/jobqueue": "evil"}}},
        lambda p: p["metadata"]["labels"],
        {"team": "ml", "pgwork.dev/jobqueue": "ocr", "app": "pgwork"},
    ),
    (
        "annotations added, operator annotations win",
        {"metadata": {"annotations": {"a": "user", "b": "user"}}},
        lambda p: p["metadata"]["annotations"],
        {"a": "op", "b": "user"},
    ),
    (
        "tolerations pass through",
        {"spec": {"tolerations": [GPU_TOLERATION]}},
        lambda p: p["spec"]["tolerations"],
        [GPU_TOLERATION],
    ),
    (
        "nodeSelector passes",
        {"spec": {"nodeSelector": {"gpu": "a100"}}},
        lambda p: p["spec"]["nodeSelector"],
        {"gpu": "a100"},
    ),
    ("affinity passes", {"spec": {"affinity": AFFINITY}}, lambda p: p["spec"]["affinity"], AFFINITY),
    (
        "spread passes",
        {"spec": {"topologySpreadConstraints": SPREAD}},
        lambda p: p["spec"]["topologySpreadConstraints"],
        SPREAD,
    ),
    ("priority passes", {"spec": {"priorityClassName": "gpu"}}, lambda p: p["spec"]["priorityClassName"], "gpu"),
    (
        "runtime class passes",
        {"spec": {"runtimeClassName": "nvidia"}},
        lambda p: p["spec"]["runtimeClassName"],
        "nvidia",
    ),
    (
        "pull secrets pass",
        {"spec": {"imagePullSecrets": [{"name": "reg"}]}},
        lambda p: p["spec"]["imagePullSecrets"],
        [{"name": "reg"}],
    ),
    (
        "volumes are appended after the operator's",
        {"spec": {"volumes": [{"name": "models", "emptyDir": {}}]}},
        lambda p: [v["name"] for v in p["spec"]["volumes"]],
        ["tmp", "models"],
    ),
    (
        "worker container merges volumeMounts",
        {"spec": {"containers": [{"name": "worker", "volumeMounts": [{"name": "models", "mountPath": "/models"}]}]}},
        lambda p: worker_of(p)["volumeMounts"],
        [{"name": "tmp", "mountPath": "/tmp"}, {"name": "models", "mountPath": "/models"}],
    ),
    (
        "worker container merges envFrom",
        {"spec": {"containers": [{"name": "worker", "envFrom": [{"secretRef": {"name": "keys"}}]}]}},
        lambda p: worker_of(p)["envFrom"],
        [{"secretRef": {"name": "keys"}}],
    ),
    (
        "worker resources merge, user's GPU limit added",
        {"spec": {"containers": [{"name": "worker", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}},
        lambda p: worker_of(p)["resources"],
        {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": 1}},
    ),
    (
        "env the operator sets cannot be overridden; new env is added",
        {
            "spec": {
                "containers": [
                    {"name": "worker", "env": [{"name": "LOG", "value": "user"}, {"name": "X", "value": "1"}]}
                ]
            }
        },
        lambda p: worker_of(p)["env"],
        [{"name": "DATABASE_URL", "value": "op"}, {"name": "LOG", "value": "op"}, {"name": "X", "value": "1"}],
    ),
    (
        "the worker's securityContext stays the operator's",
        {"spec": {"containers": [{"name": "worker", "securityContext": {"readOnlyRootFilesystem": False}}]}},
        lambda p: worker_of(p)["securityContext"],
        SECURITY,
    ),
    (
        "the worker's command stays the operator's",
        {"spec": {"containers": [{"name": "worker", "envFrom": []}]}},
        lambda p: worker_of(p)["command"],
        ["pgwork"],
    ),
    (
        "a sidecar is added with the same hardening and a /tmp",
        {"spec": {"containers": [{"name": "proxy", "image": "proxy:1", "securityContext": {"runAsUser": 2000}}]}},
        lambda p: (p["spec"]["containers"][1]["securityContext"], p["spec"]["containers"][1]["volumeMounts"]),
        (SECURITY, [{"name": "tmp", "mountPath": "/tmp"}]),
    ),
    (
        "the pod securityContext stays the operator's",
        {"spec": {"nodeSelector": {"a": "b"}}},
        lambda p: p["spec"]["securityContext"],
        {"runAsNonRoot": True},
    ),
]


@pytest.mark.parametrize(("case", "template", "pick", "expected"), MERGES, ids=[m[0] for m in MERGES])
def test_merge(case: str, template: dict[str, Any], pick: Any, expected: Any) -> None:
    assert pick(merged(template)) == expected, case


def test_merge_does_not_change_its_inputs() -> None:
    template = {"spec": {"containers": [{"name": "worker", "envFrom": [{"secretRef": {"name": "k"}}]}]}}
    before, pod = copy.deepcopy(template), operator_pod()
    podtemplate.merge(template, pod, SECURITY)
    assert template == before and pod == operator_pod()


F = "spec.worker.podTemplate.spec"
REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"spec": {"hostNetwork": True}}, f"{F}.hostNetwork"),
    ({"spec": {"hostPID": True}}, f"{F}.hostPID"),
    ({"spec": {"hostIPC": True}}, f"{F}.hostIPC"),
    ({"spec": {"securityContext": {"runAsUser": 0}}}, f"{F}.securityContext"),
    ({"spec": {"serviceAccountName": "admin"}}, f"{F}.serviceAccountName"),
    ({"spec": {"automountServiceAccountToken": True}}, f"{F}.automountServiceAccountToken"),
    ({"spec": {"initContainers": []}}, f"{F}.initContainers"),
    ({"spec": {"nodeName": "n1"}}, f"{F}.nodeName"),
    ({"spec": {"bogus": 1}}, f"{F}.bogus"),
    ({"spec": {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}}, f"{F}.volumes[0].hostPath"),
    ({"spec": {"volumes": [{"name": "tmp", "emptyDir": {}}]}}, f"{F}.volumes[0].name"),
    (
        {"spec": {"containers": [{"name": "worker", "securityContext": {"privileged": True}}]}},
        f"{F}.containers[0].securityContext.privileged",
    ),
    (
        {
            "spec": {
                "containers": [{"name": "s", "image": "i", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]
            }
        },
        f"{F}.containers[0].securityContext.capabilities.add",
    ),
    (
        {"spec": {"containers": [{"name": "s", "image": "i", "securityContext": {"allowPrivilegeEscalation": True}}]}},
        f"{F}.containers[0].securityContext.allowPrivilegeEscalation",
    ),
    (
        {"spec": {"containers": [{"name": "worker", "env": [{"name": "DATABASE_URL", "value": "x"}]}]}},
        f"{F}.containers[0].env[0].name",
    ),
    (
        {"spec": {"containers": [{"name": "s", "image": "i", "env": [{"name": "POD_NAME", "value": "x"}]}]}},
        f"{F}.containers[0].env[0].name",
    ),
    ({"spec": {"containers": [{"name": "worker", "command": ["sh"]}]}}, f"{F}.containers[0].command"),
    ({"spec": {"containers": [{"name": "worker", "args": ["x"]}]}}, f"{F}.containers[0].args"),
    ({"spec": {"containers": [{"name": "worker", "image": "evil"}]}}, f"{F}.containers[0].image"),
    ({"spec": {"containers": [{"name": "worker", "ports": []}]}}, f"{F}.containers[0].ports"),
    ({"spec": {"containers": [{"name": "migrate", "image": "i"}]}}, f"{F}.containers[0].name"),
    ({"spec": {"containers": [{"name": "s"}]}}, f"{F}.containers[0].image"),
    ({"spec": {"containers": [{"image": "i"}]}}, f"{F}.containers[0].name"),
    ({"metadata": {"name": "x"}}, "spec.worker.podTemplate.metadata.name"),
    ({"metadata": {"labels": {"a": 1}}}, "spec.worker.podTemplate.metadata.labels.a"),
    ({"kind": "Pod"}, "spec.worker.podTemplate.kind"),
    ({"spec": {"tolerations": "x"}}, None),  # not a list: the Kubernetes schema refuses it
]


@pytest.mark.parametrize(("template", "field"), [r for r in REFUSED if r[1]])
def test_hostile_templates_are_refused_naming_the_field(template: dict[str, Any], field: str) -> None:
    with pytest.raises(podtemplate.TemplateRefused) as caught:
        podtemplate.check(template)
    assert caught.value.field == field
    assert str(caught.value).startswith(field + ":")


def jobqueue(template: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "pgwork.dev/v1alpha1",
        "kind": "JobQueue",
        "metadata": {"name": "ocr", "namespace": "team-a", "uid": "u-1"},
        "spec": {
            "database": {"secretName": "db"},
            "jobTypes": ["ocr"],
            "worker": {"image": "img:1", "app": "myapp.jobs", "podTemplate": template},
        },
    }


GPU_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "ml"}, "annotations": {"cost-center": "gpu"}},
    "spec": {
        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
        "tolerations": [GPU_TOLERATION],
        "priorityClassName": "gpu-batch",
        "runtimeClassName": "nvidia",
        "imagePullSecrets": [{"name": "registry"}],
        "volumes": [{"name": "models", "persistentVolumeClaim": {"claimName": "model-cache"}}],
        "containers": [
            {
                "name": "worker",
                "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "16Gi"}},
                "volumeMounts": [{"name": "models", "mountPath": "/models"}],
                "envFrom": [{"secretRef": {"name": "llm-api-keys"}}],
            },
            {"name": "metrics-proxy", "image": "proxy:1", "args": ["--port=9200"]},
        ],
    },
}


def test_a_gpu_jobqueue_renders_a_valid_deployment_with_its_fields() -> None:
    deployment = render_all(jobqueue(GPU_TEMPLATE), replicas=1)[0]
    kubernetes_validate.validate(deployment, "1.30", strict=True)
    pod = deployment["spec"]["template"]
    spec = pod["spec"]
    assert spec["tolerations"] == [GPU_TOLERATION]
    assert spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert spec["runtimeClassName"] == "nvidia" and spec["priorityClassName"] == "gpu-batch"
    worker = spec["containers"][0]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert {"name": "models", "mountPath": "/models"} in worker["volumeMounts"]
    assert worker["envFrom"] == [{"secretRef": {"name": "llm-api-keys"}}]
    assert worker["env"][0]["name"] == "DATABASE_URL"
    assert worker["securityContext"] == CONTAINER_SECURITY
    sidecar = spec["containers"][1]
    assert sidecar["securityContext"] == CONTAINER_SECURITY and TMP_MOUNT in sidecar["volumeMounts"]
    assert pod["metadata"]["labels"]["team"] == "ml"
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert spec["securityContext"]["runAsNonRoot"] is True


def test_the_gpu_example_renders_a_deployment_the_kubernetes_schema_accepts() -> None:
    example = yaml.safe_load((Path(__file__).resolve().parents[2] / "manifests/examples/jobqueue-gpu.yaml").read_text())
    example["metadata"].update(namespace="ml", uid="u-2")
    for manifest in render_all(example, replicas=1):
        kubernetes_validate.validate(manifest, "1.30", strict=True)
    pod = render_all(example)[0]["spec"]["template"]["spec"]
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert {"name": "model-cache", "mountPath": "/models"} in pod["containers"][0]["volumeMounts"]


def test_selector_labels_cannot_be_overridden() -> None:
    hostile = {"metadata": {"labels": {k: "other" for k in selector_labels("ocr")}}}
    pod = render_all(jobqueue(hostile))[0]["spec"]["template"]
    assert selector_labels("ocr").items() <= pod["metadata"]["labels"].items()


def test_a_refused_template_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match=r"^spec\.worker\.podTemplate\.spec\.hostNetwork: "):
        render_all(jobqueue({"spec": {"hostNetwork": True}}))


# ---------------------------------------------------------------- real kopf against the emulator


@pytest.mark.slow
def test_emulated_gpu_jobqueue_yields_a_deployment_with_its_fields(
    operator: OperatorThread, client: Kube, namespace: str, dsn: str
) -> None:
    stories.create_secret(client, namespace, "queue-db", dsn)
    stories.create_jobqueue(client, namespace, "gpu", stories.spec(worker={"podTemplate": GPU_TEMPLATE}))
    deployment = eventually(lambda: stories.deployment(client, namespace, "gpu"), what="the GPU Deployment")
    kubernetes_validate.validate(deployment, "1.30", strict=False)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["tolerations"] == [GPU_TOLERATION] and pod["runtimeClassName"] == "nvidia"
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert pod["containers"][0]["envFrom"] == [{"secretRef": {"name": "llm-api-keys"}}]
    assert pod["containers"][1]["securityContext"] == CONTAINER_SECURITY


@pytest.mark.slow
@pytest.mark.parametrize(
    ("template", "field"),
    [
        ({"spec": {"containers": [{"name": "worker", "securityContext": {"privileged": True}}]}},
         f"{F}.containers[0].securityContext.privileged"),
        ({"spec": {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}}, f"{F}.volumes[0].hostPath"),
        ({"spec": {"containers": [{"name": "worker", "env": [{"name": "DATABASE_URL", "value": "postgresql://evil"}]}]}},
         f"{F}.containers[0].env[0].name"),
        # Second round (issue 24): the condition names the field and the rule.
        ({"spec": {"volumes": [{"name": "share", "nfs": {"server": "evil", "path": "/"}}]}},
         f"{F}.volumes[0].nfs: nfs volumes are refused (allowed volume types (restricted Pod Security Standard)"),
    ],
)  # fmt: skip
def test_emulated_hostile_template_is_refused(
    operator: OperatorThread, client: Kube, namespace: str, dsn: str, template: dict[str, Any], field: str
) -> None:
    stories.create_secret(client, namespace, "queue-db", dsn)
    stories.create_jobqueue(client, namespace, "bad", stories.spec(worker={"podTemplate": template}))
    body = eventually(
        lambda: (
            (b := stories.jobqueue(client, namespace, "bad"))
            and (stories.condition(b, "Ready") or {}).get("reason") == "InvalidSpec"
            and b
        ),
        what="Ready=False InvalidSpec",
    )
    assert (stories.condition(body, "Ready") or {})["message"].startswith(field + ":")
    stays(lambda: stories.deployment(client, namespace, "bad") is None, duration=0.5, what="no Deployment")


@pytest.mark.slow
def test_emulated_selector_labels_are_neutralised(
    operator: OperatorThread, client: Kube, namespace: str, dsn: str
) -> None:
    stories.create_secret(client, namespace, "queue-db", dsn)
    hostile = {"metadata": {"labels": {k: "hijack" for k in selector_labels("sel")}}}
    stories.create_jobqueue(client, namespace, "sel", stories.spec(worker={"podTemplate": hostile}))
    deployment = eventually(lambda: stories.deployment(client, namespace, "sel"), what="the Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector_labels("sel").items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"] == selector_labels("sel")
