"""The alert rules in a real Prometheus, fed by real parts: the Debian `prometheus` server on
127.0.0.1 scrapes real `pgwork worker` processes (against the test PostgreSQL) and the real
operator (kopf against the kmock emulator), and each scenario the runbooks promise is played:
a worker SIGSTOPped mid-job, a heartbeat blocked by a row lock, a backlog with no workers (and
an old one), a database that goes down, jobs going dead, handlers that ignore their timeout. Each
alert must reach `firing` in /api/v1/alerts, and nothing may fire (or even go pending) for the
queues and workers that are healthy, nor before its scenario begins.

The project's rules are used as they are, with every duration in `for:`, range selectors and
`offset` divided by 60 (minutes become seconds) so the test takes about a minute and a half;
thresholds are kept (a backlog "older than 10 minutes" is made by back-dating a job), except where
the age is a real transaction's, which nothing can back-date: those are divided by 60 too
(CLOCK_THRESHOLDS).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from pgwork import embedded
from pgwork.db import Queue, migrate
from pgwork.operator.db import POLL_POOL_TIMEOUT
from pgwork.operator.handlers import OperatorOptions
from tests.support import stories
from tests.support.operator import Emulator, collect_leftovers, running
from tests.support.ship import MONITORING
from tests.support.waiting import wait_for
from tests.support.workers import WorkerProcess, start_worker

pytestmark = pytest.mark.slow

RULES = MONITORING / "prometheus" / "pgwork-alerts.yaml"
NS = "team-a"
SCALE = 60  # minutes in the rules become seconds here
# How long a scenario may take to fire: its shortened `for`, its threshold, scrape and rule
# intervals (1s each) and the operator's poll, with room for a loaded machine.
FIRE_WITHIN = 40.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the rules, shortened ------------------------------------------------------------------

_DURATION = re.compile(r"(\d+)([smh])")
_UNIT = {"s": 1, "m": 60, "h": 3600}


def shorten(duration: str) -> str:
    match = _DURATION.fullmatch(duration)
    assert match, duration
    seconds = int(match.group(1)) * _UNIT[match.group(2)]
    return f"{max(1, seconds // SCALE)}s"


def shorten_expr(expr: str) -> str:
    expr = re.sub(r"\[(\d+[smh])\]", lambda m: f"[{shorten(m.group(1))}]", expr)
    return re.sub(r"offset (\d+[smh])", lambda m: f"offset {shorten(m.group(1))}", expr)


# Alert -> (threshold in the rule, here): ages read from PostgreSQL's own clock (a snapshot's
# transaction start), which a test can only wait out.
CLOCK_THRESHOLDS = {"PgworkVacuumHorizonHeld": ("> 300", "> 5")}


def shortened_rules() -> dict[str, Any]:
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["expr"] = shorten_expr(rule["expr"])
            if rule.get("alert") in CLOCK_THRESHOLDS:
                kept, short = CLOCK_THRESHOLDS[rule["alert"]]
                assert kept in rule["expr"], rule["expr"]
                rule["expr"] = rule["expr"].replace(kept, short)
            if "for" in rule:
                rule["for"] = shorten(rule["for"])
    return rules


@pytest.mark.parametrize(
    ("expr", "short"),
    [
        ("rate(x[5m])", "rate(x[5s])"),
        ("x - x offset 15m", "x - x offset 15s"),
        ("last_over_time(x[1h])", "last_over_time(x[60s])"),
        ("x > 600", "x > 600"),
    ],
)
def test_shorten_expr(expr: str, short: str) -> None:
    assert shorten_expr(expr) == short


def test_every_rule_is_shortened() -> None:
    for group in shortened_rules()["groups"]:
        for rule in group["rules"]:
            assert not re.search(r"\[\d+[mh]\]|offset \d+[mh]", rule["expr"]), rule["expr"]
            # The longest, PgworkJobsWithoutConsumer's 15m, becomes 15s.
            assert re.fullmatch(r"\d+s", rule["for"]) and int(rule["for"][:-1]) <= 15, rule["for"]


# -- Prometheus ----------------------------------------------------------------------------


class Prometheus:
    def __init__(self, workdir: Path, operator_port: int) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.skip("prometheus is not installed (Debian package `prometheus`): run .ci/install-tools.sh")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.targets = workdir / "workers.json"
        self.targets.write_text("[]")
        (workdir / "rules.yaml").write_text(yaml.safe_dump(shortened_rules(), sort_keys=False))
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "800ms", "evaluation_interval": "1s"},
            "rule_files": [str(workdir / "rules.yaml")],
            "scrape_configs": [
                # The operator's gauges carry the JobQueue's namespace: honor_labels, as docs/grafana.md says.
                {
                    "job_name": "pgwork-operator",
                    "honor_labels": True,
                    "static_configs": [{"targets": [f"127.0.0.1:{operator_port}"]}],
                },
                # Workers, with the labels the chart's PodMonitor gives them (namespace, jobqueue, pod).
                {
                    "job_name": "pgwork-workers",
                    "file_sd_configs": [{"files": [str(self.targets)], "refresh_interval": "1s"}],
                },
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        self.log = workdir / "prometheus.log"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--web.console.templates=/nonexistent",
                    "--web.console.libraries=/nonexistent",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self._workers: list[dict[str, Any]] = []
        wait_for(self.ready, 30, interval=0.2, what="Prometheus ready")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def add_worker(self, port: int, jobqueue: str, pod: str) -> None:
        self._workers.append(
            {"targets": [f"127.0.0.1:{port}"], "labels": {"namespace": NS, "jobqueue": jobqueue, "pod": pod}}
        )
        tmp = self.targets.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._workers))
        tmp.replace(self.targets)

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=5) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.api("query", query=expr)["result"])

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def subject(alert: dict[str, Any]) -> str:
    """What an alert is about: the worker pod, else the JobQueue."""
    labels = alert["labels"]
    return str(labels.get("pod") or labels.get("jobqueue"))


@dataclass
class Seen:
    pending: float
    firing: float | None = None
    last: float = 0.0


@dataclass
class Recorder:
    """Polls /api/v1/alerts all along; every (alert, subject) ever pending or firing, and when."""

    prometheus: Prometheus
    seen: dict[tuple[str, str], Seen] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Recorder:
        threading.Thread(target=self._run, name="alerts-recorder", daemon=True).start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                alerts = self.prometheus.alerts()
            except OSError:
                continue
            now = time.time()
            with self._lock:
                for alert in alerts:
                    key = (alert["labels"]["alertname"], subject(alert))
                    seen = self.seen.setdefault(key, Seen(pending=now))
                    seen.last = now
                    if alert["state"] == "firing" and seen.firing is None:
                        seen.firing = now

    def stop(self) -> None:
        self._stop.set()

    def get(self, alertname: str, about: str) -> Seen | None:
        with self._lock:
            return self.seen.get((alertname, about))

    def active(self) -> set[tuple[str, str]]:
        return {(a["labels"]["alertname"], subject(a)) for a in self.prometheus.alerts()}


# -- the stack -----------------------------------------------------------------------------


@dataclass
class Stack:
    prometheus: Prometheus
    recorder: Recorder
    client: Any
    databases: Any
    template: str
    log_dir: Path
    workers: list[WorkerProcess] = field(default_factory=list)
    dsns: dict[str, str] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    timings: dict[str, float] = field(default_factory=dict)

    def jobqueue(self, name: str, job_types: list[str], *, heartbeat: float, lease: float, **spec: Any) -> str:
        """A JobQueue on its own database (so scenarios never see each other's jobs)."""
        dsn = spec.pop("dsn", None) or self.databases.create(template=self.template)
        self.dsns[name] = dsn
        stories.create_secret(self.client, NS, f"{name}-db", dsn)
        body = stories.spec(
            database={"secretName": f"{name}-db", "migrate": True},
            jobTypes=job_types,
            lease={"durationSeconds": lease, "heartbeatSeconds": heartbeat},
            **spec,
        )
        stories.create_jobqueue(self.client, NS, name, body)
        return dsn

    def worker(self, jobqueue: str, pod: str, *args: str) -> WorkerProcess:
        port = free_port()
        w = start_worker(
            self.dsns[jobqueue],
            self.log_dir,
            self.workers,
            "--metrics-port",
            str(port),
            "--grace",
            "1s",
            *args,
            worker_id=pod,
        )
        self.prometheus.add_worker(port, jobqueue, pod)
        return w

    def scraped(self, expr: str, what: str, timeout: float = 30) -> float:
        """Waits until `expr` has a value (any, 0 included) in Prometheus; returns it."""
        found = wait_for(
            lambda: (v := self.prometheus.value(expr)) is not None and [v], timeout, interval=0.2, what=what
        )
        return float(found[0])

    def firing(self, alertname: str, about: str, since: float, within: float = FIRE_WITHIN) -> float:
        """Waits for the alert to fire; returns seconds from `since` (the trigger) to firing."""
        seen = wait_for(
            lambda: (s := self.recorder.get(alertname, about)) is not None and s.firing is not None and s,
            within,
            interval=0.2,
            what=f"{alertname} firing for {about}",
        )
        assert seen.pending >= since, f"{alertname} for {about} was active before its scenario began"
        took = round(seen.firing - since, 1)
        self.timings[f"{alertname} ({about})"] = took
        return took

    def resolved(self, alertname: str, about: str) -> None:
        wait_for(
            lambda: (alertname, about) not in self.recorder.active(),
            30,
            interval=0.2,
            what=f"{alertname} resolved for {about}",
        )


def migrated(dsn: str) -> str:
    migrate(dsn)
    return dsn


@pytest.fixture(scope="module")
def stack(databases: Any, migrated_template: str) -> Iterator[Stack]:
    workdir = Path(tempfile.mkdtemp(prefix="pgwork-prometheus-"))
    emulator = Emulator().start()
    client = emulator.client()
    operator_port = free_port()
    options = OperatorOptions(
        namespaces=[NS], standalone=True, metrics_port=operator_port, tick_seconds=0.2, retry_backoff_seconds=1.0
    )
    operator = running(emulator, options)
    next(operator)
    prometheus = Prometheus(workdir, operator_port)
    recorder = Recorder(prometheus).start()
    stack = Stack(prometheus, recorder, client, databases, migrated_template, workdir)
    try:
        yield stack
    finally:
        recorder.stop()
        for w in stack.workers:
            if w.alive():
                w.proc.send_signal(signal.SIGCONT)
                w.proc.send_signal(signal.SIGKILL)
                w.proc.wait(10)
        prometheus.stop()
        with pytest.raises(StopIteration):
            next(operator)
        client.close()
        emulator.stop()
        print("\nmeasured time to firing (s):", json.dumps(stack.timings, indent=1))
        shutil.rmtree(workdir, ignore_errors=True)
        # kopf's sessions to the emulator hang off the operator's clients; drop them here, so their
        # ResourceWarnings (errors under filterwarnings=error) are not raised in some later test.
        options.clients = None
        del operator, options, stack
        collect_leftovers()


@pytest.fixture(scope="module")
def steady(stack: Stack) -> WorkerProcess:
    """A healthy queue and worker with a long heartbeat (20s, over the 15s that made the old rule
    fire at every start): backlog with a worker on it, jobs running, heartbeats on time."""
    dsn = stack.jobqueue("steady", ["sleep"], heartbeat=20, lease=60)
    with Queue(dsn) as queue:
        for n in range(3):
            queue.enqueue("sleep", {"seconds": 300, "n": n})
    w = stack.worker("steady", "steady-w", "--heartbeat", "20s", "--lease", "60s")
    stack.scraped('pgwork_jobs_in_flight{pod="steady-w"} == 1', "the steady worker holding a job")
    return w


@pytest.fixture(scope="module")
def dying(stack: Stack) -> str:
    """A queue whose worker takes `permanent` jobs, set up early: PgworkDeadJobsIncreasing compares
    with the count one (shortened) offset ago, so the series must exist that long first."""
    dsn = stack.jobqueue("dying", ["permanent"], heartbeat=1, lease=30)
    stack.worker("dying", "dying-w", "--heartbeat", "1s", "--lease", "30s")
    stack.scraped('pgwork_queue_dead_jobs{jobqueue="dying"} == 0', "the dying queue's dead count")
    return dsn


def long_job(stack: Stack, jobqueue: str, pod: str) -> int:
    with Queue(stack.dsns[jobqueue]) as queue:
        job_id = queue.enqueue("sleep", {"seconds": 300})
    stack.scraped(f'pgwork_jobs_in_flight{{pod="{pod}"}} == 1', f"{pod} holding its job")
    stack.scraped(
        f'pgwork_queue_running_jobs{{jobqueue="{jobqueue}"}} == 1', f"the operator seeing {jobqueue}'s running job"
    )
    return job_id


def test_a_worker_stopped_mid_job_fires_both_heartbeat_alerts(stack: Stack, steady: WorkerProcess, dying: str) -> None:
    stack.jobqueue("frozen", ["sleep"], heartbeat=1, lease=30)
    w = stack.worker("frozen", "frozen-w", "--heartbeat", "1s", "--lease", "30s")
    long_job(stack, "frozen", "frozen-w")
    since = time.time()
    w.signal(signal.SIGSTOP)
    try:
        stack.firing("PgworkWorkerHeartbeatStale", "frozen-w", since)
        stack.firing("PgworkHeartbeatStale", "frozen", since)
        # It fired through the not-scraped branch: the worker's target is down.
        assert stack.prometheus.value('up{pod="frozen-w"}') == 0
    finally:
        w.signal(signal.SIGCONT)
    stack.resolved("PgworkWorkerHeartbeatStale", "frozen-w")
    stack.resolved("PgworkHeartbeatStale", "frozen")
    w.signal(signal.SIGTERM)
    assert w.wait(30) == 0


def test_a_heartbeat_blocked_by_a_row_lock_fires_while_the_worker_still_answers(stack: Stack) -> None:
    dsn = stack.jobqueue("locked", ["sleep"], heartbeat=1, lease=30)
    w = stack.worker("locked", "locked-w", "--heartbeat", "1s", "--lease", "30s")
    job_id = long_job(stack, "locked", "locked-w")
    with psycopg.connect(dsn) as conn:
        conn.execute("select 1 from pgwork.jobs where id = %s for update", (job_id,))
        # Since migration 15 a covered job is renewed by its worker's row alone: hold that too.
        conn.execute("select 1 from pgwork.worker_leases for update")
        since = time.time()
        stack.firing("PgworkWorkerHeartbeatStale", "locked-w", since)
        stack.firing("PgworkHeartbeatStale", "locked", since)
        assert stack.prometheus.value('up{pod="locked-w"}') == 1
        assert (stack.prometheus.value('pgwork_worker_heartbeat_age_seconds{pod="locked-w"}') or 0) > 3
    stack.resolved("PgworkWorkerHeartbeatStale", "locked-w")
    stack.resolved("PgworkHeartbeatStale", "locked")
    w.signal(signal.SIGTERM)
    assert w.wait(30) == 0


def test_a_backlog_with_no_workers_and_an_old_ready_job(stack: Stack) -> None:
    # Pinned to zero replicas (as `kubectl scale jobqueue asleep --replicas 0` does).
    dsn = stack.jobqueue(
        "asleep", ["noop"], heartbeat=1, lease=30, replicas=0, scaling={"minReplicas": 0, "maxReplicas": 4}
    )
    stack.scraped('pgwork_queue_current_replicas{jobqueue="asleep"} == 0', "asleep at zero replicas")
    since = time.time()
    with Queue(dsn) as queue:
        first = queue.enqueue("noop", {"n": 1})
        queue.enqueue("noop", {"n": 2})
    stack.firing("PgworkBacklogWithoutWorkers", "asleep", since)
    assert stack.recorder.get("PgworkBacklogAgeHigh", "asleep") is None, "a fresh backlog is not old"
    # One job has waited 20 minutes: past the 10-minute threshold.
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "update pgwork.jobs set created_at = now() - interval '20 minutes',"
            " available_at = now() - interval '20 minutes' where id = %s",
            (first,),
        )
    aged = time.time()
    stack.firing("PgworkBacklogAgeHigh", "asleep", aged)


