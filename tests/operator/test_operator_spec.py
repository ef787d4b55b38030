"""parse_spec: defaults, and every rule with an error naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from pgwork.operator.cron import check_cron
from pgwork.operator.fields import SpecError
from pgwork.operator.spec import DEFAULTS, SecretRef, check_name, parse_spec

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
    assert spec.worker.max_abandoned is None  # left out of the worker's arguments: its own default holds


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
        (with_(worker={"image": "i", "app": "a", "maxAbandoned": -1}), "spec.worker.maxAbandoned", "range 0..1000"),
        (with_(worker={"image": "i", "app": "a", "maxAbandoned": 1001}), "spec.worker.maxAbandoned", "e.g. 3"),
        (with_(worker={"image": "i", "app": "a", "maxAbandoned": "3"}), "spec.worker.maxAbandoned", "whole number"),
        (with_(worker={"image": "i", "app": "a", "maxAbandoned": 2.5}), "spec.worker.maxAbandoned", "whole number"),
        (with_(worker={"image": "i", "app": "a", "maxAbandoned": True}), "spec.worker.maxAbandoned", "whole number"),
        (
            with_(worker={"image": "i", "args": ["worker", "--app", "a"], "maxAbandoned": 5}),
            "spec.worker.maxAbandoned",
            "put --max-abandoned N in worker.args",
        ),
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
        (with_(retention={"olderThan": "0s"}), "spec.retention.olderThan", "as soon as they finish"),
        (with_(retention={"olderThan": "0d0h"}), "spec.retention.olderThan", "retention.enabled: false"),
        (with_(retention={"archiveAfter": "a day"}), "spec.retention.archiveAfter", "duration"),
        (with_(retention={"archiveAfter": "0s"}), "spec.retention.archiveAfter", "the moment they finish"),
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


# Strings that become API paths, object names, arguments or cron fields: each must meet the rule
# Kubernetes (or the worker's parser) applies, checked whole (a trailing newline is not a match).
HOSTILE = [
    ({"database": {"secretName": "../../kube-system/secrets/admin"}}, "spec.database.secretName"),
    ({"database": {"secretName": "db/../../x"}}, "spec.database.secretName"),
    ({"database": {"secretName": "db\n"}}, "spec.database.secretName"),
    ({"database": {"secretName": "db%2F..%2Fx"}}, "spec.database.secretName"),
    ({"database": {"secretName": "DB"}}, "spec.database.secretName"),
    ({"database": {"secretName": "a" * 254}}, "spec.database.secretName"),
    ({"database": {"secretName": "-db"}}, "spec.database.secretName"),
    ({"database": {"secretName": "db", "secretKey": "../dsn"}}, "spec.database.secretKey"),
    ({"database": {"secretName": "db", "secretKey": "dsn\n"}}, "spec.database.secretKey"),
    ({"database": {"secretName": "db", "secretKey": "."}}, "spec.database.secretKey"),
    ({"database": {"secretName": "db", "secretKey": "..data"}}, "spec.database.secretKey"),
    ({"database": {"secretName": "db", "secretKey": "k" * 254}}, "spec.database.secretKey"),
    ({"database": {"secretName": "db", "workersSecret": {"name": "../w"}}}, "spec.database.workersSecret.name"),
    ({"database": {"secretName": "db", "migrationsSecret": {}}}, "spec.database.migrationsSecret.name"),
    (
        {"database": {"secretName": "db", "maintenanceSecret": {"name": "m", "key": "a/b"}}},
        "spec.database.maintenanceSecret.key",
    ),
    (
        {"database": {"secretName": "db", "workersSecret": {"name": "w", "namespace": "x"}}},
        "spec.database.workersSecret.namespace",
    ),
    ({"database": {"secretName": "db", "secretNamespace": "kube-system"}}, "spec.database.secretNamespace"),
    ({"jobTypes": ["-ocr"]}, "spec.jobTypes[0]"),
    ({"jobTypes": ["ocr", "--app=evil"]}, "spec.jobTypes[1]"),
    ({"jobTypes": ["ocr\n"]}, "spec.jobTypes[0]"),
    ({"jobTypes": ["$(DATABASE_URL)"]}, "spec.jobTypes[0]"),
    ({"jobTypes": ["ocr\x00"]}, "spec.jobTypes[0]"),
    ({"jobTypes": ["ocr\x1b[2J"]}, "spec.jobTypes[0]"),
    ({"jobTypes": ["x" * 201]}, "spec.jobTypes[0]"),
    ({"worker": {"image": "i", "app": "my-app.jobs"}}, "spec.worker.app"),
    ({"worker": {"image": "i", "app": "--burst"}}, "spec.worker.app"),
    ({"worker": {"image": "i", "app": "/etc/passwd"}}, "spec.worker.app"),
    ({"worker": {"image": "i", "app": "myapp.jobs\n"}}, "spec.worker.app"),
    ({"worker": {"image": "i", "app": "myapp..jobs"}}, "spec.worker.app"),
    ({"worker": {"image": "i", "app": "2fast.jobs"}}, "spec.worker.app"),
    ({"worker": {"image": "i", "app": "myapp.jobs:handlers:x"}}, "spec.worker.app"),
    ({"worker": {"image": "img:1\n", "app": "a"}}, "spec.worker.image"),
    ({"worker": {"image": "img:1 --x", "app": "a"}}, "spec.worker.image"),
    ({"worker": {"image": "i", "app": "a", "env": [{"name": "A\n", "value": "x"}]}}, "spec.worker.env[0].name"),
    ({"worker": {"image": "i", "app": "a", "env": [{"name": "1A", "value": "x"}]}}, "spec.worker.env[0].name"),
    ({"worker": {"image": "i", "app": "a", "serviceAccountName": "../default"}}, "spec.worker.serviceAccountName"),
    ({"worker": {"image": "i", "app": "a", "serviceAccountName": "sa\n"}}, "spec.worker.serviceAccountName"),
    ({"reaper": {"schedule": "* * * * *\n"}}, "spec.reaper.schedule"),
    ({"reaper": {"schedule": " * * * * *"}}, "spec.reaper.schedule"),
    ({"reaper": {"schedule": "* * *\n* *"}}, "spec.reaper.schedule"),
    ({"reaper": {"schedule": "0 0 * * 7"}}, "spec.reaper.schedule"),
    ({"reaper": {"schedule": "0 ² * * *"}}, "spec.reaper.schedule"),
    ({"reaper": {"schedule": "*/² * * * *"}}, "spec.reaper.schedule"),
    ({"reaper": {"schedule": "٣ * * * *"}}, "spec.reaper.schedule"),
    ({"reaper": {"schedule": "*/99999999999999999999 * * * *"}}, "spec.reaper.schedule"),
    ({"reaper": {"schedule": "@hourly\n"}}, "spec.reaper.schedule"),
    ({"reaper": {"schedule": "TZ=UTC 0 * * * *"}}, "spec.reaper.schedule"),
    ({"retention": {"schedule": "0 3 * * * *"}}, "spec.retention.schedule"),
    ({"retention": {"olderThan": "30"}}, "spec.retention.olderThan"),
    ({"retention": {"olderThan": "7d\n"}}, "spec.retention.olderThan"),
    ({"retention": {"olderThan": "7D"}}, "spec.retention.olderThan"),
    ({"retention": {"olderThan": " 7d"}}, "spec.retention.olderThan"),
]


@pytest.mark.parametrize(("overrides", "field"), HOSTILE, ids=[repr(h[0])[:60] for h in HOSTILE])
def test_hostile_strings_are_refused_naming_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(with_(**overrides))
    assert info.value.field == field
    assert "\n" not in str(info.value)  # quoted with repr, one line


@pytest.mark.parametrize(
    "overrides",
    [
        {"database": {"secretName": "team-a.queue-db", "secretKey": "DATABASE_URL.v2"}},
        {"database": {"secretName": "db", "secretKey": "_dsn-1"}},
        {"database": {"secretName": "d" * 253}},
        {"jobTypes": ["demo.extract_invoice", "lab-crash", "9lives", "_x", "a/b:c@d+e=f"]},
        {"worker": {"image": "registry.example:5000/ocr@sha256:abc", "app": "_pkg.sub2.jobs"}},
        {"reaper": {"schedule": "0 0 * * 6"}},
        {"retention": {"olderThan": "1h30m", "schedule": "@daily"}},
    ],
)
def test_good_strings_pass(overrides: dict[str, Any]) -> None:
    parse_spec(with_(**overrides))


def test_role_secrets_fall_back_to_the_one_secret() -> None:
    one = parse_spec(with_(database={"secretName": "db", "secretKey": "url"})).database
    assert one.migrations == one.workers == one.maintenance == one.default
    assert (one.default.name, one.default.key) == ("db", "url")
    split = parse_spec(
        with_(
            database={
                "secretName": "db",
                "workersSecret": {"name": "w"},
                "maintenanceSecret": {"name": "m", "key": "k"},
            }
        )
    ).database
    assert (split.workers.name, split.workers.key, split.workers.field) == (
        "w",
        "dsn",
        "spec.database.workersSecret.name",
    )
    assert (split.maintenance.name, split.maintenance.key) == ("m", "k")
    assert split.migrations == split.default
    # The schedules' producer Secret has no fallback: absent, the operator fires with the default.
    assert one.schedules is None and split.schedules is None
    own = parse_spec(with_(database={"secretName": "db", "schedulesSecret": {"name": "p"}})).database.schedules
    assert own == SecretRef("p", "dsn", "spec.database.schedulesSecret.name")
    with pytest.raises(SpecError, match=r"^spec\.database\.schedulesSecret\.name: "):
        parse_spec(with_(database={"secretName": "db", "schedulesSecret": {"name": "../x"}}))


@pytest.mark.parametrize("name", ["2ocr", "ocr.v2", "ocr\n", "o" * 46, "", None, "ocr-", "Ocr"])
def test_jobqueue_names_that_cannot_name_every_owned_object(name: Any) -> None:
    with pytest.raises(SpecError, match=r"^metadata\.name: .*start.* with a letter"):
        check_name(name)


def test_app_rule_agrees_with_the_worker() -> None:
    """The operator refuses exactly the modules `pgwork worker --app` would refuse (a crash loop)."""
    from pgwork.worker.options import OptionError, parse_options

    for app in ["myapp.jobs", "_x", "a.b.c2", "my-app.jobs", "-m", "a..b", "2x", "a:b", "/x.py", "a.", "ä"]:
        try:
            parse_options(app=app, worker_id="w", environ={})
            worker_ok = True
        except OptionError:
            worker_ok = False
        try:
            parse_spec(with_(worker={"image": "i", "app": app}))
            operator_ok = True
        except SpecError:
            operator_ok = False
        assert operator_ok == worker_ok, app
