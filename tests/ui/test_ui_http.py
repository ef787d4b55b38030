"""The console over HTTP (Starlette's TestClient) against a real database: pages, filters and
keyset pages, roles, CSRF, authentication, hostile job data, actions and their record."""

from __future__ import annotations

import re
from collections.abc import Callable

import psycopg
from psycopg import sql
from starlette.testclient import TestClient

from pgwork.db import Queue
from pgwork.limits import Rate
from pgwork.models import NewJob
from pgwork.ui.security import AuthConfig

HOSTILE = "<script>alert('x')</script>\x1b[2J\u202e<img src=x onerror=alert(1)>"


def _dead(q: Queue, job_type: str, error: str, payload: dict[str, object] | None = None) -> int:
    q.enqueue(job_type, payload or {}, max_attempts=1)
    (job,) = q.claim("w-1", job_types=[job_type])
    q.fail(job.lease, error, retryable=False)
    return job.id


def _csrf(c: TestClient) -> str:
    c.get("/")
    token = c.cookies.get("pgwork_csrf")
    assert token
    return token


def test_every_page_renders_with_the_strict_policy(queue: Queue, client: Callable[..., TestClient]) -> None:
    dead = _dead(queue, "email", "SMTP 554 rejected")
    queue.enqueue("email", {"to": "a"})
    queue.claim("w-2", job_types=["email"])
    c = client()
    for url in (
        "/",
        "/live/overview",
        "/jobs",
        f"/jobs/{dead}",
        "/running",
        "/live/running",
        "/workers",
        "/limits",
        "/dead",
        "/actions",
        "/confirm?action=retry&state=dead",
    ):
        r = c.get(url)
        assert r.status_code == 200, url
        assert r.headers["content-security-policy"].startswith("default-src 'none'; script-src 'self'")
        assert r.headers["x-frame-options"] == "DENY" and r.headers["cache-control"] == "no-store"
        assert "<script>" not in r.text and " style=" not in r.text and "onclick" not in r.text, url
        assert not re.search(r"<script(?![^>]*\bsrc=\"/static/)", r.text), url  # no inline script
    overview = c.get("/").text
    assert "email" in overview and "<svg" in overview
    assert c.get("/static/htmx-2.0.11.min.js").status_code == 200
    assert c.get("/jobs/999999").status_code == 404


def test_find_a_dead_job_by_error_text_and_page_by_keyset(queue: Queue, client: Callable[..., TestClient]) -> None:
    target = _dead(queue, "pdf", "upstream said: quota EXCEEDED for tenant 9")
    queue.enqueue_many([NewJob("pdf", {"n": i}) for i in range(120)])
    c = client()
    found = c.get("/jobs", params={"error": "quota exceeded", "state": "dead"}).text
    assert f'href="/jobs/{target}"' in found and found.count('href="/jobs/') == 1
    # Keyset: each page starts below the last id shown; no OFFSET, no id twice.
    seen: list[int] = []
    url = "/jobs?type=pdf"
    for _ in range(5):
        page = c.get(url).text
        seen += [int(i) for i in re.findall(r'<td><a href="/jobs/(\d+)">', page)]
        more = re.search(r'id="older" href="([^"]+)"', page)
        if more is None:
            break
        url = more.group(1).replace("&amp;", "&")
    assert sorted(seen, reverse=True) == seen and len(seen) == len(set(seen)) == 121
    assert c.get("/jobs", params={"state": "nope"}).status_code == 400
    assert "state: &#39;nope&#39; is not a state" in c.get("/jobs", params={"state": "nope"}).text