def test_a_database_going_down_fires_database_down(stack: Stack) -> None:
    with embedded.throwaway("pgwork-remote-pg-") as server:
        with psycopg.connect(embedded.admin_dsn(server), autocommit=True) as conn:
            conn.execute("create database remote")
        dsn = migrated(str(server.get_uri(database="remote")))
        stack.jobqueue("remote", ["noop"], heartbeat=1, lease=30, dsn=dsn)
        stack.scraped('pgwork_queue_database_up{jobqueue="remote"} == 1', "the remote database up")
        since = time.time()
        pid = server.get_pid()
        assert pid
        os.kill(pid, signal.SIGINT)  # fast shutdown
        # The operator's first failing poll waits at most its poll pool timeout (5 s; it used to be
        # the workers' 30 s) before it reports database_up 0; the alert's own (shortened) `for`
        # comes on top.
        stack.firing("PgworkQueueDatabaseDown", "remote", since, within=FIRE_WITHIN + POLL_POOL_TIMEOUT + 5)


def test_jobs_going_dead_fire_dead_jobs_increasing(stack: Stack, dying: str) -> None:
    # The count must have been scraped one (shortened) offset ago for the comparison to exist.
    stack.scraped('pgwork_queue_dead_jobs{jobqueue="dying"} offset 16s', "the dead count 16s ago", timeout=40)
    assert stack.recorder.get("PgworkDeadJobsIncreasing", "dying") is None, "a flat count fired"
    since = time.time()
    with Queue(dying) as queue:
        for n in range(3):
            queue.enqueue("permanent", {"n": n})
    stack.firing("PgworkDeadJobsIncreasing", "dying", since)
    alert = next(a for a in stack.prometheus.alerts() if a["labels"]["alertname"] == "PgworkDeadJobsIncreasing")
    assert float(alert["value"]) == 3


