"""A real scrape of a worker's /metrics, /healthz and /readyz."""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from workerkit import ROOT, Spawn, free_port, worker_command, worker_env

from pgwork.queue import Queue
from tests.support.waiting import wait_for


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


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