def test_a_reader_sees_no_payload_and_cannot_act(
    queue: Queue, client: Callable[..., TestClient], make_role: Callable[..., str]
) -> None:
    dead = _dead(queue, "bill", "card declined", {"card": "4111-SECRET"})
    reader = client(make_role("reader"))
    page = reader.get(f"/jobs/{dead}").text
    assert "card declined" in page and "4111-SECRET" not in page and "may not read payloads" in page
    assert 'id="retry"' not in page and "read-only" in page
    # A payload filter would let a reader probe payloads: it is ignored, and says so.
    probed = reader.get("/jobs", params={"path": "card", "value": "4111-SECRET"}).text
    assert "payload filter was ignored" in probed
    refused = reader.post("/act", data={"action": "retry", "ids": str(dead), "csrf": _csrf(reader)})
    assert refused.status_code == 403 and "may not retry or cancel" in refused.text
    assert queue.job(dead).status == "dead"  # type: ignore[union-attr]

    maintainer = client(make_role("maintainer"))
    page = maintainer.get(f"/jobs/{dead}").text
    assert 'id="retry"' in page and "4111-SECRET" not in page  # a maintainer acts, reads no payload
    producer = client(make_role("producer"))
    assert "4111-SECRET" in producer.get(f"/jobs/{dead}").text
    assert "4111-SECRET" in producer.get("/jobs", params={"path": "card", "value": "4111-SECRET"}).text


def test_actions_need_the_csrf_token_and_same_origin(queue: Queue, client: Callable[..., TestClient]) -> None:
    dead = _dead(queue, "t", "boom")
    c = client()
    token = _csrf(c)
    for data in ({"action": "retry", "ids": str(dead)}, {"action": "retry", "ids": str(dead), "csrf": "forged"}):
        r = c.post("/act", data=data)
        assert r.status_code == 403 and "CSRF" in r.text
    cross = c.post(
        "/act", data={"action": "retry", "ids": str(dead), "csrf": token}, headers={"origin": "https://evil.example"}
    )
    assert cross.status_code == 403
    assert queue.job(dead).status == "dead"  # type: ignore[union-attr]
    done = c.post("/act", data={"action": "retry", "ids": str(dead), "csrf": token})
    assert done.status_code == 200 and "requeued 1 of 1" in done.text
    assert queue.job(dead).status == "pending"  # type: ignore[union-attr]
    cookie = c.get("/").headers.get("set-cookie")
    assert cookie is None  # set once, then kept


def test_bulk_cancel_shows_the_count_then_the_result_and_records_it(
    queue: Queue, client: Callable[..., TestClient]
) -> None:
    queue.enqueue_many([NewJob("import", {"batch": 7 if i < 30 else 8}) for i in range(40)])
    queue.enqueue_many([NewJob("other", {}) for _ in range(5)])
    c = client()
    confirm = c.get("/confirm", params={"action": "cancel", "type": "import", "path": "batch", "value": "7"}).text
    assert re.search(r'id="count"><strong>30</strong> jobs', confirm)
    token = _csrf(c)
    done = c.post("/act", data={"action": "cancel", "type": "import", "path": "batch", "value": "7", "csrf": token})
    assert "cancelled 30 of 30" in done.text
    stats = {s.job_type: s for s in queue.stats()}
    assert stats["import"].ready == 10 and stats["other"].ready == 5
    log = c.get("/actions").text
    assert "filter type=import payload.batch=&#39;7&#39;" in log and "local:testclient" in log and ">30<" in log
    # A state the action cannot move: nothing to confirm.
    assert "No job: cancel moves only" in c.get("/confirm", params={"action": "cancel", "state": "dead"}).text


def test_hostile_job_data_renders_inert(queue: Queue, client: Callable[..., TestClient]) -> None:
    big = HOSTILE + "x" * (1024 * 1024)
    dead = _dead(queue, HOSTILE[:60], "boom", {"html": HOSTILE})
    # pgwork keeps 8000 characters of an error it writes; a row written otherwise can hold more.
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        conn.execute("UPDATE pgwork.jobs SET last_error = %s, progress_note = %s WHERE id = %s", (big, HOSTILE, dead))
    c = client()
    for url in ("/", "/jobs", f"/jobs/{dead}", "/dead"):
        r = c.get(url)
        assert r.status_code == 200, url
        assert "<script>alert" not in r.text and "<img src=x" not in r.text and "\x1b" not in r.text, url
        assert "\u202e" not in r.text, url
    # The overview links to the type's jobs; the filter form echoes it back exactly (escaped), so
    # the link finds the job.
    filtered = c.get("/jobs", params={"type": HOSTILE[:60]}).text
    assert "<script>alert" not in filtered and "<img src=x" not in filtered and f'href="/jobs/{dead}"' in filtered
    detail = c.get(f"/jobs/{dead}").text
    assert "&lt;script&gt;alert(" in detail and "\\x1b[2J" in detail and "\\u202e" in detail
    assert len(detail) < 200_000 and "the first 65536 shown" in detail  # a 1 MiB error costs a page 64 KiB
    assert len(c.get("/jobs").text) < 20_000


