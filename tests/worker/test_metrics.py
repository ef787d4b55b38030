"""A real scrape of a worker's /metrics, /healthz and /readyz."""

from __future__ import annotations

import re
import signal
import socket
import struct
import subprocess
import time

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pgwork.db import Queue
from pgwork.worker.metrics import OUTCOMES
from tests.support.scrape import get, samples
from tests.support.waiting import wait_for
from tests.support.workers import ROOT, Spawn, free_port, worker_command, worker_env


@pytest.mark.slow
def test_metrics_scrape_has_the_named_series_with_real_counts(queue: Queue, spawn_worker: Spawn) -> None:
    for n in range(3):
        queue.enqueue("sleep", {"seconds": 0.05, "n": n})
    queue.enqueue("permanent", {})
    queue.enqueue("fail", {}, max_attempts=1)
    port = free_port()
    begun = time.time()
    w = spawn_worker("--metrics-port", str(port), "--lease", "3s", "--heartbeat", "0.5s")
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: get(base + "/readyz")[0] == 200, 20, what="/readyz")
    assert get(base + "/healthz")[0] == 200
    assert get(base + "/nope")[0] == 404

    def finished() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
        s = samples(get(base + "/metrics")[1])
        total = sum(v for (name, _), v in s.items() if name == "pgwork_jobs_finished_total")
        beat = s.get(("pgwork_worker_last_heartbeat_timestamp_seconds", ()), 0)
        return s if total == 5 and beat > begun else None

    s = wait_for(finished, 20, interval=0.2, what="five finished jobs and a heartbeat")
    assert s[("pgwork_jobs_finished_total", (("job_type", "sleep"), ("outcome", "succeeded")))] == 3
    assert s[("pgwork_jobs_finished_total", (("job_type", "permanent"), ("outcome", "dead")))] == 1
    assert s[("pgwork_jobs_finished_total", (("job_type", "fail"), ("outcome", "dead")))] == 1
    assert s[("pgwork_job_duration_seconds_count", (("job_type", "sleep"), ("outcome", "succeeded")))] == 3
    assert (
        s[("pgwork_job_duration_seconds_bucket", (("job_type", "sleep"), ("le", "1800.0"), ("outcome", "succeeded")))]
        == 3
    )
    assert s[("pgwork_claim_duration_seconds_count", ())] >= 5
    assert ("pgwork_claim_duration_seconds_bucket", (("le", "0.0005"),)) in s
    assert s[("pgwork_jobs_in_flight", ())] == 0
    assert s[("pgwork_worker_heartbeat_interval_seconds", ())] == 0.5
    assert begun < s[("pgwork_worker_last_heartbeat_timestamp_seconds", ())] <= time.time()
    text = get(base + "/metrics")[1]
    assert "# TYPE pgwork_lease_lost_total counter" in text
    w.signal(signal.SIGTERM)
    assert w.wait(10) == 0


def test_busy_metrics_port_is_a_clear_startup_error(dsn: str) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            worker_command(dsn, "x", "--metrics-port", str(port)),
            check=False,
            capture_output=True,
            text=True,
            env=worker_env(),
            cwd=str(ROOT),
            timeout=30,
        )
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"pgwork worker: --metrics-port: cannot serve on port {port}")


def worker_metric_names() -> set[str]:
    """The worker metrics docs/metrics.md promises (its "Worker metrics" table)."""
    text = (ROOT / "docs" / "metrics.md").read_text()
    section = text[text.index("## Worker metrics") : text.index("## Worker spans")]
    return set(re.findall(r"^\| `(pgwork_[a-z_]+)`", section, flags=re.MULTILINE))


def families(text: str) -> set[str]:
    """Metric family names in an exposition, counters under their `_total` name as documented."""
    out = set()
    for family in text_string_to_metric_families(text):
        out.add(family.name + "_total" if family.type == "counter" else family.name)
    return out


