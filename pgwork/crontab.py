"""Cron ticks, pure: which instants a five-field schedule names between two instants, in a time zone.

The syntax is the one the Kubernetes CronJob controller accepts (robfig/cron v3 ParseStandard):
five fields (minute hour day-of-month month day-of-week), `*`, `?`, `a-b`, `*/n`, `a/n` (a to
the field's end), lists, month and day names, and the macros @yearly @annually @monthly @weekly
@daily @midnight @hourly. Day of month and day of week combine as cron does: when both are
restricted a day matching either runs; when one is `*` (or `?`) only the other counts.

Time zones (zoneinfo) and daylight saving — one rule, so a tick is never skipped nor doubled:
every local wall-clock time the schedule names fires once.
- A wall time that does not exist (the clock jumps 02:00 → 03:00) fires at the instant of the
  jump; several such times collapse into that one instant (`30 2 * * *` runs at 03:00 that day,
  `*/10 * * * *` runs once at 03:00 for its six missing 02:xx ticks).
- A wall time that happens twice (03:00 → 02:00) fires at its first occurrence only, so
  `30 2 * * *` runs once, and `*/10 * * * *` has no ticks during the repeated hour.
This is ISC (Vixie) cron's rule for fixed-time jobs applied to every job; the CronJob controller
differs: it drops a skipped time and runs a repeated one twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {
    m: i + 1 for i, m in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"])
}
_DAYS = {d: i for i, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
# (name, low, high, names): the controller's bounds; its day of week is 0-6 (7 is refused).
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS),
)
_NUMBER = re.compile(r"[0-9]{1,2}")
# Fields are separated by spaces and tabs only, as the CRD's pattern and the controller read them.
_OTHER_SPACE = re.compile(r"[^\S \t]")
# How far ahead a next tick is looked for: `0 0 29 2 1` (Feb 29 that is a Monday) recurs within
# 28 years; a schedule with no tick in that span (`0 0 31 2 *`) has none.
HORIZON_DAYS = 366 * 29
MAX_LENGTH = 200


class CronError(ValueError):
    """A schedule cron cannot read: `problem` says what is wrong, `fix` how to write it."""

    def __init__(self, problem: str, fix: str) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem}; {fix}")


@dataclass(frozen=True)
class Cron:
    """A parsed schedule: the allowed values of each field, and whether the day fields were `*`."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month was * or ?
    any_weekday: bool  # day of week was * or ?

    def matches_date(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow


def parse(text: str) -> Cron:
    """The schedule `text`, or CronError naming the field and the fix."""
    fix = "write five fields such as '*/10 * * * *' (minute hour day-of-month month day-of-week) or @hourly/@daily"
    if not isinstance(text, str) or not text.strip():
        raise CronError("an empty schedule", fix)
    if len(text) > MAX_LENGTH:
        raise CronError(f"a schedule of {len(text)} characters", f"at most {MAX_LENGTH}; {fix}")
    if text != text.strip():
        raise CronError(f"{text!r} starts or ends with white space", fix)
    if _OTHER_SPACE.search(text):
        raise CronError(f"{text!r} holds a line break or other white space than spaces and tabs", fix)
    stripped = text
    if stripped.startswith("@"):
        if stripped.startswith("@every"):
            raise CronError(
                f"{stripped!r}: @every is not cron (the CronJob controller refuses it)",
                f"{fix}; nothing runs more often than once a minute",
            )
        if stripped not in MACROS:
            raise CronError(f"{stripped!r}: unknown macro", f"use one of {', '.join(sorted(MACROS))}")
        stripped = MACROS[stripped]
    parts = stripped.split()
    if parts[0].startswith(("TZ=", "CRON_TZ=")):
        raise CronError(f"{text!r}: a TZ= prefix is not part of the schedule", "give the time zone as its own field")
    if len(parts) == 6:
        raise CronError(
            f"{text!r} has 6 fields: a seconds field is not cron (the CronJob controller refuses it), and "
            "a schedule runs at most once a minute",
            fix,
        )
    if not stripped.isascii():
        raise CronError(f"{text!r} is not plain ASCII digits and names", fix)
    if len(parts) != 5:
        raise CronError(f"{text!r} has {len(parts)} fields, a schedule has 5", fix)
    sets: list[frozenset[int]] = []
    stars: list[bool] = []
    for part, bounds in zip(parts, _FIELDS, strict=True):
        values: set[int] = set()
        star = False
        for item in part.split(","):
            got, item_star = _item(item, bounds, text)
            values |= got
            star = star or item_star
        sets.append(frozenset(values))
        stars.append(star)
    return Cron(text, sets[0], sets[1], sets[2], sets[3], sets[4], any_day=stars[2], any_weekday=stars[4])


def _item(item: str, bounds: tuple[str, int, int, dict[str, int]], text: str) -> tuple[set[int], bool]:
    name, low, high, names = bounds

    def bad(problem: str) -> CronError:
        return CronError(f"{text!r}: {name} {problem}", f"use values {low}-{high}, *, a-b, */n or lists")

    def number(part: str) -> int:
        if part.upper() in names:
            return names[part.upper()]
        if not _NUMBER.fullmatch(part):
            raise bad(f"{part!r} is not a number")
        value = int(part)
        if not low <= value <= high:
            raise bad(f"{value} is outside {low}-{high}")
        return value

    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not _NUMBER.fullmatch(step_text) or not 1 <= int(step_text) <= high + 1:
            raise bad(f"step {step_text!r} must be a whole number from 1 to {high + 1}")
        step = int(step_text)
    if base in ("*", "?"):
        if base == "?" and name not in ("day of month", "day of week"):
            raise bad("'?' is allowed only for day of month and day of week")
        # As the controller: `*/n` with n > 1 restricts the field (it is no longer "any day").
        return set(range(low, high + 1, step)), step == 1
    start_text, dash, end_text = base.partition("-")
    start = number(start_text)
    end = number(end_text) if dash else (high if slash else start)  # `a/n` runs a to the end
    if end < start:
        raise bad(f"range {base!r} runs backwards")
    return set(range(start, end + 1, step)), False


def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name`, or CronError."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise CronError(f"time zone {name!r} is unknown", "use an IANA name such as 'UTC' or 'Europe/Berlin'") from None


def _instant(wall: datetime, tz: ZoneInfo) -> datetime:
    """The UTC instant at which the local wall time `wall` fires (the module's DST rule)."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if first.astimezone(tz).replace(tzinfo=None) == wall:
        return first  # exists; for a repeated time, fold=0 is its first occurrence
    # In a gap: the first wall minute after it that exists is the instant of the jump.
    later = wall
    for _ in range(48 * 60):
        later += timedelta(minutes=1)
        moment = later.replace(tzinfo=tz, fold=0).astimezone(UTC)
        if moment.astimezone(tz).replace(tzinfo=None) == later:
            return moment
    return first  # no zone has a gap of two days


def _walls(cron: Cron, low: datetime, high: datetime) -> Iterator[datetime]:
    """The naive local wall times the schedule names within [low, high], in order."""
    day = low.date()
    hours = sorted(cron.hours)
    minutes = sorted(cron.minutes)
    while day <= high.date():
        if cron.matches_date(day):
            for hour in hours:
                start = datetime(day.year, day.month, day.day, hour)
                if start + timedelta(minutes=59) < low or start > high:
                    continue
                for minute in minutes:
                    wall = start.replace(minute=minute)
                    if low <= wall <= high:
                        yield wall
        day += timedelta(days=1)


# Local wall times this far outside the span are not converted: no zone's offset jumps by more
# (a zone leaving out a whole day, as Samoa did in 2011, would lose that day's ticks).
_MARGIN = timedelta(hours=3)


def ticks_between(cron: Cron, tz: ZoneInfo, after: datetime, until: datetime) -> list[datetime]:
    """The schedule's ticks t with after < t <= until, as UTC instants, oldest first, each once.
    Costs a step per local day in the span plus one per tick: callers bound the span."""
    if until <= after:
        return []
    low = after.astimezone(tz).replace(tzinfo=None) - _MARGIN
    high = until.astimezone(tz).replace(tzinfo=None) + _MARGIN
    found = {t for t in (_instant(w, tz) for w in _walls(cron, low, high)) if after < t <= until}
    return sorted(found)


def next_tick(cron: Cron, tz: ZoneInfo, after: datetime) -> datetime | None:
    """The first tick strictly after `after`, or None when none falls within HORIZON_DAYS."""
    span = timedelta(hours=1)
    start = after
    while start - after < timedelta(days=HORIZON_DAYS):
        found = ticks_between(cron, tz, start, start + span)
        if found:
            return found[0]
        start += span
        span = min(span * 2, timedelta(days=366))
    return None


def last_ticks(cron: Cron, tz: ZoneInfo, after: datetime, until: datetime, limit: int) -> tuple[list[datetime], int]:
    """The newest `limit` ticks in (after, until], and how many older ones it passed over (at
    least; exact when the span is short). Only the span's last stretch is listed, so an operator
    back after a month costs no month of minute ticks."""
    if until <= after or limit < 1:
        return [], 0
    span = timedelta(hours=2)
    while True:
        start = max(after, until - span)
        found = ticks_between(cron, tz, start, until)
        if len(found) > limit or start == after:
            break
        span *= 4
    kept = found[-limit:]
    return kept, len(found) - len(kept)
