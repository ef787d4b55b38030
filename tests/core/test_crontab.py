"""pgwork.crontab and pgwork.schedule.decide, pure: tables of schedules, instants and zones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pgwork import crontab
from pgwork.errors import InvalidArgument
from pgwork.schedule import ON_TIME, Schedule, check, decide, job_key

BERLIN = crontab.zone("Europe/Berlin")


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def local(ticks: list[datetime], tz: object = BERLIN) -> list[str]:
    return [t.astimezone(tz).strftime("%m-%d %H:%M%z") for t in ticks]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cron", "after", "until", "expected"),
    [
        ("*/10 * * * *", utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 0, 30), ["00:10", "00:20", "00:30"]),
        ("5-7 * * * *", utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 0, 30), ["00:05", "00:06", "00:07"]),
        ("50/5 * * * *", utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 0, 59), ["00:50", "00:55"]),
        ("0,30 9 * * *", utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 23, 0), ["09:00", "09:30"]),
        ("@hourly", utc(2026, 1, 1, 0, 30), utc(2026, 1, 1, 2, 30), ["01:00", "02:00"]),
        ("0 0 * * MON-FRI", utc(2026, 1, 2, 0, 0), utc(2026, 1, 6, 0, 0), ["01-05 00:00", "01-06 00:00"]),
        ("0 0 * jan sun", utc(2026, 1, 1, 0, 0), utc(2026, 1, 12, 0, 0), ["01-04 00:00", "01-11 00:00"]),
        # Both day fields restricted: either matches (cron's OR). 2026-01-01 is a Thursday.
        ("0 0 1 * 5", utc(2025, 12, 31, 1, 0), utc(2026, 1, 3, 0, 0), ["01-01 00:00", "01-02 00:00"]),
        # `*/2` restricts the day of month, so the day of week ORs with it.
        ("0 0 */2 * 5", utc(2026, 1, 1, 1, 0), utc(2026, 1, 4, 0, 0), ["01-02 00:00", "01-03 00:00"]),
        ("? ? ? ? ?", utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 0, 0), []),
    ],
)
def test_ticks_between_in_utc(cron: str, after: datetime, until: datetime, expected: list[str]) -> None:
    if cron.startswith("?"):
        with pytest.raises(crontab.CronError, match="minute"):
            crontab.parse(cron)
        return
    got = crontab.ticks_between(crontab.parse(cron), crontab.zone("UTC"), after, until)
    shown = [t.strftime("%m-%d %H:%M" if " " in expected[0] else "%H:%M") for t in got] if expected else []
    assert shown == expected


@pytest.mark.parametrize(
    ("cron", "after", "until", "expected"),
    [
        # Spring forward, 2026-03-29 02:00 -> 03:00 CEST: 02:30 does not exist that day and fires
        # at the jump; every day still has one tick.
        (
            "30 2 * * *",
            utc(2026, 3, 27),
            utc(2026, 3, 31),
            ["03-27 02:30+0100", "03-28 02:30+0100", "03-29 03:00+0200", "03-30 02:30+0200"],
        ),
        # Fall back, 2026-10-25 03:00 -> 02:00 CET: 02:30 happens twice and fires once, the first time.
        (
            "30 2 * * *",
            utc(2026, 10, 23),
            utc(2026, 10, 27),
            ["10-23 02:30+0200", "10-24 02:30+0200", "10-25 02:30+0200", "10-26 02:30+0100"],
        ),
        # Several missing wall times collapse into the one instant of the jump.
        (
            "*/20 * * * *",
            utc(2026, 3, 29, 0, 30),
            utc(2026, 3, 29, 1, 30),
            ["03-29 01:40+0100", "03-29 03:00+0200", "03-29 03:20+0200"],
        ),
        # In the repeated hour an hour-wildcard schedule fires on the first pass only.
        (
            "0,30 * * * *",
            utc(2026, 10, 24, 23, 45),
            utc(2026, 10, 25, 2, 15),
            ["10-25 02:00+0200", "10-25 02:30+0200", "10-25 03:00+0100"],
        ),
        # A daily job at a time that exists once is untouched by either change.
        ("0 12 * * *", utc(2026, 3, 28), utc(2026, 3, 30), ["03-28 12:00+0100", "03-29 12:00+0200"]),
    ],
)
def test_berlin_daylight_saving_neither_skips_nor_doubles(
    cron: str, after: datetime, until: datetime, expected: list[str]
) -> None:
    assert local(crontab.ticks_between(crontab.parse(cron), BERLIN, after, until)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("@every 10s", "@every is not cron"),
        ("*/10 * * * * *", "6 fields: a seconds field is not cron"),
        ("* * * *", "has 4 fields"),
        ("60 * * * *", "minute 60 is outside 0-59"),
        ("* * * * 7", "day of week 7 is outside 0-6"),
        ("*/0 * * * *", "step '0'"),
        ("5-1 * * * *", "runs backwards"),
        ("@reboot", "unknown macro"),
        ("TZ=UTC 0 * * * *", "TZ= prefix"),
        ("* * *\n* *", "line break"),
        ("* * * * ²", "plain ASCII"),
        ("", "empty"),
        ("x" * 201, "at most 200"),
    ],
)
def test_refused_schedules_say_why(text: str, message: str) -> None:
    with pytest.raises(crontab.CronError, match=message.replace("(", r"\(").replace("*", r"\*")):
        crontab.parse(text)


def test_next_tick_far_and_never() -> None:
    utc_zone = crontab.zone("UTC")
    assert crontab.next_tick(crontab.parse("0 0 29 2 *"), utc_zone, utc(2026, 1, 1)) == utc(2028, 2, 29)
    assert crontab.next_tick(crontab.parse("0 0 31 2 *"), utc_zone, utc(2026, 1, 1)) is None
    assert crontab.next_tick(crontab.parse("@daily"), BERLIN, utc(2026, 1, 1, 12)) == utc(2026, 1, 1, 23)


def test_unknown_zone() -> None:
    with pytest.raises(crontab.CronError, match="Europe/Nowhere"):
        crontab.zone("Europe/Nowhere")


T = utc(2026, 1, 5, 9, 0)


@pytest.mark.parametrize(
    ("missed", "watermark", "now", "limit", "enqueued", "skipped"),
    [
        # On time: the tick just passed runs under either policy.
        ("skip", T, T + timedelta(minutes=10, seconds=5), 10, ["09:10"], 0),
        ("catchUp", T, T + timedelta(minutes=10, seconds=5), 10, ["09:10"], 0),
        # Down across 3 ticks (09:10, 09:20, 09:30), back at 09:35: skip runs none, catchUp all 3.
        ("skip", T + timedelta(minutes=5), T + timedelta(minutes=35), 10, [], 3),
        ("catchUp", T + timedelta(minutes=5), T + timedelta(minutes=35), 10, ["09:10", "09:20", "09:30"], 0),
        # The cap keeps the newest.
        ("catchUp", T + timedelta(minutes=5), T + timedelta(minutes=35), 2, ["09:20", "09:30"], 1),
        # Back right at a tick: the older ones are missed, that one is on time.
        ("skip", T + timedelta(minutes=5), T + timedelta(minutes=30, seconds=1), 10, ["09:30"], 2),
        # Nothing due.
        ("skip", T, T + timedelta(minutes=9), 10, [], 0),
        # A month away, capped to the newest 3 (09:00 is a minute old: late): no month of ticks listed.
        ("catchUp", T, T + timedelta(days=30, minutes=1), 3, ["08:40", "08:50", "09:00"], None),
    ],
)
def test_decide(
    missed: str, watermark: datetime, now: datetime, limit: int, enqueued: list[str], skipped: int | None
) -> None:
    d = decide(
        crontab.parse("*/10 * * * *"),
        crontab.zone("UTC"),
        watermark=watermark,
        now=now,
        missed=missed,
        catch_up_limit=limit,
    )
    assert [t.strftime("%H:%M") for t in d.enqueue] == enqueued
    if skipped is not None:
        assert d.skipped == skipped
    else:
        assert d.skipped > 0
    assert d.next_tick is not None and now < d.next_tick <= now + timedelta(minutes=10)
    assert all(now - t > ON_TIME or now >= t for t in d.enqueue)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"name": "Bad Name"}, "x.name"),
        ({"cron": "@every 1m"}, "x.cron"),
        ({"time_zone": "Mars/Olympus"}, "x.timeZone"),
        ({"missed": "always"}, "x.missed"),
        ({"job_type": " "}, "x.jobType"),
        ({"catch_up_limit": 0}, "x.catchUpLimit"),
        ({"payload": {"x": "y" * 70000}}, "x.payload"),
        ({"payload": [1]}, "x.payload"),
    ],
)
def test_check_names_the_field(changes: dict[str, object], field: str) -> None:
    base = {"name": "nightly", "cron": "@daily", "job_type": "cleanup"}
    with pytest.raises(InvalidArgument) as caught:
        check(Schedule(**(base | changes)), "x")  # type: ignore[arg-type]
    assert caught.value.field == field


def test_job_key_carries_the_tick() -> None:
    assert job_key("nightly", utc(2026, 3, 29, 1)) == "schedule:nightly:2026-03-29T01:00:00Z"
