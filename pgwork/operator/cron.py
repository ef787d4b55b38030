"""CronJob schedules as the CronJob controller reads them: pgwork.crontab's parser (five fields
within the controller's ranges, or a macro), its refusals as SpecError naming the field. The CRD
checks the same with one long pattern; tests/operator/test_operator_crd.py holds both to one table."""

from __future__ import annotations

from pgwork import crontab
from pgwork.operator.fields import SpecError


def check_cron(schedule: str, field: str) -> str:
    """`schedule` when the API server and the CronJob controller both accept it, else SpecError."""
    try:
        crontab.parse(schedule)
    except crontab.CronError as exc:
        raise SpecError(field, exc.problem, exc.fix) from None
    return schedule
