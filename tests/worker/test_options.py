"""Option parsing is pure: strings in, WorkerOptions or one OptionError naming the option."""

from __future__ import annotations

from typing import Any

import pytest

from pgwork.worker.options import OptionError, WorkerOptions, parse_options

ENV = {"HOSTNAME": "pod-abc"}


def parse(**kw: Any) -> WorkerOptions:
    kw.setdefault("app", "myapp.jobs")
    kw.setdefault("worker_id", None)
    return parse_options(environ=kw.pop("environ", ENV), **kw)


def test_an_app_object_is_named_module_colon_name() -> None:
    assert parse(app="myapp.jobs:app").app == "myapp.jobs:app"
    assert parse(app="jobs:_App2").app == "jobs:_App2"


def test_defaults() -> None:
    o = parse()
    assert o == WorkerOptions(app="myapp.jobs", worker_id="pod-abc")
    assert (o.concurrency, o.batch, o.lease, o.heartbeat, o.grace, o.metrics_port) == (1, 1, 30.0, 10.0, 30.0, 9100)
    assert o.listen and not o.burst and o.job_types is None


@pytest.mark.parametrize(
    ("kw", "field", "expected"),
    [
        ({"lease": "30s", "heartbeat": "10s"}, "heartbeat", 10.0),
        ({"lease": "1m"}, "heartbeat", 20.0),
        ({"lease": "90"}, "lease", 90.0),
        ({"lease": "2m", "heartbeat": "500ms"}, "heartbeat", 0.5),
        ({"concurrency": "8"}, "concurrency", 8),
        ({"batch": "100"}, "batch", 100),
        ({"job_types": "ocr, extract,ocr"}, "job_types", ("ocr", "extract")),
        ({"worker_id": "given"}, "worker_id", "given"),
        ({"metrics_port": "0"}, "metrics_port", 0),
        ({"grace": "0"}, "grace", 0.0),
        ({"grace": "2m"}, "grace", 120.0),
        ({"poll": "250ms"}, "poll", 0.25),
        ({"burst": True}, "burst", True),
        ({"listen": False}, "listen", False),
        ({}, "connect_patience", 60.0),
        ({"connect_patience": "0"}, "connect_patience", 0.0),
        ({"connect_patience": "5m"}, "connect_patience", 300.0),
    ],
)
def test_accepted(kw: dict[str, Any], field: str, expected: Any) -> None:
    assert getattr(parse(**kw), field) == expected


@pytest.mark.parametrize(
    ("kw", "option", "words"),
    [
        ({"app": "not a module"}, "--app", "importable module"),
        ({"app": ""}, "--app", "importable"),
        ({"app": "myapp.jobs:"}, "--app", "MODULE:APP"),
        ({"app": ":app"}, "--app", "MODULE:APP"),
        ({"app": "myapp.jobs:1app"}, "--app", "MODULE:APP"),
        ({"app": "myapp:jobs:app"}, "--app", "MODULE:APP"),
        ({"app": "myapp.jobs:app.attr"}, "--app", "MODULE:APP"),
        ({"environ": {}}, "--id", "HOSTNAME"),
        ({"worker_id": "x" * 201}, "--id", "200"),
        ({"concurrency": "0"}, "--concurrency", "1..1000"),
        ({"concurrency": "two"}, "--concurrency", "whole number"),
        ({"concurrency": "-1"}, "--concurrency", "whole number"),
        ({"batch": "10001"}, "--batch", "1..10000"),
        ({"lease": "soon"}, "--lease", "not a duration"),
        ({"lease": "0.5s"}, "--lease", "under one second"),
        ({"lease": "30s", "heartbeat": "11s"}, "--heartbeat", "more than a third"),
        ({"lease": "30s", "heartbeat": "0"}, "--heartbeat", "above zero"),
        ({"heartbeat": "-1"}, "--heartbeat", ">= 0"),
        ({"job_types": "a,,b"}, "--job-types", "empty name"),
        ({"job_types": ""}, "--job-types", "empty name"),
        ({"metrics_port": "70000"}, "--metrics-port", "0..65535"),
        ({"grace": "forever"}, "--grace", "not a duration"),
        ({"poll": "0"}, "--poll", "out of range"),
        ({"connect_patience": "2h"}, "--connect-patience", "over an hour"),
        ({"connect_patience": "-1"}, "--connect-patience", ">= 0"),
        ({"connect_patience": "later"}, "--connect-patience", "not a duration"),
    ],
)
def test_refused(kw: dict[str, Any], option: str, words: str) -> None:
    with pytest.raises(OptionError) as err:
        parse(**kw)
    assert err.value.option == option
    message = str(err.value)
    assert message.startswith(f"{option}: ")
    assert words in message
    assert "\n" not in message


@pytest.mark.parametrize(("concurrency", "batch", "capacity"), [(1, 1, 1), (4, 1, 4), (1, 100, 100), (8, 4, 8)])
def test_capacity(concurrency: int, batch: int, capacity: int) -> None:
    assert parse(concurrency=str(concurrency), batch=str(batch)).capacity == capacity
