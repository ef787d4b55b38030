"""The injector's plan: which fault, when, to which worker slot. A pure function of the seed.

The same seed always gives the same plan, so a failing run can be replayed. The first faults
are each kind once, in a seeded order, so even a short run exercises every one of them.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass


class FaultKind(enum.StrEnum):
    KILL_WORKER = "kill_worker"  # SIGKILL one worker; a replacement starts, as a Deployment would
    RESTART_DB = "restart_db"  # pg_ctl restart -m fast: every connection is cut
    CRASH_DB = "crash_db"  # pg_ctl restart -m immediate: no shutdown checkpoint, crash recovery on start
    TERMINATE_BACKENDS = "terminate_backends"  # pg_terminate_backend on one worker's sessions
    PAUSE_WORKER = "pause_worker"  # SIGSTOP past the lease, then SIGCONT


KINDS = tuple(FaultKind)
# Later faults: workers die and lose connections more often than the database restarts.
WEIGHTS = {
    FaultKind.KILL_WORKER: 3,
    FaultKind.RESTART_DB: 1,
    FaultKind.CRASH_DB: 1,
    FaultKind.TERMINATE_BACKENDS: 3,
    FaultKind.PAUSE_WORKER: 2,
}
DATABASE_FAULTS = frozenset({FaultKind.RESTART_DB, FaultKind.CRASH_DB})
# Restarts closer together than this become backend terminations: a server that never
# stays up measures nothing.
MIN_RESTART_GAP = 6.0


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the run starts
    kind: FaultKind
    slot: int  # which worker slot (ignored for the database faults)
    hold: float = 0.0  # PAUSE_WORKER: how long the worker stays stopped


def plan(
    seed: int,
    *,
    duration: float,
    workers: int,
    lease: float,
    reap_every: float,
    faults_per_minute: float = 20.0,
    start: float = 2.0,
) -> list[Fault]:
    """Faults between `start` and `duration`, about `faults_per_minute` of them per minute.

    A paused worker stays stopped for longer than its lease plus two reaper rounds (so its jobs
    are reclaimed while it sleeps), and no other fault targets it meanwhile.
    """
    if duration <= 0 or workers < 1 or lease <= 0 or reap_every <= 0 or faults_per_minute <= 0:
        raise ValueError("duration, workers, lease, reap_every and faults_per_minute must be positive")
    rng = random.Random(seed)
    mean_gap = 60.0 / faults_per_minute
    kinds = list(KINDS)
    rng.shuffle(kinds)
    faults: list[Fault] = []
    busy_until = [0.0] * workers  # a paused slot is off limits until it resumes
    last_restart = -MIN_RESTART_GAP
    at = start
    while at < duration:
        forced = len(faults) < len(kinds)
        kind = kinds[len(faults)] if forced else _weighted(rng)
        free = [s for s in range(workers) if busy_until[s] <= at]
        restart_ok = at - last_restart >= MIN_RESTART_GAP
        possible = restart_ok if kind in DATABASE_FAULTS else bool(free)
        if not possible:
            if forced:
                at += 0.5  # keep the kind; try again a little later
                continue
            if free:
                kind = FaultKind.TERMINATE_BACKENDS
            elif restart_ok:
                kind = FaultKind.RESTART_DB
            else:
                at += mean_gap  # nothing safe to do now
                continue
        slot = rng.choice(free) if free else 0
        hold = 0.0
        if kind is FaultKind.PAUSE_WORKER:
            hold = round(lease + 2 * reap_every + rng.uniform(0.5, lease), 3)
            busy_until[slot] = at + hold + 0.5
        elif kind in DATABASE_FAULTS:
            last_restart = at
        faults.append(Fault(round(at, 3), kind, slot, hold))
        at += max(0.5, rng.expovariate(1.0 / mean_gap))
    return faults


def _weighted(rng: random.Random) -> FaultKind:
    return rng.choices(KINDS, weights=[WEIGHTS[k] for k in KINDS])[0]


def counts(faults: list[Fault]) -> dict[FaultKind, int]:
    out = dict.fromkeys(KINDS, 0)
    for f in faults:
        out[f.kind] += 1
    return out
