"""`pgwork doctor`: who holds back vacuum on the queue's database, for how long, what the jobs
table holds dead, and whether autovacuum runs (issue 23; values and findings in pgwork.horizon)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pgwork.commands.common import adder, open_queue
from pgwork.horizon import Horizon, figures, findings, rows
from pgwork.tables import json_safe, render


def report(horizon: Horizon) -> dict[str, Any]:
    """The doctor's answer as one JSON-able object (pure)."""
    fig = figures(horizon)
    table = horizon.table
    return {
        "horizon_age_seconds": round(fig.age_seconds, 1) if fig.age_known else None,
        "horizon_xid_age": fig.xid_age,
        "holders": list(rows(horizon)),
        "jobs_dead_tuples": table.dead_tuples,
        "jobs_live_tuples": table.live_tuples,
        "last_autovacuum": table.last_autovacuum,
        "autovacuum": table.autovacuum,
        "sees_every_session": table.reads_all_stats,
        "findings": findings(horizon),
    }


def text(answer: dict[str, Any]) -> str:
    """The doctor's answer for a person (pure)."""
    age = answer["horizon_age_seconds"]
    held = "nobody" if not answer["holders"] else f"{age} s" if age is not None else "unknown (see below)"
    lines = [
        f"vacuum horizon held: {held} (xid age {answer['horizon_xid_age']})",
        f"jobs table: {answer['jobs_dead_tuples']} dead tuples, {answer['jobs_live_tuples']} live; "
        f"autovacuum {'on' if answer['autovacuum'] else 'OFF'}, last run {answer['last_autovacuum'] or 'never'}",
    ]
    if answer["holders"]:
        lines += ["", render(answer["holders"], None)]
    lines += ["", *(f"! {f}" for f in answer["findings"])] if answer["findings"] else ["", "no findings"]
    return "\n".join(lines)


def cmd_doctor(args: argparse.Namespace) -> int:
    with open_queue(args) as q:
        answer = report(q.vacuum_horizon())
    if args.json:
        print(json.dumps(json_safe(answer), default=str, indent=2, allow_nan=False))
    else:
        print(text(answer))
    return 1 if args.strict and answer["findings"] else 0


def register(sub: Any) -> None:
    p = adder(sub)(
        "doctor",
        cmd_doctor,
        "who holds back vacuum on the queue's database (the oldest snapshot, its pid, application, client), "
        "the jobs table's dead tuples, and whether autovacuum runs",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--strict", action="store_true", help="exit 1 when there is a finding (for scripts and probes)")
