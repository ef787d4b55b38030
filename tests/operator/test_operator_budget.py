"""The connection budget through the real kopf operator (KubernetesEmulator, real PostgreSQL):
JobQueues sharing a server are summed at their worst case against max_connections less the
reserved slots, and the one that tips it over says so in a condition and an event."""

from __future__ import annotations

import pytest

from pgwork.budget import worker_connections
from pgwork.db import Queue
from pgwork.operator.kube import Kube
from tests.support import stories
from tests.support.operator import OperatorThread, eventually

pytestmark = pytest.mark.slow


def _budget(client: Kube, namespace: str, name: str) -> dict[str, object] | None:
    return stories.condition(stories.jobqueue(client, namespace, name), "ConnectionBudget")


def test_jobqueues_sharing_a_server_are_summed(
    operator: OperatorThread, client: Kube, namespace: str, queue: Queue, dsn: str
) -> None:
    limits = queue.connection_limits()
    available = limits.max_connections - limits.reserved
    per_pod = worker_connections(2, listening=True).busy  # stories.spec(): concurrency 2
    # The first alone fits; with the second the worst case passes what the server allows.
    first = max(1, (available // 2) // per_pod)
    second = available // per_pod
    stories.create_secret(client, namespace, "queue-db", dsn)
    stories.create_jobqueue(client, namespace, "small", stories.spec(scaling={"maxReplicas": first}))
    fits = eventually(lambda: (c := _budget(client, namespace, "small")) and c, what="ConnectionBudget on small")
    assert fits["status"] == "True" and fits["reason"] == "Fits", fits
    assert f"of {available} connections" in str(fits["message"])

    stories.create_jobqueue(client, namespace, "big", stories.spec(scaling={"maxReplicas": second}))
    exceeded = eventually(
        lambda: (c := _budget(client, namespace, "big")) and c["status"] == "False" and c,
        what="ConnectionBudget=False on big",
    )
    assert exceeded["reason"] == "Exceeded"
    message = str(exceeded["message"])
    assert f"{namespace}/small {first}x{per_pod}" in message and f"{namespace}/big {second}x{per_pod}" in message
    eventually(
        lambda: "ConnectionBudgetExceeded" in stories.event_reasons(client, namespace, "big"),
        what="a ConnectionBudgetExceeded event",
    )
    eventually(
        lambda: (c := _budget(client, namespace, "small")) and c["status"] == "False",
        what="small sees the shared server exceeded too",
    )

    # Behind a transaction-mode pooler the server sees only the pooler's pool.
    stories.patch_jobqueue(client, namespace, "big", {"spec": {"database": {"pooler": "transaction"}}})
    eventually(
        lambda: (c := _budget(client, namespace, "big")) and c["reason"] == "Pooled",
        what="big: Pooled",
    )
    eventually(
        lambda: (c := _budget(client, namespace, "small")) and c["status"] == "True",
        what="small fits again once big is pooled",
    )
