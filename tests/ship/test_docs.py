"""The shipping docs: links resolve, YAML examples parse and agree with the CRD, and the KEDA
query runs on a real PostgreSQL and counts what it claims to."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
import yaml

from pgwork.db import Queue
from tests.support.ship import ROOT, load_yaml

DOCS = ROOT / "docs"
SHIP_DOCS = ["install.md", "jobqueue-reference.md", "keda.md", "grafana.md", "runbooks.md"]


def yaml_blocks(page: str) -> list[Any]:
    text = (DOCS / page).read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)
    return [doc for block in blocks for doc in yaml.safe_load_all(block)]


@pytest.mark.parametrize("page", SHIP_DOCS)
def test_relative_links_resolve(page: str) -> None:
    # Code spans are not links: the reference quotes name patterns like `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
    text = re.sub(r"`[^`\n]*`", "", (DOCS / page).read_text())
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (DOCS / target).exists(), f"{page} links to missing {target}"


@pytest.mark.parametrize("page", ["keda.md", "grafana.md"])
def test_yaml_examples_parse(page: str) -> None:
    assert yaml_blocks(page)


def test_keda_targets_the_jobqueue_scale_subresource() -> None:
    crd = load_yaml(ROOT / "pgwork" / "operator" / "crd.yaml")
    version = crd["spec"]["versions"][0]
    assert version["subresources"]["scale"]["specReplicasPath"] == ".spec.replicas"
    scaled = next(d for d in yaml_blocks("keda.md") if d and d.get("kind") == "ScaledObject")
    ref = scaled["spec"]["scaleTargetRef"]
    assert ref["apiVersion"] == f"{crd['spec']['group']}/{version['name']}"
    assert ref["kind"] == crd["spec"]["names"]["kind"]


def keda_query() -> str:
    scaled = next(d for d in yaml_blocks("keda.md") if d and d.get("kind") == "ScaledObject")
    return str(scaled["spec"]["triggers"][0]["metadata"]["query"])


def test_keda_query_counts_ready_jobs_of_the_queue_types(queue: Queue, dsn: str) -> None:
    for i in range(3):
        queue.enqueue("scan", {"page": i})
    queue.enqueue("ocr", {"page": 1})
    queue.enqueue("ocr", {"page": 2}, delay=3600)  # scheduled, not ready
    queue.enqueue("thumbnail", {"page": 1})  # another queue's type
    with psycopg.connect(dsn) as conn:
        (count,) = conn.execute(keda_query()).fetchone() or (None,)
    assert count == 4


def test_keda_query_is_zero_on_an_empty_queue(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        (count,) = conn.execute(keda_query()).fetchone() or (None,)
    assert count == 0


def test_install_doc_covers_helm_and_kubectl() -> None:
    text = (DOCS / "install.md").read_text()
    assert "helm install pgwork charts/pgwork" in text
    assert "kubectl apply --server-side -f manifests/" in text
    assert "kubectl apply --server-side -f charts/pgwork/crds/" in text
    for name in ("00-crd.yaml", "01-namespace.yaml", "10-operator.yaml"):
        assert (ROOT / "manifests" / name).is_file()
        assert name in text


def test_install_doc_values_exist_in_the_chart() -> None:
    values = load_yaml(ROOT / "charts" / "pgwork" / "values.yaml")
    text = (DOCS / "install.md").read_text()
    for dotted in re.findall(r"^\| `([a-zA-Z.]+)`", text, flags=re.MULTILINE):
        node: Any = values
        for part in dotted.split("."):
            assert isinstance(node, dict) and part in node, f"install.md documents unknown value {dotted}"
            node = node[part]


def test_docs_name_no_registry_host() -> None:
    for page in [*SHIP_DOCS, "../charts/pgwork/values.yaml"]:
        text = (DOCS / page).read_text()
        assert "ghcr.io" not in text and "docker.io" not in text, page
