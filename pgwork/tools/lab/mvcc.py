"""Experiment `mvcc` (issue 23): the claim under a held vacuum horizon, pgwork beside pgqueuer and the
reference design in the same run, all three at once on one database.

Each system gets a fixed offered rate from a producer (pgwork_lanes, mvcc_pgqueuer) and is drained:
pgwork by real `pgwork worker` processes (a probe claims beside them, timed), pgqueuer by its own
QueueManager on asyncpg (its dequeues timed in place), the reference design by two bare loops. After a
warm-up, a snapshot is held for `hold` seconds: (a) by a REPEATABLE READ transaction that read the
jobs tables, (b) by one that read only another table, (c) by nobody; then released, and the run goes
on for `recover` seconds. Per bucket (a minute in the full form): claim p50/p99, backlog, dead tuples.
Recovery: seconds from the release to the first 5 s window whose claim p50 is within 1.25x of the
warm-up's and whose backlog is under one second of offered work.

Durations and rate: PGWORK_LAB_MVCC="rate=150,warm=15,hold=150,recover=60,bucket=30" (jobs/s per
system, seconds). The full form is 500 jobs/s for 10 minutes, for a host that sustains it. `solo=1`
runs pgwork alone: on a two-core host the peers' claims, slowing under the held horizon, take CPU
from every process, pgwork's included; alone, pgwork's own growth shows apart from theirs.
Each bucket also counts the autovacuum runs on pgwork's tables (pg_stat_user_tables): under a
held horizon they remove nothing and start again, CPU taken from the claims.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import psycopg

from pgwork.tools.fleet import WorkerFleet, worker_env
from pgwork.tools.lab import NOOP_JOB_TYPE, query
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.stats import percentile

NAME = "mvcc"
ENV = "PGWORK_LAB_MVCC"
APP = "pgwork.tools.lab.noop_app"
CASES = {"c": "nobody", "b": "a report that read another table", "a": "a report that read the jobs tables"}
SAMPLE_EVERY = 5.0
RECOVERED_WITHIN = 1.25


@dataclass(frozen=True)
class Plan:
    rate: float  # jobs/s offered to each system
    warm: float
    hold: float
    recover: float
    bucket: float
    workers: int = 2
    concurrency: int = 4
    cases: tuple[str, ...] = ("c", "b", "a")
    solo: bool = False  # pgwork alone: no reference lanes, no pgqueuer
    # Seconds the lanes and workers get to start (Python's start-up on a loaded two-core machine)
    # before every lane begins at once.
    start_after: float = 20.0


def plan(quick: bool) -> Plan:
    # --quick only shows the machinery works (one case, seconds long); the figures need the full form.
    base = Plan(20, 2, 4, 2, 2, cases=("b",), start_after=8.0) if quick else Plan(500, 30, 600, 120, 60)
    return configured(base, os.environ.get(ENV, ""))


def configured(base: Plan, text: str) -> Plan:
    """`base` with PGWORK_LAB_MVCC's `name=value` pairs applied (pure); a bad pair is one clear error."""
    fields: dict[str, float | bool | tuple[str, ...]] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = pair.partition("=")
        if name == "cases" and set(value) <= set(CASES) and value:
            fields["cases"] = tuple(value)
            continue
        if name == "solo" and value in ("0", "1"):
            fields["solo"] = value == "1"
            continue
        if name not in ("rate", "warm", "hold", "recover", "bucket", "workers", "concurrency"):
            raise ValueError(f"{ENV}: unknown setting {name!r}; use rate, warm, hold, recover, bucket, workers, "
                             "concurrency (numbers), cases (letters of abc) or solo (0 or 1)")  # fmt: skip
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{ENV}: {name}={value!r} is not a number, e.g. {name}=60") from None
        if not number > 0 or math.isinf(number):
            raise ValueError(f"{ENV}: {name} must be a positive number, got {value!r}")
        fields[name] = int(number) if name in ("workers", "concurrency") else number
    return replace(base, **fields)  # type: ignore[arg-type]


@dataclass
class Timeline:
    hold_at: float = 0.0
    release_at: float = 0.0
    samples: list[Sample] | None = None
    vacuums: list[tuple[float, int]] | None = None  # (epoch, autovacuum runs so far on pgwork's tables)


def _hold(lab: LabDatabase, case: str, peer: bool) -> psycopg.Connection | None:
    if case == "c":
        return None
    conn = psycopg.connect(lab.dsn, application_name="pgwork-lab-mvcc-report")
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    if case == "a":
        conn.execute(query("mvcc_hold_jobs"))
        if peer and lab.one("mvcc_has_pgqueuer")["present"]:
            conn.execute("SELECT count(*) FROM pgqueuer")
    else:
        conn.execute(query("mvcc_hold_other"))
    return conn


def _reset(lab: LabDatabase) -> None:
    lab.run("mvcc_reset_pgwork")
    lab.run("ref_reset")
    lab.run("mvcc_vacuum")


