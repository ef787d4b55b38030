"""The real operator on the emulator: a job type limited fleet-wide asks for no more workers than
its limit lets run, however long its backlog, and the other types beside it scale as before."""

from __future__ import annotations

import pytest

from pgwork.db import Queue
from pgwork.models import NewJob
from pgwork.operator.kube import Kube
from tests.support import stories
from tests.support.operator import OperatorThread, eventually

pytestmark = pytest.mark.slow


def test_a_limited_backlog_asks_for_no_more_workers_than_the_limit_can_use(
    operator: OperatorThread, client: Kube, namespace: str, queue: Queue, dsn: str
) -> None:
    queue.set_limit("ocr", max_running=4)
    stories.create_secret(client, namespace, "queue-db", dsn)
    # Two jobs per worker (concurrency 2), one job of backlog per worker wanted, up to 20 workers.
    stories.create_jobqueue(
        client, namespace, "ocr", stories.spec(scaling={"targetBacklogPerWorker": 1, "maxReplicas": 20})
    )
    queue.enqueue_many([NewJob("ocr", {"n": i}) for i in range(100)])
    # ceil(4 / 2) = 2 workers for 100 ocr jobs, not 20.
    body = eventually(
        lambda: (
            (b := stories.jobqueue(client, namespace, "ocr"))
            # Counts stop at maxReplicas x per-pod count + 1; a pod takes 2 jobs at once, so a target
            # of 1 counts 2 per pod.
            and b.get("status", {}).get("pending") == 41
            and b["status"].get("desiredReplicas") == 2
            and b
        ),
        what="desiredReplicas 2 for 100 ocr jobs under max_running 4",
    )
    assert "ocr max 4 running" in (stories.condition(body, "Scaling") or {}).get("message", "")
    assert stories.replicas(client, namespace, "ocr") == 2
    # The unlimited type beside it adds its own workers as before: 3 jobs on pods of 2.
    queue.enqueue_many([NewJob("extract", {"n": i}) for i in range(3)])
    eventually(lambda: stories.replicas(client, namespace, "ocr") == 4, what="2 + 2 replicas")
    # Lifted: the whole backlog counts again.
    queue.clear_limit("ocr")
    eventually(lambda: stories.replicas(client, namespace, "ocr") == 20, what="maxReplicas once the limit is lifted")
