"""The failover scenario of `pgwork chaos`: a real streaming standby, the primary killed with
SIGKILL mid-run and the standby promoted; workers and the reaper on a multi-host connection string
follow it, and every invariant holds on the new primary, under synchronous and asynchronous
replication. Synchronous replication loses no finish; asynchronous may (and is then judged by the
same invariants: the job runs again, its result is written once)."""

from __future__ import annotations

import math

import pytest

from pgwork.tools.chaos import failover
from pgwork.tools.chaos.harness import Config

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", failover.MODES)
def test_workers_follow_a_promoted_standby_and_every_invariant_holds(mode: str) -> None:
    config = Config(jobs=240, workers=2, concurrency=2, duration=10.0, settle=60.0)
    report, figures = failover.run(config, mode)
    assert report.ok, report.render()
    assert report.figures.succeeded + report.figures.dead == config.jobs
    assert report.worker_crashes == 0 and report.password_leaks == 0
    assert figures.finished_before_crash > 0, "the kill came before any job finished: nothing was tested"
    if mode == "sync":
        assert figures.finished_before_on_new >= figures.finished_before_crash
    # The new primary took claims and finishes after the kill.
    assert math.isfinite(figures.first_claim_seconds) and math.isfinite(figures.first_finish_seconds)
    assert figures.first_claim_seconds < 30 and figures.first_finish_seconds < 30
