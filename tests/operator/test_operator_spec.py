"""parse_spec: defaults, and every rule with an error naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from pgwork.operator.spec import DEFAULTS, SpecError, check_cron, check_name, parse_spec

MINIMAL: dict[str, Any] = {
    "database": {"secretName": "db"},
    "jobTypes": ["ocr"],
    "worker": {"image": "img:1", "app": "myapp.jobs"},
}


def with_(**overrides: Any) -> dict[str, Any]:
    spec = {k: (dict(v) if isinstance(v, dict) else v) for k, v in MINIMAL.items()}
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    return spec


def test_defaults_fill_a_minimal_spec() -> None:
    spec = parse_spec(MINIMAL)
    assert spec.database.secret_key == DEFAULTS["database"]["secretKey"] == "dsn"
    assert spec.worker.command == ("pgwork",)
    assert spec.worker.concurrency == 1
    assert (spec.scaling.min_replicas, spec.scaling.max_replicas) == (1, 10)
    assert spec.scaling.target_backlog_per_worker == 5
    assert (spec.lease.duration_seconds, spec.lease.heartbeat_seconds) == (30.0, 10.0)
    assert spec.reaper.schedule == "* * * * *" and spec.reaper.loop_seconds == 50.0
    assert spec.retention.older_than == "7d"
    assert spec.replicas is None


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"jobTypes": ["ocr"], "worker": {"image": "i", "app": "a"}}, "spec.database", "required"),
        (with_(database={"secretName": "db", "dsn": "postgresql://u:p@h/d"}), "spec.database", "Secret"),
        (with_(database={"secretName": ""}), "spec.database.secretName", "non-empty"),
        (with_(jobTypes=[]), "spec.jobTypes", "at least one"),
        (with_(jobTypes=["a,b"]), "spec.jobTypes[0]", "no commas"),
        (with_(jobTypes=["a", "a"]), "spec.jobTypes[1]", "twice"),
        ({**MINIMAL, "worker": {"app": "a"}}, "spec.worker.image", "required"),
        (with_(worker={"image": "i", "app": None}), "spec.worker.app", "unless worker.args"),
        (with_(worker={"image": "i", "app": "a", "imagePullPolicy": "Sometimes"}), "spec.worker.imagePullPolicy", ""),
        (with_(worker={"image": "i", "app": "a", "concurrency": 0}), "spec.worker.concurrency", "out of range"),
        (with_(worker={"image": "i", "app": "a", "concurrency": "4"}), "spec.worker.concurrency", "whole number"),
        (
            with_(worker={"image": "i", "app": "a", "env": [{"name": "DATABASE_URL", "value": "x"}]}),
            "spec.worker.env[0].name",
            "set by the operator",
        ),
        (with_(worker={"image": "i", "app": "a", "env": [{"value": "x"}]}), "spec.worker.env[0].name", ""),
        (with_(scaling={"minReplicas": 3, "maxReplicas": 2}), "spec.scaling.minReplicas", "above maxReplicas"),
        (with_(scaling={"targetBacklogPerWorker": 0}), "spec.scaling.targetBacklogPerWorker", "out of range"),
        (with_(scaling={"pollIntervalSeconds": 0}), "spec.scaling.pollIntervalSeconds", "out of range"),
        (with_(lease={"durationSeconds": 20, "heartbeatSeconds": 10}), "spec.lease.heartbeatSeconds", "third"),
        (with_(reaper={"schedule": "* * * *"}), "spec.reaper.schedule", "4 fields"),
        (with_(reaper={"schedule": "61 * * * *"}), "spec.reaper.schedule", "outside 0-59"),
        (with_(reaper={"loopSeconds": 5, "everySeconds": 10}), "spec.reaper.everySeconds", "loopSeconds"),
        (with_(retention={"olderThan": "a week"}), "spec.retention.olderThan", "duration"),
        (with_(retention={"schedule": "@sometimes"}), "spec.retention.schedule", "macro"),
        (with_(replicas=-1), "spec.replicas", "out of range"),
    ],
)
def test_bad_specs_name_the_field(spec: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(spec)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    assert words in str(info.value)
    assert "postgresql://u:p@" not in str(info.value)


@pytest.mark.parametrize(
    "schedule",
    ["* * * * *", "*/5 * * * *", "0 3 * * 1-5", "15,45 */2 1 JAN-MAR sun", "0 0 ? * MON", "@hourly", "@daily"],
)
def test_good_cron_schedules(schedule: str) -> None:
    assert check_cron(schedule, "f") == schedule


@pytest.mark.parametrize(
    "schedule", ["", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "*/0 * * * *", "5-1 * * * *"]
)
def test_bad_cron_schedules(schedule: str) -> None:
    with pytest.raises(SpecError):
        check_cron(schedule, "spec.reaper.schedule")


@pytest.mark.parametrize(
    ("name", "ok"), [("ocr", True), ("a" * 45, True), ("a" * 46, False), ("Upper", False), ("-x", False)]
)
def test_jobqueue_names(name: str, ok: bool) -> None:
    if ok:
        assert check_name(name) == name
    else:
        with pytest.raises(SpecError, match=r"^metadata\.name: "):
            check_name(name)
