"""The failover run (`pgwork chaos --failover sync|async`): a primary and a real streaming
standby (pg_basebackup, standby.signal, primary_conninfo), workers and the reaper connected with
`host=a,b port=p1,p2 target_session_attrs=read-write`; mid-run the primary is killed with
SIGKILL and the standby promoted with `pg_ctl promote`; then every invariant of the chaos run is
checked on the new primary (0 lost, 0 duplicated effects, attempt_count = claims, no stale-owner
writes), and the time from the kill to the promotion, the first claim and the first finish the new
primary saw is measured. `sync` is synchronous replication (synchronous_standby_names): nothing committed is
lost. `async` (PostgreSQL's default) may lose the last commits before the crash: what was lost is
counted (jobs finished on the old primary that are not on the new one) and must still end with
every invariant held, each effect written once.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass

from pgwork.db import Queue
from pgwork.reaper import Reaper, ReaperConfig
from pgwork.tools.chaos import invariants, server
from pgwork.tools.chaos.harness import REAPER_ROLE, WORKER_ROLE, Config, Report, Run
from pgwork.tools.fleet import WorkerFleet

log = logging.getLogger("pgwork.tools.chaos")
MODES = ("sync", "async")


@dataclass(frozen=True)
class FailoverFigures:
    mode: str
    finished_before_crash: int  # as the old primary said just before the kill
    finished_before_on_new: int  # as the new primary has it: the difference is what was lost
    promote_seconds: float  # pg_ctl promote, from the kill
    first_claim_seconds: float  # from the kill, the first claim the new primary saw
    first_finish_seconds: float  # from the kill, the first finish the new primary saw


def multi_host(primary: server.PrivateServer, standby: server.PrivateServer, *, user: str, password: str) -> str:
    return (
        f"postgresql://{user}:{password}@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/chaos"
        "?target_session_attrs=read-write&connect_timeout=2"
    )


class FailoverRun(Run):
    def __init__(self, config: Config, primary: server.PrivateServer, mode: str) -> None:
        super().__init__(config, primary)
        self.mode = mode
        self.standby: server.PrivateServer | None = None

    def switch_to_both(self, standby: server.PrivateServer) -> None:
        """Every connection from now on names both servers and takes whichever is the primary."""
        self.standby = standby
        self.admin_dsn = multi_host(self.server, standby, user=server.SUPERUSER, password=self.server.password)
        self.worker_url = multi_host(self.server, standby, user=WORKER_ROLE, password=self.worker_password)
        self.fleet = WorkerFleet(self.worker_url, self.fleet.app, self.log_dir, self.fleet.options, isolated=True)

    def execute_failover(self) -> tuple[Report, FailoverFigures]:
        c = self.config
        self.prepare()
        self.switch_to_both(server.standby(self.server, synchronous=self.mode == "sync"))
        reaper_dsn = multi_host(self.server, self.standby_server, user=REAPER_ROLE, password=self.worker_password)
        reaper = Reaper(
            lambda: Queue(reaper_dsn, pool_size=1, application_name=invariants.REAPER_APP),
            ReaperConfig(every=c.reap_every, loop_for=None),
            on_error=lambda exc: log.debug("reap failed: %s", exc),
        )
        stop_reaper = threading.Event()
        reaper_thread = threading.Thread(target=reaper.loop, args=(stop_reaper,), daemon=True)
        began = time.monotonic()
        for slot in self.slots:
            self.start_worker(slot)
        reaper_thread.start()
        crash_at = c.duration * 0.4
        crashed = False
        before = 0
        kill_time = promoted_at = 0.0
        try:
            while True:
                clock = time.monotonic() - began
                # Mid-run: past 40% of the window and once some jobs finished (slow starts on a
                # loaded machine must not turn this into a crash before any work).
                row = self._admin_row("after_promotion", {"at": time.time() + 3600}) if not crashed else None
                if row is not None and clock >= crash_at and int(row["finished_before"]) > 0:
                    before = int(row["finished_before"])
                    kill_time = time.time()
                    server.crash(self.server)
                    server.promote(self.standby_server)
                    promoted_at = time.time()
                    crashed = True
                    log.info("%6.1fs primary killed (-9), standby promoted in %.2fs", clock, promoted_at - kill_time)
                self.watch_workers(clock)
                if crashed and clock >= c.duration:
                    left = self._unfinished()
                    if left == 0 or clock > c.duration + c.settle:
                        break
                time.sleep(0.1)
        finally:
            self.wind_down(stop_reaper, reaper_thread, reaper)
        self.final_reap()
        row = self._admin_row("after_promotion", {"at": kill_time})
        assert row is not None
        if self._admin is not None:
            self._admin.close()
        figures = FailoverFigures(
            self.mode,
            before,
            int(row["finished_before"]),
            promoted_at - kill_time,
            float(row["first_claim"] if row["first_claim"] is not None else float("nan")),
            float(row["first_finish"] if row["first_finish"] is not None else float("nan")),
        )
        return self.judge(reaper, time.monotonic() - began), figures

    @property
    def standby_server(self) -> server.PrivateServer:
        assert self.standby is not None
        return self.standby


def run(config: Config, mode: str, *, keep: bool = False) -> tuple[Report, FailoverFigures]:
    config.check()
    primary = server.create()
    failover = FailoverRun(config, primary, mode)
    try:
        report, figures = failover.execute_failover()
    except BaseException:
        log.error("failover run failed; files kept in %s", primary.base)
        primary.stop()
        if failover.standby is not None:
            failover.standby.stop()
        raise
    for srv in (primary, failover.standby):
        if srv is None:
            continue
        if keep or not report.ok:
            srv.stop()
        else:
            srv.remove()
    return report, figures


def describe(f: FailoverFigures) -> list[tuple[str, object]]:
    return [
        ("replication", f.mode),
        ("jobs finished before the kill (old primary)", f.finished_before_crash),
        ("of them on the new primary", f.finished_before_on_new),
        ("finishes lost with the old primary", max(0, f.finished_before_crash - f.finished_before_on_new)),
        ("kill -> promoted, pg_ctl promote -w returned (ms)", _ms(f.promote_seconds)),
        ("kill -> first claim on the new primary (ms)", _ms(f.first_claim_seconds)),
        ("kill -> first finish on the new primary (ms)", _ms(f.first_finish_seconds)),
    ]


def _ms(seconds: float) -> int | str:
    return "none" if math.isnan(seconds) else round(seconds * 1000)