@pytest.mark.slow
def test_every_documented_series_exists_at_zero_on_the_first_scrape(spawn_worker: Spawn) -> None:
    port = free_port()
    begun = time.time()
    spawn_worker("--metrics-port", str(port), "--job-types", "sleep,fail", "--heartbeat", "30s", "--lease", "90s")
    text = wait_for(lambda: get(f"http://127.0.0.1:{port}/metrics")[1], 20, what="the first scrape")
    documented = worker_metric_names()
    assert "pgwork_worker_heartbeat_age_seconds" in documented
    assert documented <= families(text), f"missing from the first scrape: {documented - families(text)}"
    s = samples(text)
    for job_type in ("sleep", "fail"):
        assert s[("pgwork_lease_lost_total", (("job_type", job_type),))] == 0
        for outcome in OUTCOMES:
            labels = (("job_type", job_type), ("outcome", outcome))
            assert s[("pgwork_jobs_finished_total", labels)] == 0
            assert s[("pgwork_job_duration_seconds_count", labels)] == 0
    # Types the worker does not take get no series.
    assert not [key for key in s if ("job_type", "noop") in key[1]]
    assert s[("pgwork_worker_heartbeat_age_seconds", ())] == 0
    # No heartbeat round yet (the interval is 30s): the timestamp is the start, not 0, so
    # `time() - timestamp` alerts do not fire on a worker that just started.
    assert begun - 1 <= s[("pgwork_worker_last_heartbeat_timestamp_seconds", ())] <= time.time()


@pytest.mark.slow
def test_heartbeat_age_follows_renewals_and_grows_when_they_are_blocked(
    queue: Queue, dsn: str, spawn_worker: Spawn
) -> None:
    job_id = queue.enqueue("sleep", {"seconds": 30})
    port = free_port()
    spawn_worker("--metrics-port", str(port), "--heartbeat", "0.3s", "--lease", "20s", "--grace", "0s")

    def age() -> float:
        return samples(get(f"http://127.0.0.1:{port}/metrics")[1]).get(("pgwork_worker_heartbeat_age_seconds", ()), -1)

    def in_flight() -> bool:
        return samples(get(f"http://127.0.0.1:{port}/metrics")[1]).get(("pgwork_jobs_in_flight", ()), 0) == 1

    wait_for(in_flight, 20, what="the job claimed")
    # Renewed every 0.3s: the age stays below a couple of intervals.
    ages = []
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        ages.append(age())
        time.sleep(0.1)
    assert 0 <= max(ages) < 1.0, ages
    # A transaction holding the rows a renewal writes (the job's, and since migration 15 the
    # worker lease's, which alone renews a covered job) blocks it: the age grows past the interval.
    with psycopg.connect(dsn) as conn:
        conn.execute("select 1 from pgwork.jobs where id = %s for update", (job_id,))
        conn.execute("select 1 from pgwork.worker_leases for update")
        grown = wait_for(lambda: (a := age()) > 2.0 and a, 10, interval=0.1, what="the heartbeat age growing")
        assert grown < 10
    # Lock released: the blocked renewal lands and the age drops back.
    wait_for(lambda: 0 <= age() < 1.0, 10, interval=0.1, what="the age back under one second")


@pytest.mark.slow
def test_a_scrape_abandoned_mid_response_prints_no_traceback(spawn_worker: Spawn) -> None:
    """What a Prometheus scrape timeout does to a worker that was stopped (SIGSTOP) and resumed:
    the requests wait in the socket, the scraper hangs up, the worker answers into closed sockets."""
    port = free_port()
    w = spawn_worker("--metrics-port", str(port), "--heartbeat", "1s")
    wait_for(lambda: get(f"http://127.0.0.1:{port}/metrics")[0] == 200, 20, what="the first scrape")
    w.signal(signal.SIGSTOP)
    try:
        for n in range(6):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                if n % 2:
                    # Half of them with a reset, as a client that aborts does.
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        w.signal(signal.SIGCONT)
    # A later scrape is answered; the log shows nothing about the abandoned ones.
    wait_for(lambda: get(f"http://127.0.0.1:{port}/metrics")[0] == 200, 20, what="a scrape after SIGCONT")
    w.signal(signal.SIGTERM)
    assert w.wait(10) == 0
    log = w.log()
    for word in ("Traceback", "BrokenPipeError", "ConnectionResetError", "Exception occurred"):
        assert word not in log, log