def test_handlers_ignoring_their_timeout_fire_timeouts_and_abandoned_threads(stack: Stack) -> None:
    """The test app's `stuck` handler has a 1s timeout and ignores the stop: three at once time out
    (PgworkJobsTimingOut, three of a type in the window) and leave three abandoned threads sleeping
    out their 12s (PgworkWorkerAbandonedThreads, held past the shortened 5s `for`)."""
    dsn = stack.jobqueue("hung", ["stuck"], heartbeat=1, lease=30)
    w = stack.worker(
        "hung", "hung-w", "--heartbeat", "1s", "--lease", "30s", "--job-types", "stuck",
        "--concurrency", "3", "--max-abandoned", "1000",
    )  # fmt: skip
    stack.scraped('pgwork_worker_abandoned_threads{pod="hung-w"} == 0', "hung-w's abandoned-thread gauge")
    stack.scraped('pgwork_jobs_timed_out_total{pod="hung-w",job_type="stuck"} == 0', "hung-w's timeout counter")
    since = time.time()
    with Queue(dsn) as queue:
        # Attempts enough that none goes dead (PgworkDeadJobsIncreasing) while the scenario runs.
        ids = [queue.enqueue("stuck", {"seconds": 12, "n": n}, max_attempts=20) for n in range(3)]
        stack.firing("PgworkJobsTimingOut", "hung", since)
        stack.firing("PgworkWorkerAbandonedThreads", "hung-w", since)
        alert = next(a for a in stack.prometheus.alerts() if a["labels"]["alertname"] == "PgworkJobsTimingOut")
        assert alert["labels"]["job_type"] == "stuck" and float(alert["value"]) >= 3
        # Stop the retries: pending ones end at once, a running one when its timeout passes.
        queue.cancel(ids)
        wait_for(
            lambda: all((job := queue.job(i)) is not None and job.status == "cancelled" for i in ids),
            30,
            interval=0.2,
            what="the stuck jobs cancelled",
        )
    # Nothing held any more, so a stop leaves no lease behind; the abandoned threads (daemons, still
    # sleeping) do not hold the drain up, and the alert goes with the worker's series.
    stack.scraped('pgwork_jobs_in_flight{pod="hung-w"} == 0', "hung-w holding nothing")
    w.signal(signal.SIGTERM)
    assert w.wait(30) == 0
    stack.resolved("PgworkWorkerAbandonedThreads", "hung-w")


