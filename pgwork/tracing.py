"""OpenTelemetry for pgwork: the producer's trace context travels on the job row.

- `current_trace_context()` injects the active context (W3C `traceparent`/`tracestate`, plus
  baggage, through the globally configured propagator) into a dict stored in `jobs.trace_context`.
- `enqueue()` does that around `Queue.enqueue`, inside a PRODUCER span `send <job_type>`.
- The worker extracts it and runs each attempt in a CONSUMER span `process <job_type>`
  (messaging semantic conventions: messaging.system "pgwork", operation type "process",
  destination = job type, message id = job id, attempt as `messaging.pgwork.job.attempt`).
- Nothing is exported unless the standard variables ask for it: `OTEL_TRACES_EXPORTER`
  (`console`, `otlp` with opentelemetry-exporter-otlp installed, ...) or an
  `OTEL_EXPORTER_OTLP[_TRACES]_ENDPOINT`. Service name and resource come from
  `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from pgwork.errors import PgworkError
from pgwork.models import Enqueued, NewJob

if TYPE_CHECKING:
    from pgwork.db import AnyConnection, Queue

SYSTEM = "pgwork"
TRACER_NAME = "pgwork"

# Attribute names from the messaging semantic conventions (kept literal: the incubating
# semconv module moves between releases).
MESSAGING_SYSTEM = "messaging.system"
MESSAGING_OPERATION_TYPE = "messaging.operation.type"
MESSAGING_OPERATION_NAME = "messaging.operation.name"
MESSAGING_DESTINATION_NAME = "messaging.destination.name"
MESSAGING_MESSAGE_ID = "messaging.message.id"
MESSAGING_CLIENT_ID = "messaging.client.id"
MESSAGING_BATCH_COUNT = "messaging.batch.message_count"
# System-specific attributes live under messaging.<system>.*
JOB_ATTEMPT = "messaging.pgwork.job.attempt"
JOB_MAX_ATTEMPTS = "messaging.pgwork.job.max_attempts"
JOB_OUTCOME = "messaging.pgwork.job.outcome"
ERROR_TYPE = "error.type"


class TracingConfigError(PgworkError):
    pass


def current_trace_context() -> dict[str, str]:
    """The active trace context as W3C headers, ready for `Queue.enqueue(trace_context=...)`."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def extract(trace_context: Mapping[str, str]) -> otel_context.Context:
    return propagate.extract(dict(trace_context))


@contextmanager
def producer_span(job_type: str, tracer_provider: trace.TracerProvider | None = None) -> Iterator[trace.Span]:
    tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
    with tracer.start_as_current_span(
        f"send {job_type}",
        kind=SpanKind.PRODUCER,
        attributes={
            MESSAGING_SYSTEM: SYSTEM,
            MESSAGING_OPERATION_TYPE: "send",
            MESSAGING_OPERATION_NAME: "enqueue",
            MESSAGING_DESTINATION_NAME: job_type,
        },
    ) as span:
        yield span


def enqueue(
    queue: Queue,
    job_type: str,
    payload: dict[str, Any] | None = None,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    conn: AnyConnection | None = None,
    **options: Any,
) -> int:
    """`Queue.enqueue` inside a PRODUCER span whose context is stored on the job row."""
    with producer_span(job_type, tracer_provider) as span:
        job_id = queue.enqueue(job_type, payload, trace_context=current_trace_context(), conn=conn, **options)
        span.set_attribute(MESSAGING_MESSAGE_ID, str(job_id))
        return job_id


def enqueue_job(queue: Queue, job: NewJob, *, tracer_provider: trace.TracerProvider | None = None) -> Enqueued:
    """`Queue.enqueue_outcomes` for one job inside a PRODUCER span (as `enqueue`): says whether
    the job was created or its unique key was taken already."""
    with producer_span(job.job_type, tracer_provider) as span:
        found = queue.enqueue_outcomes([dataclasses.replace(job, trace_context=current_trace_context())])[0]
        span.set_attribute(MESSAGING_MESSAGE_ID, str(found.id))
        return found


def consumer_span_attributes(
    job_id: int, job_type: str, attempt: int, max_attempts: int, worker_id: str
) -> dict[str, str | int]:
    return {
        MESSAGING_SYSTEM: SYSTEM,
        MESSAGING_OPERATION_TYPE: "process",
        MESSAGING_OPERATION_NAME: "process",
        MESSAGING_DESTINATION_NAME: job_type,
        MESSAGING_MESSAGE_ID: str(job_id),
        MESSAGING_CLIENT_ID: worker_id,
        JOB_ATTEMPT: attempt,
        JOB_MAX_ATTEMPTS: max_attempts,
    }


@contextmanager
def consumer_span(
    tracer: trace.Tracer, trace_context: Mapping[str, str], attributes: dict[str, str | int], job_type: str
) -> Iterator[trace.Span]:
    """A CONSUMER span for one attempt, child of (and linked to) the producer's context."""
    parent = extract(trace_context)
    producer = trace.get_current_span(parent).get_span_context()
    links = [Link(producer)] if producer.is_valid else []
    with tracer.start_as_current_span(
        f"process {job_type}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


def start_consumer_span(
    tracer: trace.Tracer, trace_context: Mapping[str, str], attributes: dict[str, str | int], job_type: str
) -> trace.Span:
    """`consumer_span` for a caller that ends the span itself, later, on another thread (the
    worker ends it once the attempt's outcome is written)."""
    parent = extract(trace_context)
    producer = trace.get_current_span(parent).get_span_context()
    return tracer.start_span(
        f"process {job_type}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        links=[Link(producer)] if producer.is_valid else [],
        record_exception=False,
        set_status_on_exception=False,
    )


def configured(tracer_provider: trace.TracerProvider | None) -> bool:
    """Whether spans would go anywhere: a provider given, or one installed globally. With
    neither, the worker skips its per-job span altogether (no context extraction, no attributes)."""
    return tracer_provider is not None or not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def mark_error(span: trace.Span, error_type: str, description: str) -> None:
    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, description[:500]))


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    """Which exporters the OTEL_* variables ask for; empty means none (pgwork's default)."""
    names = [n.strip() for n in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if names:
        return [] if names == ["none"] else [n for n in names if n != "none"]
    if environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return ["otlp"]
    return []


def configure_from_env(environ: Mapping[str, str] = os.environ) -> trace.TracerProvider | None:
    """Install a global TracerProvider when the OTEL_* variables ask for an exporter."""
    if environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    names = exporter_names(environ)
    if not names:
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    available = {ep.name: ep for ep in entry_points(group="opentelemetry_traces_exporter")}
    provider = TracerProvider(resource=Resource.create())
    for name in names:
        if name not in available:
            hint = "pip install opentelemetry-exporter-otlp" if name.startswith("otlp") else "check the name"
            raise TracingConfigError(
                f"OTEL_TRACES_EXPORTER: no exporter named {name!r} is installed "
                f"(installed: {sorted(available) or 'none'}); {hint}, or unset it to export nothing"
            )
        exporter_class = available[name].load()
        provider.add_span_processor(BatchSpanProcessor(exporter_class()))
    trace.set_tracer_provider(provider)
    return provider


def shutdown(provider: trace.TracerProvider | None) -> None:
    """Flush spans before the process exits."""
    shutdown_method = getattr(provider, "shutdown", None)
    if callable(shutdown_method):
        shutdown_method()
