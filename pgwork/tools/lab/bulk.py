"""Experiment 7: bulk enqueue for a backfill, against a raw COPY into the jobs table in the same run.

The same N payloads go in three ways, each into an emptied jobs table: `raw COPY` (the floor a
loader could reach: no validation, keys made up by the loader), `Queue.load_jobs` (validated,
keys derived, COPY straight into pgwork.jobs) and `Queue.enqueue_many` (the same, through a
staging table so the ids come back in order). Rates are wall-clock jobs/s on the client, including
making the payloads; the rounds alternate so a drifting machine hurts no path alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pgwork.models import NewJob
from pgwork.tools.lab import query
from pgwork.tools.lab.labdb import JOB_TYPE, LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.stats import percentile

NAME = "bulk"
PATHS = ("raw COPY", "load_jobs", "enqueue_many")


@dataclass(frozen=True)
class Plan:
    jobs: int
    rounds: int


def plan(quick: bool) -> Plan:
    return Plan(3_000, 1) if quick else Plan(1_000_000, 3)


def payload(n: int) -> dict[str, object]:
    return {"document": f"s3://backfill/2026/{n:09d}.pdf", "n": n, "lang": "en"}


def _jobs(count: int) -> Iterator[NewJob]:
    return (NewJob(JOB_TYPE, payload(n)) for n in range(count))


def _raw(lab: LabDatabase, count: int) -> None:
    with lab.conn.transaction(), lab.conn.cursor() as cur, cur.copy(query("raw_copy")) as copy:
        chunk: list[str] = []
        for n in range(count):
            chunk.append(f"{JOB_TYPE}\t{json.dumps(payload(n))}\traw-{n}\n")
            if len(chunk) == 5000:
                copy.write("".join(chunk))
                chunk.clear()
        copy.write("".join(chunk))


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    ways: dict[str, Callable[[], object]] = {
        "raw COPY": lambda: _raw(lab, p.jobs),
        "load_jobs": lambda: lab.queue.load_jobs(_jobs(p.jobs)),
        "enqueue_many": lambda: lab.queue.enqueue_many(_jobs(p.jobs)),
    }
    rates: dict[str, list[float]] = {w: [] for w in PATHS}
    violations: list[str] = []
    facts = 0
    for r in range(p.rounds):
        order = PATHS if r % 2 == 0 else PATHS[::-1]
        for way in order:
            lab.reset()
            lab.run("vacuum_analyze")
            started = time.perf_counter()
            ways[way]()
            rates[way].append(p.jobs / (time.perf_counter() - started))
            fact = lab.one("bulk_facts")
            facts += 1
            if (fact["jobs"], fact["fresh"], fact["keys"]) != (p.jobs, p.jobs, p.jobs):
                violations.append(f"bulk/{way}: {dict(fact)} after loading {p.jobs} jobs")
            say(f"  {way:<13} {p.jobs:,} jobs: {rates[way][-1]:,.0f} jobs/s")
    lab.reset()
    out: list[Measurement] = []
    raw = percentile(rates["raw COPY"], 50)
    for way in PATHS:
        rate = percentile(rates[way], 50)
        x = str(p.jobs)
        out += [
            Measurement(NAME, way, x, "rounds", p.rounds),
            Measurement(NAME, way, x, "jobs/s (median)", rate, "jobs/s"),
            Measurement(NAME, way, x, "share of raw COPY", 100.0 * rate / raw, "%"),
        ]
    return Outcome(out, violations, facts)
