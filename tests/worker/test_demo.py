"""`pgwork demo`: its parsing code, its plan, and whole runs (given database and embedded)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from pgwork.tools.demo import invoices
from pgwork.tools.demo.command import plan, timeout_lines
from tests.support.workers import ROOT


@pytest.mark.parametrize("seed", range(25))
def test_generated_invoices_parse_back_to_their_fields(seed: int) -> None:
    rng = random.Random(seed)
    invoice = invoices.generate(rng, seed + 1)
    fields = invoices.parse(invoices.render(invoice))
    assert fields["invoice_number"] == invoice.number
    assert fields["issued"] == invoice.issued.isoformat() and fields["due"] == invoice.due.isoformat()
    assert fields["customer"] == invoice.customer and fields["vendor"] == invoice.vendor
    assert Decimal(fields["total"]) == invoice.total == invoice.subtotal + invoice.tax
    assert [(line["description"], line["quantity"]) for line in fields["lines"]] == [
        (d, q) for d, q, _ in invoice.lines
    ]


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda t: t.replace("Invoice No.", "Invoice #"), "no invoice number found"),
        (lambda t: t.replace("TOTAL DUE", "TOTAL"), "no total found"),
        (lambda t: t.replace("Subtotal: EUR ", "Subtotal: EUR 1"), "do not add up"),
        (lambda t: t.replace(" x ", " * "), "no line items found"),
        (lambda t: t.replace("Bill to:", "Ship to:"), "no customer found"),
    ],
)
def test_unreadable_invoices_say_what_is_wrong(change: object, error: str) -> None:
    text = invoices.render(invoices.generate(random.Random(7), 1))
    with pytest.raises(invoices.InvoiceParseError, match=error):
        invoices.parse(change(text))  # type: ignore[operator]


def test_plan_is_deterministic_with_each_role() -> None:
    docs = plan("run1", 10, seed=5)
    assert docs == plan("run1", 10, seed=5)
    assert [d.role for d in docs[:5]] == ["long", "flaky", "poison", "flaky", "hung"]
    assert {d.role for d in docs[5:]} == {"clean"}
    assert (docs[4].job.timeout, docs[4].job.max_attempts) == (1.0, 2)  # its own timeout, set at enqueue
    assert all(d.job.timeout is None for d in docs if d.role != "hung")
    assert docs[0].job.priority == 0 and all(d.job.priority == 100 for d in docs[1:])
    assert len({d.job.key for d in docs}) == 10 and all(d.job.key.startswith("demo:run1:INV-") for d in docs)  # type: ignore[union-attr]
    with pytest.raises(invoices.InvoiceParseError):
        invoices.parse(docs[2].job.payload["text"])


def run_demo(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**env, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pgwork.cli", "demo", *args],
        check=False, capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=120,
    )  # fmt: skip


@pytest.mark.slow
def test_demo_against_database_url_touches_only_the_pgwork_schema(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn) as conn:
        before = conn.execute("SELECT nspname FROM pg_namespace ORDER BY 1").fetchall()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    proc = run_demo({**env, "DATABASE_URL": empty_dsn})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "using the database in DATABASE_URL" in out
    assert "SIGKILL demo-w" in out and "reaper: job 1's lease lapsed" in out
    assert "job 1 (scan-001.pdf) on demo-w" in out and "of 5 (sent with its heartbeat)" in out
    assert "Every invariant held" in out
    with psycopg.connect(empty_dsn) as conn:
        after = conn.execute("SELECT nspname FROM pg_namespace ORDER BY 1").fetchall()
        outside = conn.execute(
            "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname NOT IN ('pgwork', 'pg_catalog', 'information_schema', 'pg_toast')"
        ).fetchall()
        # The clean-up schedule's jobs (a tick may fall inside the run) carry no role.
        jobs = conn.execute(
            "SELECT payload->>'role', status::text, attempt_count, last_error FROM pgwork.jobs"
            " WHERE job_type <> 'demo.cleanup' ORDER BY id"
        ).fetchall()
        results = conn.execute("SELECT count(*) FROM pgwork.job_results WHERE job_type <> 'demo.cleanup'").fetchone()
        schedules = conn.execute("SELECT name, next_tick IS NOT NULL FROM pgwork.schedules").fetchall()
    assert sorted(set(after) - set(before)) == [("pgwork",)]
    assert outside == []
    by_role: dict[str, list[tuple[str, int, str | None]]] = {}
    for role, status, attempts, error in jobs:
        by_role.setdefault(role, []).append((status, attempts, error))
    # The invoices, an index job for each of the 19 clean ones, and the pipeline: 2 bundles split
    # into 6 and 3 pages, and a merge each.
    assert len(jobs) == 24 + 19 + 2 + 9 + 2
    assert [(s, a) for s, a, _ in by_role["long"]] == [("succeeded", 2)]
    assert "[lease expired, reclaimed from demo-w" in (by_role["long"][0][2] or "")
    with psycopg.connect(empty_dsn) as conn:
        resumed = conn.execute(
            "SELECT (r.result->>'resumed_after_page')::int, j.checkpoint FROM pgwork.jobs AS j"
            " JOIN pgwork.job_results AS r USING (idempotency_key) WHERE j.payload->>'role' = 'long'"
        ).fetchone()
    assert resumed is not None and resumed[0] >= 1 and resumed[1] == {"page": 5}
    assert [(s, a) for s, a, _ in by_role["flaky"]] == [("succeeded", 3)] * 2
    assert [(s, a) for s, a, _ in by_role["poison"]] == [("dead", 1)]
    assert "pgwork.PermanentError: unreadable invoice" in (by_role["poison"][0][2] or "")
    assert [(s, a) for s, a, _ in by_role["hung"]] == [("dead", 2)]
    assert (by_role["hung"][0][2] or "").startswith("timed out after 1s (the handler stopped when told")
    assert "Timed out (1)" in out and "attempt 1: timed out after 1s" in out
    assert "attempt 2: timed out after 1s (the handler stopped when told" in out and "-> dead" in out
    assert {s for s, _, _ in by_role["clean"]} == {"succeeded"}
    assert {s for s, _, _ in by_role["index"]} == {"succeeded"}
    assert [(s, a) for s, a, _ in by_role["split"]] == [("succeeded", 1)] * 2
    assert sorted(s for s, _, _ in by_role["page"]) == ["dead"] + ["succeeded"] * 8
    merges = by_role["merge"]
    assert sorted((s, a) for s, a, _ in merges) == [("cancelled", 0), ("succeeded", 1)]
    assert "which ended dead]" in next(e or "" for s, _, e in merges if s == "cancelled")
    assert schedules == [("demo.cleanup", True)]
    assert results == (52,)  # 41, the 2 splits, 8 pages and 1 merge
    assert "Result rows: 52; succeeded jobs: 52" in out
    assert "bundle-b  3      1           cancelled" in out
    assert "Indexed by a batch handler (demo.index_invoices, batch=8): 19 invoices in" in out


@pytest.mark.slow
def test_demo_with_no_database_url_starts_its_own_postgres(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PG") and k not in ("DATABASE_URL", "XDG_RUNTIME_DIR")
    }
    # Its own temporary directory: the demo used to leave empty pgwork-* folders behind (issue 25).
    proc = run_demo({**env, "TMPDIR": str(tmp_path)}, "--documents", "8", "--workers", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert "starting a throwaway embedded PostgreSQL" in proc.stdout
    assert "Result rows: 20; succeeded jobs: 20" in proc.stdout  # 9, and the pipeline's 2 + 8 + 1
    assert "Every invariant held" in proc.stdout


def test_each_timeout_is_shown_beside_its_own_attempt() -> None:
    """Issue 25: the demo printed attempt 1's error beside attempt 2's number (`attempt 2: timed
    out ... -> running`) and never showed attempt 2's own timeout."""
    seen: set[tuple[int, int]] = set()
    doc = {"document": "INV-5.pdf"}

    def row(status: str, attempt: int) -> dict[str, object]:
        return {"status": status, "attempt_count": attempt, "last_error": "timed out after 1s", "payload": doc}

    polls = [
        {5: row("pending", 1)},  # attempt 1 timed out, the retry is due
        {5: row("running", 2)},  # attempt 2 runs; last_error is still attempt 1's
        {5: row("dead", 2)},  # attempt 2 timed out too
    ]
    shown = [line for poll in polls for line in timeout_lines(poll, seen)]  # type: ignore[arg-type]
    assert shown == [
        "job 5 (INV-5.pdf) attempt 1: timed out after 1s -> pending",
        "job 5 (INV-5.pdf) attempt 2: timed out after 1s -> dead",
    ]
    # Seen first while attempt 2 already runs: still attempt 1's error, said so.
    assert timeout_lines({5: row("running", 2)}, set()) == [  # type: ignore[dict-item]
        "job 5 (INV-5.pdf) attempt 1: timed out after 1s -> running again (attempt 2)"
    ]