def _lanes(
    lab: LabDatabase, p: Plan, seconds: float, out: Path, *, peer: bool, start_at: float
) -> dict[str, subprocess.Popen[bytes]]:
    """One process per lane: pgwork's; unless p.solo, the reference's two and pgqueuer's (if `peer`)."""
    env = {**worker_env(lab.dsn), "PGWORK_LAB_MVCC_START": str(start_at)}
    mod = "pgwork.tools.lab."
    commands = {
        "pgwork": [sys.executable, "-m", mod + "mvcc_lanes", "pgwork", str(p.rate), str(seconds), str(out / "pgwork")],
    }
    # The reference design's bare loop is one connection doing a round trip per claim and per
    # completion: two loops (each with its own producer at half the rate) keep up where one would not.
    for n in () if p.solo else (1, 2):
        commands[f"reference{n}"] = [
            sys.executable, "-m", mod + "mvcc_lanes", "reference", str(p.rate / 2), str(seconds),
            str(out / f"reference{n}"),
        ]  # fmt: skip
    if peer and not p.solo:
        commands["pgqueuer"] = [
            sys.executable,
            "-m",
            mod + "mvcc_pgqueuer",
            str(p.rate),
            str(seconds),
            str(out / "pgqueuer"),
        ]
    return {name: subprocess.Popen(c, env=env, stderr=subprocess.PIPE) for name, c in commands.items()}


Claims = dict[str, list[tuple[float, float]]]  # system -> [(epoch, claim ms)]
Sample = tuple[float, str, int | None, int]  # (epoch, system, backlog, dead tuples)


def run_case(
    lab: LabDatabase, p: Plan, case: str, peer: bool, say: Callable[[str], None]
) -> tuple[Timeline, Claims, dict[str, int]]:
    _reset(lab)
    logs = Path(tempfile.mkdtemp(prefix="pgwork-lab-mvcc-"))
    fleet = WorkerFleet(lab.dsn, APP, logs, ("--job-types", NOOP_JOB_TYPE, "--grace", "5s"))
    for i in range(p.workers):
        fleet.start(f"mvcc-{case}-{i}", "--concurrency", str(p.concurrency))
    seconds = p.warm + p.hold + p.recover
    started = time.time() + p.start_after
    lanes = _lanes(lab, p, seconds, logs, peer=peer, start_at=started)
    line = Timeline(samples=[], vacuums=[])
    time.sleep(max(0.0, started - time.time()))
    line.hold_at = started + p.warm
    line.release_at = line.hold_at + p.hold
    holder: psycopg.Connection | None = None
    held = released = False
    try:
        while any(proc.poll() is None for proc in lanes.values()):
            now = time.time()
            if not held and now >= line.hold_at:
                holder = _hold(lab, case, peer)  # None in case (c): the same timeline, nobody holding
                line.hold_at = now
                held = True
            if held and not released and now >= line.release_at:
                if holder is not None:
                    holder.rollback()
                    holder.close()
                    holder = None
                line.release_at = time.time()
                released = True
            rows = [r for r in lab.run("mvcc_sample") if not p.solo or r["system"] == "pgwork"]
            if peer and not p.solo and lab.one("mvcc_has_pgqueuer")["present"]:
                rows += lab.run("mvcc_sample_pgqueuer")
            for r in rows:
                line.samples.append((now, str(r["system"]), r["backlog"], int(r["dead"])))  # type: ignore[union-attr]
            line.vacuums.append((now, int(lab.one("mvcc_autovacuums")["runs"])))  # type: ignore[union-attr]
            wake = now + SAMPLE_EVERY
            for event in (line.hold_at, line.release_at):
                if now < event < wake:
                    wake = event
            time.sleep(max(0.0, wake - time.time()))
    finally:
        if holder is not None:
            holder.close()
        fleet.stop_all()
        for proc in lanes.values():
            if proc.poll() is None:  # the run was cut short: no lane outlives it
                proc.kill()
                proc.wait(10)
    claims: Claims = {}
    produced: dict[str, int] = {}
    for name, proc in lanes.items():
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.returncode != 0 or not (logs / name).exists():
            raise RuntimeError(f"mvcc: the {name} lane failed (exit {proc.returncode}): {err.strip()[-400:]}")
        data = json.loads((logs / name).read_text())
        system = name.rstrip("12")  # reference1 and reference2 are one system
        claims.setdefault(system, []).extend((float(t), float(ms)) for t, ms in data["claims"])
        produced[system] = produced.get(system, 0) + int(data["produced"])
    shutil.rmtree(logs, ignore_errors=True)
    say(f"  case {case} ({CASES[case]}): " + ", ".join(f"{n} {len(c)} claims" for n, c in claims.items()))
    return line, claims, produced


