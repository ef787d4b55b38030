"""CronJob schedules as the CronJob controller reads them: five fields within its ranges, or a macro."""

from __future__ import annotations

import re
from collections.abc import Mapping

from pgwork.operator.fields import SpecError, shown

# The shape of a schedule; its fields are then checked one by one (the CRD checks the same ranges
# with one long pattern, and tests/operator/test_operator_crd.py holds both to one table).
SCHEDULE_PATTERN = r"@(yearly|annually|monthly|weekly|daily|midnight|hourly)|[^\s]+([ \t]+[^\s]+){4}"
CRON_MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
# (name, low, high, names that stand for numbers): the bounds of the parser the CronJob controller
# uses (robfig/cron v3 ParseStandard), whose day of week is 0-6 (7 is refused).
_CRON_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    ("day of week", 0, 6, {d: i for i, d in enumerate(_DAYS)}),
)
_DIGITS = re.compile(r"[0-9]{1,2}")
SCHEDULE_MAX = 200


def check_cron(schedule: str, field: str) -> str:
    """A CronJob schedule the API server and the CronJob controller both accept: five fields
    (minute hour day-of-month month day-of-week) within the controller's ranges, or a macro."""
    fix = "write five fields such as '*/5 * * * *', or @hourly/@daily"
    if schedule.startswith("@"):
        if schedule not in CRON_MACROS:
            raise SpecError(field, f"{shown(schedule)}: unknown macro", f"use one of {sorted(CRON_MACROS)}")
        return schedule
    if len(schedule) > SCHEDULE_MAX:
        raise SpecError(field, f"is {len(schedule)} characters long", f"at most {SCHEDULE_MAX}; {fix}")
    if not re.fullmatch(SCHEDULE_PATTERN, schedule) or not schedule.isascii():
        count = len(schedule.split())
        problem = f"has {count} fields, a schedule has 5" if count != 5 else "is not five fields separated by spaces"
        raise SpecError(field, f"{shown(schedule)} {problem}", fix)
    for part, (name, low, high, names) in zip(schedule.split(), _CRON_FIELDS, strict=True):
        for item in part.split(","):
            _check_cron_item(item, name, low=low, high=high, names=names, field=field, schedule=schedule)
    return schedule


def _check_cron_item(
    item: str, name: str, *, low: int, high: int, names: Mapping[str, int], field: str, schedule: str
) -> None:
    def bad(problem: str) -> SpecError:
        return SpecError(
            field, f"{shown(schedule)}: {name} {problem}", f"use values {low}-{high}, *, a-b, */n or lists"
        )

    def number(text: str) -> int:
        upper = text.upper()
        if upper in names:
            return names[upper]
        # Not str.isdigit(): that accepts '²' and other digits int() and the controller refuse.
        if not _DIGITS.fullmatch(text):
            raise bad(f"{shown(text)} is not a number")
        value = int(text)
        if not low <= value <= high:
            raise bad(f"{value} is outside {low}-{high}")
        return value

    base, _, step = item.partition("/")
    if step and (not _DIGITS.fullmatch(step) or not 1 <= int(step) <= high + 1):
        raise bad(f"step {shown(step)} must be a whole number from 1 to {high + 1}")
    if base in ("*", "?"):
        if base == "?" and name not in ("day of month", "day of week"):
            raise bad("'?' is allowed only for day of month and day of week")
        return
    start, dash, end = base.partition("-")
    first = number(start)
    if dash and number(end) < first:
        raise bad(f"range {shown(base)} runs backwards")
