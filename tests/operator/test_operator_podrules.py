"""Second-round hostile pod templates (issue 24, class 1): only pods the operator can vouch for.

Each row is a template the restricted Pod Security Standard, Kubernetes' own name rules or the
"no Secret on a command line" rule refuses; the operator must name the field and the rule, and the
CRD must refuse the same wherever CEL can say it (test_operator_crd.py holds the agreement rows).
"""

from __future__ import annotations

from typing import Any

import pytest

from pgwork.operator import podrules, podtemplate
from pgwork.operator.fields import SpecError
from pgwork.operator.render import render_deployment
from pgwork.operator.spec import parse_spec

F = "spec.worker.podTemplate.spec"
M = "spec.worker.podTemplate.metadata"


def sidecar(**fields: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "s", "image": "i", **fields}]}}


def volume(**source: Any) -> dict[str, Any]:
    return {"spec": {"volumes": [{"name": "v", **source}]}}


REFUSED: list[tuple[str, dict[str, Any], str, str]] = [  # (case, template, field, words of the rule)
    *[
        (f"{kind} volume", volume(**{kind: {}}), f"{F}.volumes[0].{kind}", "allowed volume types")
        for kind in ("nfs", "iscsi", "cephfs", "flexVolume", "gitRepo", "glusterfs", "rbd", "hostPath", "futureKind")
    ],
    ("two sources", volume(emptyDir={}, secret={"secretName": "x"}), f"{F}.volumes[0].secret", "one source"),
    ("sidecar hostPort", sidecar(ports=[{"containerPort": 80, "hostPort": 80}]), f"{F}.containers[0].ports[0].hostPort",
     "no host ports"),
    ("seccomp unconfined", sidecar(securityContext={"seccompProfile": {"type": "Unconfined"}}),
     f"{F}.containers[0].securityContext.seccompProfile.type", "RuntimeDefault or Localhost"),
    ("apparmor unconfined", sidecar(securityContext={"appArmorProfile": {"type": "Unconfined"}}),
     f"{F}.containers[0].securityContext.appArmorProfile.type", "RuntimeDefault or Localhost"),
    ("proc unmasked", sidecar(securityContext={"procMount": "Unmasked"}),
     f"{F}.containers[0].securityContext.procMount", "Default only"),
    ("host process", sidecar(securityContext={"windowsOptions": {"hostProcess": True}}),
     f"{F}.containers[0].securityContext.windowsOptions.hostProcess", "restricted"),
    ("worker escalation", {"spec": {"containers": [{"name": "worker", "securityContext": {
        "allowPrivilegeEscalation": True}}]}}, f"{F}.containers[0].securityContext.allowPrivilegeEscalation",
     "no privilege escalation"),
    ("apparmor annotation", {"metadata": {"annotations": {
        "container.apparmor.security.beta.kubernetes.io/worker": "unconfined"}}},
     f"{M}.annotations.container.apparmor.security.beta.kubernetes.io/worker", "stay confined"),
    ("seccomp pod annotation", {"metadata": {"annotations": {
        "seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}},
     f"{M}.annotations.seccomp.security.alpha.kubernetes.io/pod", "stay confined"),
    ("seccomp container annotation", {"metadata": {"annotations": {
        "container.seccomp.security.alpha.kubernetes.io/s": "Unconfined"}}},
     f"{M}.annotations.container.seccomp.security.alpha.kubernetes.io/s", "stay confined"),
    ("label value too long", {"metadata": {"labels": {"team": "a" * 64}}}, f"{M}.labels.team", "63 characters"),
    ("label value with space", {"metadata": {"labels": {"team": "ml ops"}}}, f"{M}.labels.team", "label value"),
    ("label value ends with dash", {"metadata": {"labels": {"team": "ml-"}}}, f"{M}.labels.team", "label value"),
    ("label value newline", {"metadata": {"labels": {"team": "ml\n"}}}, f"{M}.labels.team", "label value"),
    ("label key bad", {"metadata": {"labels": {"a b": "x"}}}, f"{M}.labels.a b", "label key"),
    ("label key bad prefix", {"metadata": {"labels": {"Ex_ample/a": "x"}}}, f"{M}.labels.Ex_ample/a", "label key"),
    ("annotation key bad", {"metadata": {"annotations": {"-a": "x"}}}, f"{M}.annotations.-a", "annotation key"),
    ("sidecar secret on argv", sidecar(env=[{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "t"}}}],
                                       args=["--token=$(T)"]), f"{F}.containers[0].args", "command line"),
    ("sidecar envFrom name on argv", sidecar(envFrom=[{"secretRef": {"name": "s"}}], command=["run", "$(TOKEN)"]),
     f"{F}.containers[0].command", "command line"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "template", "field", "rule"), REFUSED, ids=[r[0] for r in REFUSED])
def test_the_operator_refuses_naming_the_field_and_the_rule(
    case: str, template: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(podtemplate.TemplateRefused) as caught:
        podtemplate.check(template)
    assert caught.value.field == field
    assert rule in caught.value.problem


ALLOWED = [
    *[volume(**{kind: {}}) for kind in sorted(podrules.ALLOWED_VOLUMES)],
    sidecar(ports=[{"containerPort": 80}], securityContext={"seccompProfile": {"type": "RuntimeDefault"}}),
    sidecar(securityContext={"appArmorProfile": {"type": "Localhost", "localhostProfile": "p"}}),
    sidecar(env=[{"name": "MODE", "value": "fast"}], args=["--mode=$(MODE)", "$$(TOKEN)"]),
    {"metadata": {"labels": {"example.com/team": "ml.ops_1", "empty": ""}}},
    {"metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/s": "runtime/default",
                                  "note": "any text at all: spaces, / and ."}}},
]  # fmt: skip


