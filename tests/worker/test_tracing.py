"""Trace context travels on the job row from enqueue to the worker's CONSUMER span."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pgwork_test_app  # noqa: F401 - registers the handlers
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from pgwork import tracing
from pgwork.db import Queue
from pgwork.worker.options import WorkerOptions
from pgwork.worker.registry import REGISTRY
from pgwork.worker.runtime import Worker
from tests.support.workers import ROOT, worker_env


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def run_burst(queue: Queue, provider: TracerProvider) -> None:
    options = WorkerOptions(app="pgwork_test_app", worker_id="tracer", burst=True, metrics_port=0)
    thread = threading.Thread(target=Worker(queue, options, REGISTRY, tracer_provider=provider).run, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def test_consumer_span_continues_the_producers_trace(
    queue: Queue, traced: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = traced
    tracer = provider.get_tracer("test-producer")
    with tracer.start_as_current_span("upload invoice"):
        job_id = tracing.enqueue(queue, "noop", {"n": 1}, tracer_provider=provider)
        failing_id = tracing.enqueue(queue, "fail", {}, tracer_provider=provider, max_attempts=1)
    row = queue.job(job_id)
    assert row is not None and row.trace_context["traceparent"].startswith("00-")
    run_burst(queue, provider)

    spans = exporter.get_finished_spans()
    upload = by_name(spans, "upload invoice")
    sends = [s for s in spans if s.name == "send noop"]
    assert len(sends) == 1
    send = sends[0]
    assert send.kind is SpanKind.PRODUCER and send.parent is not None
    assert send.parent.span_id == upload.context.span_id
    assert send.attributes is not None and send.attributes["messaging.message.id"] == str(job_id)

    process = by_name(spans, "process noop")
    assert process.kind is SpanKind.CONSUMER
    assert process.context.trace_id == upload.context.trace_id
    assert process.parent is not None and process.parent.span_id == send.context.span_id
    assert [link.context.span_id for link in process.links] == [send.context.span_id]
    attrs: dict[str, Any] = dict(process.attributes or {})
    assert attrs["messaging.system"] == "pgwork"
    assert attrs["messaging.operation.type"] == "process"
    assert attrs["messaging.destination.name"] == "noop"
    assert attrs["messaging.message.id"] == str(job_id)
    assert attrs["messaging.pgwork.job.attempt"] == 1
    assert attrs["messaging.pgwork.job.outcome"] == "succeeded"
    assert "error.type" not in attrs
    assert process.status.status_code is StatusCode.UNSET

    failed = by_name(spans, "process fail")
    assert failed.attributes is not None
    assert failed.attributes["error.type"] == "RuntimeError"
    assert failed.attributes["messaging.pgwork.job.outcome"] == "dead"
    assert failed.attributes["messaging.message.id"] == str(failing_id)
    assert failed.status.status_code is StatusCode.ERROR


def test_job_without_trace_context_gets_a_root_span(
    queue: Queue, traced: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = traced
    queue.enqueue("noop", {"n": 2})
    run_burst(queue, provider)
    process = by_name(exporter.get_finished_spans(), "process noop")
    assert process.parent is None and process.links == ()


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({}, []),
        ({"OTEL_TRACES_EXPORTER": "none"}, []),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["console"]),
        ({"OTEL_TRACES_EXPORTER": "console, otlp"}, ["console", "otlp"]),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, []),
    ],
)
def test_exporter_names_follow_the_otel_variables(env: dict[str, str], names: list[str]) -> None:
    assert tracing.exporter_names(env) == names


def test_unknown_exporter_is_a_clear_error() -> None:
    with pytest.raises(tracing.TracingConfigError, match="no exporter named 'nosuch'"):
        tracing.configure_from_env({"OTEL_TRACES_EXPORTER": "nosuch"})


def console_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed, among other output lines."""
    spans, block = [], []
    for line in text.splitlines():
        if line == "{":
            block = [line]
        elif block:
            block.append(line)
            if line == "}":
                spans.append(json.loads("\n".join(block)))
                block = []
    return spans


@pytest.mark.slow
def test_cli_producer_and_worker_export_one_trace_with_otel_env(dsn: str) -> None:
    env = worker_env(OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="pgwork-test")
    base = [sys.executable, "-m", "pgwork.cli", "--dsn", dsn]
    enq = subprocess.run(
        [*base, "enqueue", "noop", "--payload", '{"n": 5}'],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=30,
    )
    send = next(s for s in console_spans(enq.stdout) if s["name"] == "send noop")
    job_id = enq.stdout.strip().splitlines()[-1]
    assert send["kind"] == "SpanKind.PRODUCER" and send["attributes"]["messaging.message.id"] == job_id
    work = subprocess.run(
        [*base, "worker", "--app", "pgwork_test_app", "--id", "w", "--burst", "--metrics-port", "0"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=30,
    )
    process = next(s for s in console_spans(work.stdout) if s["name"] == "process noop")
    assert process["kind"] == "SpanKind.CONSUMER"
    assert process["context"]["trace_id"] == send["context"]["trace_id"]
    assert process["parent_id"] == send["context"]["span_id"]
    assert process["resource"]["attributes"]["service.name"] == "pgwork-test"


def test_an_abandoned_attempts_span_ends_with_the_timeout_as_its_error(
    queue: Queue, traced: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    """The watchdog writes an abandoned attempt's outcome without its thread: the attempt's span
    must end there too, recording the timeout, not stay open for a thread that may never return."""
    from pgwork.backoff import Backoff
    from pgwork.worker.job import Job
    from pgwork.worker.registry import Registry
    from tests.support.waiting import wait_for

    provider, exporter = traced
    registry = Registry()
    release = threading.Event()

    def hung(job: Job) -> str:
        release.wait(60)  # ignores job.should_stop, as a hung library call would
        return "late"

    registry.register("hung", hung, timeout="300ms", backoff=Backoff(base=300, cap=300, jitter=0))
    job_id = queue.enqueue("hung", {})
    options = WorkerOptions(app="hung", worker_id="tracer-hung", metrics_port=0, heartbeat=0.2, lease=3)
    worker = Worker(queue, options, registry, tracer_provider=provider)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        spans = wait_for(
            lambda: [s for s in exporter.get_finished_spans() if s.name == "process hung"],
            20,
            what="the abandoned attempt's span ended",
        )
    finally:
        release.set()
        worker.request_stop()
        thread.join(15)
    assert not thread.is_alive()
    (span,) = spans
    assert span.status.status_code is StatusCode.ERROR
    attrs: dict[str, Any] = dict(span.attributes or {})
    assert attrs["error.type"] == "timed_out"
    assert "timed out after 300ms (handler did not return)" in (span.status.description or "")
    assert attrs[tracing.JOB_OUTCOME] == "retry"
    row = queue.job(job_id)
    assert row is not None and "handler did not return" in (row.last_error or "")
