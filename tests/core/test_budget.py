"""pgwork.budget: connections per worker by options, and whether a fleet fits its server (pure)."""

from __future__ import annotations

import pytest

from pgwork.budget import CRONJOB_CONNECTIONS, Demand, check_budget, pool_size, worker_connections


@pytest.mark.parametrize(
    ("concurrency", "listening", "idle", "busy"),
    [
        (1, True, 2, 4),  # pool 2, heartbeat, LISTEN
        (1, False, 1, 3),  # --no-listen, or a transaction-mode pooler without PGWORK_LISTEN_DSN
        (4, True, 2, 7),
        (8, True, 2, 11),
        (64, True, 2, 11),  # the pool stops at 8 runners + 1
        (64, False, 1, 10),
    ],
)
def test_worker_connections(concurrency: int, listening: bool, idle: int, busy: int) -> None:
    counted = worker_connections(concurrency, listening)
    assert (counted.idle, counted.busy) == (idle, busy)
    assert pool_size(concurrency) == min(concurrency, 8) + 1


@pytest.mark.parametrize(
    ("demands", "max_connections", "reserved", "fits", "worst"),
    [
        ([Demand("a/ocr", 10, 4)], 100, 3, True, 10 * 4 + CRONJOB_CONNECTIONS + 1),
        ([Demand("a/ocr", 47, 2)], 100, 3, True, 97),  # exactly the slots left: fits
        ([Demand("a/ocr", 47, 2)], 100, 4, False, 97),
        ([Demand("a/ocr", 10, 4), Demand("b/gpu", 20, 4)], 100, 3, False, 40 + 80 + 2 * CRONJOB_CONNECTIONS + 1),
        ([Demand("b/gpu", 200, 3)], 1000, 3, True, 603),  # the GPU fleet, polling only
        ([Demand("b/gpu", 200, 4)], 500, 3, False, 803),
        ([], 100, 3, True, 1),
    ],
)
def test_check_budget(demands: list[Demand], max_connections: int, reserved: int, fits: bool, worst: int) -> None:
    budget = check_budget(demands, max_connections, reserved)
    assert (budget.fits, budget.worst_case, budget.available) == (fits, worst, max_connections - reserved)
    if not fits:
        assert "lower maxReplicas" in budget.message and "database.pooler: transaction" in budget.message
        assert all(d.name in budget.message for d in demands)