@pytest.mark.parametrize("template", ALLOWED)
def test_what_the_restricted_standard_allows_passes(template: dict[str, Any]) -> None:
    podtemplate.check(template)


BASE: dict[str, Any] = {"database": {"secretName": "db"}, "jobTypes": ["ocr"], "worker": {"image": "i:1", "app": "m"}}


def worker(**fields: Any) -> dict[str, Any]:
    return {**BASE, "worker": {**BASE["worker"], **fields}}


SECRET_ENV = {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "keys", "key": "api"}}}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (worker(args=["worker", "--app", "m", "--dsn", "$(DATABASE_URL)"]), "spec.worker.args"),
        (worker(command=["sh", "-c", "pgwork worker --dsn=$(DATABASE_URL)"]), "spec.worker.command"),
        (worker(env=[SECRET_ENV], args=["worker", "--app", "m", "--key=$(API_KEY)"]), "spec.worker.args"),
        # A name envFrom may bring from a Secret is not known to be plain.
        (worker(args=["worker", "--app", "m", "$(FROM_ENVFROM)"],
                podTemplate={"spec": {"containers": [{"name": "worker", "envFrom": [{"secretRef": {"name": "k"}}]}]}}),
         "spec.worker.args"),
        (worker(args=["worker", "--app", "m", "$(K)"], podTemplate={"spec": {"containers": [{"name": "worker", "env": [
            {"name": "K", "valueFrom": {"secretKeyRef": {"name": "k", "key": "k"}}}]}]}}), "spec.worker.args"),
        (worker(args=["worker", "--app", "m", "$$$(DATABASE_URL)"]), "spec.worker.args"),
    ],
)  # fmt: skip
def test_no_secret_backed_variable_reaches_the_command_line(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    assert caught.value.field == field
    assert "command line" in caught.value.problem


@pytest.mark.parametrize(
    "spec",
    [
        worker(args=["worker", "--app", "m", "--name=$(POD_NAME)"]),
        worker(env=[{"name": "LEVEL", "value": "debug"}], args=["worker", "--app", "m", "--log=$(LEVEL)"]),
        worker(args=["worker", "--app", "m", "--literal=$$(DATABASE_URL)"]),
    ],
)
def test_plain_variables_may_still_be_expanded(spec: dict[str, Any]) -> None:
    parse_spec(spec)


def test_worker_pods_hold_no_token_unless_the_jobqueue_asks() -> None:
    body = {"metadata": {"name": "ocr", "namespace": "ns", "uid": "u"}}
    plain = render_deployment(body, parse_spec(BASE), 1)
    assert plain["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    asked = render_deployment(body, parse_spec(worker(automountServiceAccountToken=True)), 1)
    assert asked["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
