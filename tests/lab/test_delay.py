"""The lab's delaying proxy adds the round-trip time it is given, and carries a whole session."""

from __future__ import annotations

import time

import psycopg
import pytest

from pgwork.tools.lab.delay import DelayProxy


@pytest.mark.slow
def test_a_round_trip_through_the_proxy_takes_the_rtt(dsn: str) -> None:
    proxy = DelayProxy(dsn, 0.02)
    try:
        with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
            conn.execute("SELECT 1")
            started = time.perf_counter()
            for _ in range(5):
                assert conn.execute("SELECT 1").fetchone() == (1,)
            per_round_trip = (time.perf_counter() - started) / 5
            rows = conn.execute("SELECT g FROM generate_series(1, 50000) AS g").fetchall()
        assert per_round_trip >= 0.02
        assert len(rows) == 50000 and rows[-1] == (50000,)
    finally:
        proxy.close()
