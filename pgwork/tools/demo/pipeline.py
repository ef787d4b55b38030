"""The demo's document pipeline: a bundle of scanned invoices is split into pages (a job per page,
created with the split's own finish by pgwork.Then), each page is extracted, and a merge that waits
for every page (`after`) totals the bundle. One bundle holds a torn page: it goes dead, and its
merge is cancelled naming it. The demo finds the pages and merges through their keys and the
jobs' parents and children, and checks all of it."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pgwork.db import Queue
from pgwork.models import NewJob
from pgwork.tables import render
from pgwork.tools.demo import SPLIT_JOB_TYPE


@dataclass(frozen=True)
class Bundle:
    name: str
    texts: tuple[str, ...]
    torn: int | None = None  # the page that cannot be read


def bundles(texts: list[str], torn_text: str) -> list[Bundle]:
    """Two bundles from the run's clean invoices (reused when there are few): one of 6 pages, and
    one of 3 whose last page is torn (pure)."""
    page = [texts[n % len(texts)] for n in range(8)]
    return [Bundle("bundle-a", tuple(page[:6])), Bundle("bundle-b", (*page[6:8], torn_text), torn=2)]


def page_key(run: str, bundle: str, page: int) -> str:
    return f"demo:{run}:{bundle}:page:{page}"


def merge_key(run: str, bundle: str) -> str:
    return f"demo:{run}:{bundle}:merge"


def split_jobs(run: str, found: list[Bundle]) -> list[NewJob]:
    return [
        NewJob(SPLIT_JOB_TYPE, {"run": run, "bundle": b.name, "pages": list(b.texts), "role": "split"},
               key=f"demo:{run}:{b.name}:split")
        for b in found
    ]  # fmt: skip


def discover(queue: Queue, run: str, found: list[Bundle]) -> dict[int, str]:
    """The pages and merges created so far, by id -> role: a page through its result's row, the
    merge as that page's child, every page of it as the merge's parents."""
    roles: dict[int, str] = {}
    for b in found:
        for page in range(len(b.texts)):
            done = queue.result(page_key(run, b.name, page))
            if done is None:
                continue
            roles.update({kin.id: "merge" for kin in queue.job_family(done.job_id) if kin.relation == "child"})
            break
        for merge in [i for i, r in roles.items() if r == "merge"]:
            for kin in queue.job_family(merge, limit=100):
                if kin.relation == "parent":
                    roles[kin.id] = "page"
    return roles


def report(queue: Queue, run: str, found: list[Bundle], rows: dict[int, dict[str, Any]]) -> tuple[int, list[str]]:
    """Print the pipeline's outcome; returns its result rows and what did not hold."""
    problems: list[str] = []
    lines = []
    n_results = 0
    for b in found:
        merged = queue.result(merge_key(run, b.name))
        merge = next((r for r in rows.values() if r["idempotency_key"] == merge_key(run, b.name)), None)
        pages = {int(r["payload"]["page"]): r for r in rows.values() if r["payload"].get("bundle") == b.name
                 and "page" in r["payload"]}  # fmt: skip
        n_results += sum(1 for p in pages.values() if p["status"] == "succeeded") + (merged is not None)
        if merge is None or len(pages) != len(b.texts):
            problems.append(f"{b.name}: found {len(pages)} of {len(b.texts)} pages and {'a' if merge else 'no'} merge")
            continue
        expected = sum((Decimal(str(r["total"])) for r in _pages_results(queue, pages) if r), Decimal(0))
        lines.append(
            {"bundle": b.name, "pages": len(pages), "dead pages": sum(p["status"] == "dead" for p in pages.values()),
             "merge": merge["status"], "merge attempts": merge["attempt_count"],
             "total_eur": (merged.result or {}).get("total") if merged else None,
             "note": "" if merged else _first(merge["last_error"])}
        )  # fmt: skip
        if b.torn is None:
            if merge["status"] != "succeeded" or merge["attempt_count"] != 1 or merged is None:
                problems.append(f"{b.name}: merge is {merge['status']} after {merge['attempt_count']} attempts")
            elif merged.result.get("pages") != list(range(len(b.texts))) or Decimal(merged.result["total"]) != expected:
                problems.append(
                    f"{b.name}: merge saw pages {merged.result.get('pages')}, total {merged.result['total']}"
                )
        else:
            torn = pages[b.torn]
            if torn["status"] != "dead" or merge["status"] != "cancelled":
                problems.append(f"{b.name}: torn page is {torn['status']}, merge {merge['status']}")
            elif f"it waits for job {torn['id']} " not in (merge["last_error"] or ""):
                problems.append(f"{b.name}: the cancelled merge does not name page job {torn['id']}")
    print(f"\nPipeline ({SPLIT_JOB_TYPE} -> pages -> merge): pages created with the split's finish, the merge "
          "waited for all of them; a dead page cancels its bundle's merge")  # fmt: skip
    print(render(lines))
    return n_results, problems


def _pages_results(queue: Queue, pages: dict[int, dict[str, Any]]) -> list[Any]:
    return [(found.result if (found := queue.result(p["idempotency_key"])) else None) for p in pages.values()]


def _first(text: str | None) -> str:
    return (text or "").strip().splitlines()[0][-90:] if (text or "").strip() else ""