def test_workers_and_limits_escape_hostile_names_and_follow_the_role(
    queue: Queue, client: Callable[..., TestClient], make_role: Callable[..., str]
) -> None:
    hostile_type = HOSTILE[:60]
    queue.enqueue(hostile_type, {})
    queue.enqueue("mail", {})
    queue.claim(HOSTILE, job_types=[hostile_type])
    queue.claim("w-calm", job_types=["mail"])
    queue.set_limit(hostile_type, max_running=1, rate=Rate(5, 60.0))
    queue.set_limit("mail", max_running=3)
    with psycopg.connect(queue.dsn, autocommit=True) as conn:  # the calm worker went quiet
        conn.execute(
            "UPDATE pgwork.jobs SET heartbeat_at = now() - interval '5 minutes', "
            "lease_expires_at = now() - interval '1 second' WHERE lease_owner = 'w-calm'"
        )
    for c in (client(), client(make_role("reader"))):
        workers = c.get("/workers").text
        limits = c.get("/limits").text
        for page in (workers, limits):
            assert "<script>alert" not in page and "<img src=x" not in page and "\x1b" not in page
            assert "\\x1b[2J" in page and "\\u202e" in page and "&lt;script&gt;alert(" in page
            assert "\u202e" not in page
        # The quiet worker comes first, marked stale; no lease secret or token reaches the page.
        assert workers.index("w-calm") < workers.index("&lt;script&gt;") and "stale: 1 stuck" in workers
        assert "secret" not in workers.lower() and "token" not in workers.lower()
        assert re.search(r"<td>mail</td>\s*<td class=\"n\">3</td>\s*<td class=\"n\">1</td>", limits)
        assert "5/" in limits and "at its limit" in limits
    # A reader whose grants on both functions were taken back: a page saying so, not an error.
    narrowed = make_role("reader")
    role = psycopg.conninfo.conninfo_to_dict(narrowed)["user"]
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "REVOKE EXECUTE ON FUNCTION pgwork.limits(timestamptz), pgwork.running_jobs(timestamptz) FROM {}"
            ).format(sql.Identifier(str(role)))
        )
    bare = client(narrowed)
    for url, what in (("/workers", "the running jobs"), ("/limits", "the per-type limits")):
        r = bare.get(url)
        assert r.status_code == 200 and f"may not read {what}" in r.text, url


def test_authentication(queue: Queue, client: Callable[..., TestClient]) -> None:
    basic = client(auth=AuthConfig("basic", "ops", "pw-not-in-pages"))
    assert basic.get("/").status_code == 401 and "Basic" in basic.get("/").headers["www-authenticate"]
    assert basic.get("/static/console.css").status_code == 401
    page = basic.get("/", auth=("ops", "pw-not-in-pages"))
    assert page.status_code == 200 and "pw-not-in-pages" not in page.text and "ops" in page.text
    proxy = client(auth=AuthConfig("proxy", header="X-Auth-User"))
    assert proxy.get("/").status_code == 401
    assert "alice" in proxy.get("/", headers={"X-Auth-User": "alice"}).text


def test_no_connection_string_in_pages_or_errors(dsn: str, client: Callable[..., TestClient]) -> None:
    secret_dsn = psycopg.conninfo.make_conninfo(dsn, password="hunter2-secret")
    c = client(secret_dsn, raise_errors=False)
    host = psycopg.conninfo.conninfo_to_dict(dsn).get("host") or ""
    for url in ("/", "/jobs", "/running", "/actions"):
        text = c.get(url).text
        assert "hunter2" not in text and "postgresql://" not in text and "dbname" not in text
        assert host == "" or f"host={host}" not in text
    with psycopg.connect(dsn, autocommit=True) as conn:  # the next read fails inside the database
        conn.execute(
            "ALTER FUNCTION pgwork.find_jobs_contents(text[], text[], text, timestamptz, timestamptz, "
            "text[], text, bigint, integer, integer, integer, timestamptz) RENAME TO gone"
        )
    broken = c.get("/jobs")
    assert broken.status_code == 500 and "hunter2" not in broken.text and "gone" not in broken.text
