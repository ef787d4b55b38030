"""The worker drain's summary table (issue 28): pgwork's worker beside pgqueuer on asyncpg, its own
Queue API loop and the reference bare loop, from one run. Pure: rates in, markdown lines out.

Every ratio is the median of per-round ratios (both series drained in the same round, so drift on a
shared machine falls on both alike), with the lowest and highest round beside it."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

Figures = Mapping[tuple[str, str], Sequence[float]]


def paired(rates: Sequence[float], against: Sequence[float]) -> list[float]:
    """Each round's rate over the other series' rate in the same round."""
    return [a / b for a, b in zip(rates, against, strict=True) if b > 0] or [float("nan")]


def ratio(figures: Figures, ours: tuple[str, str], theirs: tuple[str, str]) -> str:
    """`0.61x [0.56-0.70]`, or `n/a` when either series did not run."""
    a, b = figures.get(ours), figures.get(theirs)
    if not a or not b:
        return "n/a"
    r = paired(a, b)
    return f"{statistics.median(r):.2f}x [{min(r):.2f}-{max(r):.2f}]"


def rate(figures: Figures, key: tuple[str, str]) -> str:
    f = figures.get(key)
    return f"{statistics.median(f):,.0f}" if f else "n/a"


def table(
    figures: Figures,
    *,
    worker: str,
    api: str,
    bare: str,
    peer: str,
    peer_psycopg: str,
    peer_version: str,
    rounds: int,
    load: str,
) -> list[str]:
    """The issue's table. Series names are the experiment's; the x axis is `batch N`."""
    w100, w10, w1 = (worker, "batch 100"), (worker, "batch 10"), (worker, "batch 1")
    p100, p10, p1 = (peer, "batch 100"), (peer, "batch 10"), (peer, "batch 1")
    api100, bare1, pp100 = (api, "batch 100"), (bare, "batch 1"), (peer_psycopg, "batch 100")
    return [
        f"Worker drain, one process on each side, {rounds} interleaved rounds; every rate timed from the "
        "database: first start to last completion (pgwork: jobs.started_at/completed_at; pgqueuer: its "
        "log's picked/successful stamps). Median jobs/s; ratios are the median of per-round ratios "
        f"[min-max]. Load average during the run: {load}.",
        "",
        "| | jobs/s (median) | ratio |",
        "|---|---|---|",
        f"| `pgwork worker --batch 100 --concurrency 16` | {rate(figures, w100)} | "
        f"**{ratio(figures, w100, p100)} pgqueuer**; {ratio(figures, w100, api100)} pgwork's own Queue API loop |",
        f"| pgqueuer {peer_version} + asyncpg, batch 100 | {rate(figures, p100)} | |",
        f"| pgqueuer {peer_version} + psycopg driver, batch 100 (second row: not its recommended setup) | "
        f"{rate(figures, pp100)} | the worker is {ratio(figures, w100, pp100)} of it |",
        f"| pgwork Queue API loop, claim 100 + succeed_many | {rate(figures, api100)} | "
        f"{ratio(figures, api100, p100)} pgqueuer |",
        f"| `pgwork worker --batch 10 --concurrency 10` vs pgqueuer batch 10 | "
        f"{rate(figures, w10)} vs {rate(figures, p10)} | {ratio(figures, w10, p10)} |",
        f"| `pgwork worker` (batch 1, concurrency 1) vs pgqueuer batch 1 | "
        f"{rate(figures, w1)} vs {rate(figures, p1)} | {ratio(figures, w1, p1)} |",
        f"| the same worker vs the reference design's bare claim/finish loop | "
        f"{rate(figures, w1)} vs {rate(figures, bare1)} | **{ratio(figures, w1, bare1)}** |",
    ]