def test_a_snapshot_held_open_fires_vacuum_horizon_held(stack: Stack) -> None:
    """A reporting session keeps a REPEATABLE READ snapshot that read the jobs table: the operator
    names it (status and gauge) and the alert fires; ending it resolves the alert."""
    dsn = stack.jobqueue("horizon", ["noop"], heartbeat=1, lease=30)
    stack.scraped('pgwork_jobs_autovacuum_enabled{jobqueue="horizon"}', "the horizon queue's vacuum gauges")
    with psycopg.connect(dsn, application_name="nightly-report") as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("select count(*) from pgwork.jobs")
        since = time.time()
        stack.firing("PgworkVacuumHorizonHeld", "horizon", since)
        assert (stack.prometheus.value('pgwork_vacuum_horizon_age_seconds{jobqueue="horizon"}') or 0) > 5
        conn.rollback()
    stack.resolved("PgworkVacuumHorizonHeld", "horizon")


EXPECTED = {
    ("PgworkWorkerHeartbeatStale", "frozen-w"),
    ("PgworkHeartbeatStale", "frozen"),
    ("PgworkWorkerHeartbeatStale", "locked-w"),
    ("PgworkHeartbeatStale", "locked"),
    ("PgworkBacklogWithoutWorkers", "asleep"),
    ("PgworkBacklogAgeHigh", "asleep"),
    ("PgworkQueueDatabaseDown", "remote"),
    ("PgworkDeadJobsIncreasing", "dying"),
    ("PgworkJobsTimingOut", "hung"),
    ("PgworkWorkerAbandonedThreads", "hung-w"),
    ("PgworkVacuumHorizonHeld", "horizon"),
    # The row lock that blocks that scenario's heartbeat is an open transaction with an xid: it
    # holds the horizon too, past the shortened 5 s while the heartbeat alerts come.
    ("PgworkVacuumHorizonHeld", "locked"),
}


def test_nothing_else_ever_fired_or_went_pending(stack: Stack, steady: WorkerProcess) -> None:
    # The steady worker was scraped holding a job past its first heartbeat (20s), and was never stale.
    held = stack.prometheus.value('count_over_time((pgwork_jobs_in_flight{pod="steady-w"} == 1)[10m:1s])')
    assert held is not None and held >= 25, f"the steady worker was watched holding a job for only {held}s"
    with stack.recorder._lock:
        seen = set(stack.recorder.seen)
    assert seen <= EXPECTED, f"alerts that should have stayed silent: {seen - EXPECTED}"
    assert steady.alive()
