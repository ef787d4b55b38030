"""The console in a real browser: Debian's chromium driven by Playwright (its own browser
download cannot run here, so `executable_path` names the Debian binary). Screenshots of each view
go to docs/img/ui-*.png only with PGWORK_UPDATE_SCREENSHOTS=1, so a test run never writes into
the tree."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pgwork.db import Queue
from pgwork.models import NewJob
from tests.support.ui import serving

sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install chromium)"),
]
Page = sync_api.Page


@pytest.fixture
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


class Opener:
    """Opens pages on a console; collects the browser's errors, which fail the test unless expected."""

    def __init__(self, browser: object) -> None:
        self.browser = browser
        self.contexts: list[object] = []
        self.problems: list[str] = []

    def __call__(self, base: str) -> Page:
        browser, problems = self.browser, self.problems
        context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
        self.contexts.append(context)
        page: Page = context.new_page()
        # A CSP violation or a script error is a failure: the console must run under its own policy.
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        return page


@pytest.fixture
def open_page(browser: object) -> Iterator[Opener]:
    opener = Opener(browser)
    yield opener
    for context in opener.contexts:
        context.close()  # type: ignore[attr-defined]
    assert not opener.problems, opener.problems


def shot(page: Page, name: str) -> None:
    if os.environ.get("PGWORK_UPDATE_SCREENSHOTS") == "1":
        DOCS_IMG.mkdir(exist_ok=True)
        page.screenshot(path=str(DOCS_IMG / f"ui-{name}.png"), full_page=True)


def _dead(q: Queue, job_type: str, error: str, payload: dict[str, object]) -> int:
    q.enqueue(job_type, payload, max_attempts=2, priority=0)  # before the type's other jobs
    for owner in ("worker-a", "worker-b"):
        (job,) = q.claim(owner, job_types=[job_type])
        q.fail(job.lease, error, delay=0)
    return job.id


def test_find_a_dead_job_retry_it_and_watch_it_succeed_live(queue: Queue, dsn: str, open_page: Opener) -> None:
    queue.enqueue_many([NewJob("invoice.extract", {"invoice": i}) for i in range(30)])
    for job in queue.claim("worker-a", job_types=["invoice.extract"], limit=12):
        queue.succeed(job.lease, {"total": 10})
    queue.claim("worker-c", job_types=["invoice.extract"], limit=3, lease=600)
    dead = _dead(
        queue,
        "invoice.extract",
        "ValueError: scanned page 3 is unreadable (OCR confidence 0.12)",
        {"invoice": "INV-2026-0042", "customer": {"id": 7}},
    )
    _dead(queue, "email.send", "SMTP 554: rejected", {"to": "ops@example.com"})
    with serving(dsn) as base:
        page = open_page(base)
        page.goto("/")
        page.wait_for_selector("#overview")
        shot(page, "overview")
        page.click("text=Jobs")
        page.wait_for_url("**/jobs")
        page.fill("input[name=error]", "ocr confidence")
        page.select_option("select[name=state]", "dead")
        page.click("button:has-text('Search')")
        page.wait_for_url("**/jobs?*error=ocr*")
        sync_api.expect(page.locator("#jobs tbody tr")).to_have_count(1)
        shot(page, "jobs")
        page.click(f"a[href='/jobs/{dead}']")
        page.wait_for_url(f"**/jobs/{dead}")
        assert "OCR confidence 0.12" in page.inner_text("#error")
        assert "INV-2026-0042" in page.inner_text("#payload")
        shot(page, "job")
        page.click("#retry")
        page.wait_for_url("**/act")
        assert "requeued 1 of 1" in page.inner_text("#outcome")
        # Live: the overview's counts change without a reload once a worker finishes the job.
        page.goto("/")
        cell = page.locator("#overview tbody tr", has_text="invoice.extract").locator("td").nth(1)
        before = cell.inner_text()
        (job,) = queue.claim("worker-d", job_types=["invoice.extract"])
        queue.succeed(job.lease, {"total": 42})
        sync_api.expect(cell).not_to_have_text(before, timeout=15_000)
        page.goto(f"/jobs/{dead}")
        assert page.locator("h1 .state").inner_text() == "succeeded"
        page.goto("/running")
        page.wait_for_selector("#running")
        shot(page, "running")
        page.goto("/dead")
        shot(page, "dead")
        page.goto("/actions")
        assert "job " + str(dead) in page.inner_text("#actions")
        shot(page, "actions")


def test_bulk_cancel_after_seeing_the_count(queue: Queue, dsn: str, open_page: Opener) -> None:
    queue.enqueue_many([NewJob("report", {"tenant": 9 if i % 2 else 3}) for i in range(20)])
    with serving(dsn, live="poll") as base:
        page = open_page(base)
        page.goto("/jobs?type=report&path=tenant&value=9")
        page.click("#bulk-cancel")
        page.wait_for_url("**/confirm?*")
        assert "10 jobs" in page.inner_text("#count")
        shot(page, "confirm")
        page.click("#confirm")
        page.wait_for_url("**/act")
        assert "cancelled 10 of 10" in page.inner_text("#outcome")
    assert {s.job_type: s.ready for s in queue.stats()}["report"] == 10


def test_a_reader_sees_no_payload_and_cannot_act(
    queue: Queue, make_role: Callable[..., str], open_page: Opener
) -> None:
    dead = _dead(queue, "bill", "declined", {"card": "4111-SECRET"})
    with serving(make_role("reader")) as base:
        page = open_page(base)
        page.goto(f"/jobs/{dead}")
        assert "declined" in page.inner_text("#error")
        assert "4111-SECRET" not in page.content()
        assert page.locator("#retry").count() == 0 and "read-only" in page.inner_text("header")
        page.goto("/jobs")
        assert page.locator("#bulk-retry").count() == 0 and page.locator("input[name=path]").count() == 0


def test_hostile_strings_render_as_inert_text(queue: Queue, dsn: str, open_page: Opener) -> None:
    hostile = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">\x1b[31m'
    dead = _dead(queue, "<b>type</b>", hostile + "E" * (1024 * 1024), {"x": hostile})
    with serving(dsn) as base:
        page = open_page(base)
        for url in ("/", "/jobs", f"/jobs/{dead}", "/dead"):
            page.goto(url)
            assert page.evaluate("window.pwned") is None, url
            assert page.locator("b", has_text="type").count() == 0, url
        assert "<script>window.pwned=1</script>" in page.inner_text("#dead")


def test_an_action_without_the_csrf_token_is_refused(queue: Queue, dsn: str, open_page: Opener) -> None:
    dead = _dead(queue, "t", "boom", {})
    with serving(dsn) as base:
        page = open_page(base)
        page.goto(f"/jobs/{dead}")
        page.eval_on_selector("input[name=csrf]", "e => e.value = 'forged'")  # DevTools-side, not the page's CSP
        page.click("#retry")
        page.wait_for_url("**/act")
        assert "CSRF" in page.inner_text("body")
        assert open_page.problems == ["Failed to load resource: the server responded with a status of 403 (Forbidden)"]
        open_page.problems.clear()
    assert queue.job(dead).status == "dead"  # type: ignore[union-attr]
