"""The console's pure decisions, as tables: filters, authentication, CSRF, escaping, charts."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest

pytest.importorskip("jinja2")

from pgwork.db.rows import RunningRow
from pgwork.ui.charts import Bar, failure_svg, throughput_svg
from pgwork.ui.data import action_states, is_stuck
from pgwork.ui.filters import FilterError, JobFilter, parse_filter, parse_ids
from pgwork.ui.fleet import WorkerRow, workers_from
from pgwork.ui.render import age, as_json, visible
from pgwork.ui.security import AuthConfig, ConfigError, auth_config, authenticate, csrf_ok, is_loopback

T0 = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, JobFilter()),
        ({"type": " email ", "state": "dead"}, JobFilter(job_type="email", state="dead")),
        ({"error": "timeout", "before": "42"}, JobFilter(error="timeout", before=42)),
        ({"from": "2026-01-31T12:00"}, JobFilter(created_from=T0)),
        ({"path": "customer.id", "value": "7"}, JobFilter(payload_path=("customer", "id"), payload_value="7")),
        ({"state": "", "type": ""}, JobFilter()),
    ],
)
def test_parse_filter_reads_each_field(params: dict[str, str], expected: JobFilter) -> None:
    assert parse_filter(params) == expected


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"state": "exploded"}, "state"),
        ({"before": "-3"}, "before"),
        ({"before": "1 OR 1=1"}, "before"),
        ({"from": "yesterday"}, "from"),
        ({"from": "2026-02-01", "to": "2026-01-01"}, "to"),
        ({"path": "a..b", "value": "x"}, "path"),
        ({"path": "a'); DROP", "value": "x"}, "path"),
        ({"path": "customer.id"}, "value"),
        ({"error": "x" * 501}, "error"),
        ({"type": "a\x00b"}, "type"),
    ],
)
def test_parse_filter_names_the_bad_field(params: dict[str, str], field: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse_filter(params)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def test_a_filter_reads_back_from_its_own_query_string() -> None:
    f = JobFilter("email", "dead", "time out", T0, T0 + timedelta(hours=1), ("a", "b"), "x&y=z", 99)
    assert parse_filter(dict(_pairs(f.query()))) == f
    assert parse_filter(dict(_pairs(f.query(before=None)))) == f.without_cursor()
    assert f.describe() == (
        "type=email state=dead error~'time out' created>=2026-01-31T12:00:00+00:00 "
        "created<2026-01-31T13:00:00+00:00 payload.a.b='x&y=z' id<99"
    )
    assert JobFilter(before=3).is_empty() and JobFilter().describe() == "every job"
    assert JobFilter(before=3).describe() == "id<3"


def _pairs(query: str) -> list[tuple[str, str]]:
    from urllib.parse import parse_qsl

    return parse_qsl(query)


@pytest.mark.parametrize(("text", "ids"), [("3", [3]), ("3, 1 2,,3", [1, 2, 3]), (" 10\n11 ", [10, 11])])
def test_parse_ids(text: str, ids: list[int]) -> None:
    assert parse_ids(text) == ids


@pytest.mark.parametrize("text", ["", " , ", "0", "-1", "1e3", "x", "1" * 20])
def test_parse_ids_refuses(text: str) -> None:
    with pytest.raises(FilterError, match=r"^ids: "):
        parse_ids(text)


@pytest.mark.parametrize(
    ("action", "state", "movable"),
    [
        ("retry", None, ["dead", "cancelled"]),
        ("retry", "dead", ["dead"]),
        ("retry", "pending", []),
        ("cancel", None, ["pending", "running"]),
        ("cancel", "running", ["running"]),
        ("cancel", "succeeded", []),
    ],
)
def test_action_states(action: str, state: str | None, movable: list[str]) -> None:
    assert action_states(action, state) == movable


def _running(remaining: float, since: float) -> RunningRow:
    return RunningRow(1, "t", "w", 1, 5, T0, remaining, since, False, None, None, None, None)


@pytest.mark.parametrize(
    ("remaining", "since", "stuck"), [(20.0, 5.0, False), (-1.0, 5.0, True), (20.0, 61.0, True), (20.0, 60.0, False)]
)
def test_is_stuck(remaining: float, since: float, stuck: bool) -> None:
    assert is_stuck(_running(remaining, since), 60.0) is stuck


def _held(owner: str, job_type: str, remaining: float, since: float) -> tuple[RunningRow, bool]:
    row = RunningRow(1, job_type, owner, 1, 5, T0, remaining, since, False, None, None, None, None)
    return row, is_stuck(row, 60.0)


@pytest.mark.parametrize(
    ("held", "limit", "expected", "more"),
    [
        ([], 10, [], False),
        # One worker: its freshest heartbeat, its last lease, its types once each.
        (
            [_held("a", "y", 20.0, 5.0), _held("a", "x", 30.0, 9.0), _held("a", "x", 10.0, 2.0)],
            10,
            [WorkerRow("a", 3, 2.0, 30.0, 0, ("x", "y"))],
            False,
        ),
        # A worker with a stuck job comes first, then the one heard from longest ago; the limit cuts.
        (
            [_held("calm", "x", 20.0, 1.0), _held("old", "x", 20.0, 30.0), _held("bad", "x", -1.0, 2.0)],
            2,
            [WorkerRow("bad", 1, 2.0, -1.0, 1, ("x",)), WorkerRow("old", 1, 30.0, 20.0, 0, ("x",))],
            True,
        ),
    ],
)
def test_workers_from(held: list[tuple[RunningRow, bool]], limit: int, expected: list[WorkerRow], more: bool) -> None:
    assert workers_from(held, limit) == (expected, more)


@pytest.mark.parametrize(
    ("mode", "host", "env", "result"),
    [
        (None, "127.0.0.1", {}, "none"),
        (None, "localhost", {}, "none"),
        (None, "::1", {}, "none"),
        (None, "0.0.0.0", {"PGWORK_UI_USER": "ops", "PGWORK_UI_PASSWORD": "pw"}, "basic"),
        ("proxy", "0.0.0.0", {}, "proxy"),
        (None, "0.0.0.0", {}, ConfigError),
        ("none", "10.0.0.5", {}, ConfigError),
        ("basic", "127.0.0.1", {"PGWORK_UI_USER": "ops"}, ConfigError),
        ("magic", "127.0.0.1", {}, ConfigError),
    ],
)
def test_auth_is_on_by_default_beyond_localhost(
    mode: str | None, host: str, env: dict[str, str], result: str | type[Exception]
) -> None:
    if isinstance(result, str):
        assert auth_config(mode, host, env).mode == result
    else:
        with pytest.raises(result):
            auth_config(mode, host, env)


def _basic(user: str, password: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.mark.parametrize(
    ("headers", "who"),
    [
        (_basic("ops", "s3cret"), "ops"),
        (_basic("ops", "wrong"), None),
        (_basic("eve", "s3cret"), None),
        ({"authorization": "Basic !!!"}, None),
        ({"authorization": "Bearer x"}, None),
        ({}, None),
    ],
)
def test_basic_auth(headers: dict[str, str], who: str | None) -> None:
    config = AuthConfig("basic", "ops", "s3cret")
    assert authenticate(config, headers, "10.0.0.1") == who
    assert "s3cret" not in repr(config)


@pytest.mark.parametrize(
    ("headers", "who"),
    [
        ({"x-forwarded-user": "alice"}, "alice"),
        ({"x-forwarded-user": " "}, None),
        ({"x-forwarded-user": "a\nb"}, None),
        ({}, None),
    ],
)
def test_proxy_header(headers: dict[str, str], who: str | None) -> None:
    assert authenticate(AuthConfig("proxy"), headers, "10.0.0.1") == who


def test_local_mode_names_the_client() -> None:
    assert authenticate(AuthConfig(), {}, "127.0.0.1") == "local:127.0.0.1"
    assert is_loopback("127.0.0.2") and not is_loopback("example.com")


@pytest.mark.parametrize(
    ("cookie", "form", "ok"),
    [("abc", "abc", True), ("abc", "abd", False), (None, "abc", False), ("abc", "", False), ("", "", False)],
)
def test_csrf_ok(cookie: str | None, form: str, ok: bool) -> None:
    assert csrf_ok(cookie, form) is ok


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain", "plain"),
        ("line\nnext\ttab", "line\nnext\ttab"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("nul\x00", "nul\\x00"),
        ("rtl\u202eevil", "rtl\\u202eevil"),
        (None, ""),
        (42, "42"),
    ],
)
def test_visible_writes_control_characters_as_escapes(raw: object, shown: str) -> None:
    assert visible(raw) == shown


def test_as_json_is_visible_too() -> None:
    assert as_json({"a": "\x07"}) == '{\n  "a": "\\\\u0007"\n}'.replace("\\\\u0007", "\\u0007")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, ""), (0, "0s"), (59.9, "59s"), (61, "1m 01s"), (3700, "1h 01m"), (90000, "1d 1h"), (-5, "-5s")],
)
def test_age(seconds: float | None, text: str) -> None:
    assert age(seconds) == text


def test_charts_are_numbers_only_svg() -> None:
    bars = [Bar(T0 + timedelta(hours=i), i * 10, i) for i in range(12)]
    svg = throughput_svg(bars, cap=100)
    assert svg.startswith("<svg") and svg.endswith("</svg>") and svg.count("<rect") == 24
    assert "style=" not in svg  # presentation attributes only: the CSP forbids inline styles
    assert "90 finished" in svg and "110+ finished" in svg  # a bucket at the cap reads "at least"
    line = failure_svg(bars)
    assert "<polyline" in line and "worst 9%" in line
    assert throughput_svg([], 100) == "" and failure_svg([]) == ""
    assert Bar(T0, 0, 0).failure_rate == 0.0