def windows(claims: Sequence[tuple[float, float]], start: float, stop: float, width: float) -> list[list[float]]:
    """Claim milliseconds in consecutive windows of `width` seconds from `start` to `stop` (pure)."""
    # Whole windows; a remainder under half a window joins the last (the hold starts and ends on
    # the sampling loop's tick, a fraction of a second off).
    count = max(1, round((stop - start) / width)) if stop > start else 0
    out: list[list[float]] = [[] for _ in range(count)]
    for t, ms in claims:
        if start <= t < stop:
            out[min(count - 1, int((t - start) // width))].append(ms)
    return out


def last_sample(samples: Sequence[Sample], system: str, before: float) -> tuple[int | None, int]:
    """The newest (backlog, dead) of `system` sampled before `before` (pure)."""
    found = [(b, d) for t, s, b, d in samples if s == system and t < before]
    return found[-1] if found else (None, 0)


def runs_between(vacuums: Sequence[tuple[float, int]], start: float, stop: float) -> int:
    """Autovacuum runs counted between the samples nearest before `start` and `stop` (pure)."""
    before = [n for t, n in vacuums if t < start]
    until = [n for t, n in vacuums if t < stop]
    if not until:
        return 0
    return until[-1] - (before[-1] if before else until[0])


def recovery(
    claims: Sequence[tuple[float, float]],
    samples: Sequence[Sample],
    *,
    system: str,
    fresh_p50: float,
    release: float,
    end: float,
    rate: float,
) -> float:
    """Seconds from `release` to the first 5 s window whose p50 is within RECOVERED_WITHIN x `fresh_p50`
    and whose backlog (sampled at its end) is under one second of offered work; NaN if none (pure)."""
    for i, w in enumerate(windows(claims, release, end, SAMPLE_EVERY)):
        backlog, _ = last_sample(samples, system, release + (i + 1) * SAMPLE_EVERY + 0.5)
        if w and percentile(w, 50) <= RECOVERED_WITHIN * fresh_p50 and (backlog or 0) < rate:
            return i * SAMPLE_EVERY
    return math.nan


def figures(
    p: Plan, case: str, line: Timeline, claims: Mapping[str, Sequence[tuple[float, float]]], produced: Mapping[str, int]
) -> list[Measurement]:
    """The case's measurements (pure): per bucket of the hold, and a summary row."""
    out: list[Measurement] = []
    samples = line.samples or []
    for system, cs in claims.items():
        series = f"{system}, case {case}"
        warm = [ms for t, ms in cs if line.hold_at - p.warm <= t < line.hold_at]
        fresh = percentile(warm, 50)
        buckets = windows(cs, line.hold_at, line.release_at, p.bucket)
        for i, b in enumerate(buckets):
            x = f"{(i + 1) * p.bucket:g} s"
            backlog, dead = last_sample(samples, system, line.hold_at + (i + 1) * p.bucket + 0.5)
            out += [
                Measurement(NAME, series, x, "claim p50", percentile(b, 50), "ms"),
                Measurement(NAME, series, x, "claim p99", percentile(b, 99), "ms"),
                Measurement(NAME, series, x, "backlog", backlog if backlog is not None else math.nan),
                Measurement(NAME, series, x, "dead tuples", dead),
            ]
            if system == "pgwork":
                start = line.hold_at + i * p.bucket + 0.5
                runs = runs_between(line.vacuums or [], start, start + p.bucket)
                out.append(Measurement(NAME, series, x, "autovacuums", runs))
        end = line.release_at + p.recover
        last = percentile(buckets[-1] if buckets else [], 50)
        back = recovery(cs, samples, system=system, fresh_p50=fresh, release=line.release_at, end=end, rate=p.rate)
        for metric, value, unit in (
            ("offered", p.rate, "jobs/s"),
            ("produced", produced.get(system, 0), ""),
            ("claim p50 warm-up", fresh, "ms"),
            ("claim p50 last bucket", last, "ms"),
            ("last / warm-up", last / fresh if fresh else math.nan, "x"),
            ("recovery", back, "s"),
        ):
            out.append(Measurement(NAME, series, "summary", metric, value, unit))
    return out


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    lab.run("ref_setup")
    peer = importlib.util.find_spec("pgqueuer") is not None and importlib.util.find_spec("asyncpg") is not None
    if not peer:
        say("  pgqueuer or asyncpg is not installed (pip install 'pgwork[peers]'): no peer series")
    say(f"  {p.rate:g} jobs/s per system; warm-up {p.warm:g}s, hold {p.hold:g}s, recovery {p.recover:g}s")
    out: list[Measurement] = []
    for case in p.cases:
        line, claims, produced = run_case(lab, p, case, peer, say)
        found = figures(p, case, line, claims, produced)
        for m in found:
            if m.x == "summary" and m.metric in ("claim p50 warm-up", "claim p50 last bucket", "recovery"):
                say(f"    {m.series:<22} {m.metric:<22} {m.value:8.2f} {m.unit}")
        out += found
    return Outcome(out, [], 0)
