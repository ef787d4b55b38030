"""The vacuum horizon in the operator: read once per database per round (QueueCache.horizon),
shown as status.vacuumHorizon and exported as gauges (issue 23). It informs; a failure to read
it is logged and never stops a round's scaling."""

from __future__ import annotations

import logging
from typing import Any

from pgwork.db import Queue
from pgwork.horizon import HorizonFigures, describe
from pgwork.operator.conditions import timestamp
from pgwork.operator.db import DatabaseProblem, QueueCache

log = logging.getLogger("pgwork.operator")

# JobQueues on one database share a horizon reading this fresh (as the backlog's).
SHARED_SECONDS = 1.0


def read_horizon(queues: QueueCache, dsn: str, queue: Queue, now: float) -> HorizonFigures | None:
    try:
        return queues.horizon(dsn, queue, now=now, max_age=SHARED_SECONDS)
    except DatabaseProblem as exc:
        log.warning("reading the vacuum horizon: %s", exc)
        return None


# The status names a holder only once it has held this long: on a busy database some snapshot
# is always a moment old, and its age and xid age would change the status (one write) every poll.
# The gauges carry the exact figures.
STATUS_FROM_SECONDS = 60.0


def horizon_status(fig: HorizonFigures) -> dict[str, Any]:
    """status.vacuumHorizon (pure). Never the holder's query text."""
    held = fig.holder is not None and fig.age_known and fig.age_seconds >= STATUS_FROM_SECONDS
    holder = fig.holder if held else None
    return {
        "ageSeconds": round(fig.age_seconds) if held else 0,
        "xidAge": fig.xid_age if held else 0,
        "holder": describe(holder) if holder is not None else "",
        "queryStart": timestamp(holder.query_start.timestamp()) if holder is not None and holder.query_start else "",
        "jobsDeadTuples": fig.dead_tuples,
        "autovacuum": fig.autovacuum,
        "seesEverySession": fig.reads_all_stats,
    }
