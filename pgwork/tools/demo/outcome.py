"""What the demo prints and checks about its jobs, as pure functions of their rows."""

from __future__ import annotations

from typing import Any

# How many pages the long scan has (its last checkpoint must name the last one).
LONG_SCAN_PAGES = 5


def progress(rows: Any) -> str:
    statuses = [r["status"] for r in rows]
    retrying = sum(1 for r in rows if r["status"] == "pending" and r["attempt_count"] > 0)
    return (
        f"succeeded {statuses.count('succeeded')}/{len(statuses)}  running {statuses.count('running')}  "
        f"pending {statuses.count('pending')} (retrying {retrying})  dead {statuses.count('dead')}"
    )


def failed_attempt(status: str, attempt_count: int) -> int:
    """The attempt whose error `last_error` holds (pure): a running job's is the one before the
    attempt it is on now (the claim raised attempt_count, the error is still its predecessor's)."""
    return attempt_count - 1 if status == "running" else attempt_count


def timeout_lines(rows: dict[int, dict[str, Any]], seen: set[tuple[int, int]]) -> list[str]:
    """One line per attempt that timed out, not shown before (adds to `seen`), each beside its own
    attempt's number: "attempt 1: timed out ... -> running again (attempt 2)", then
    "attempt 2: timed out ... -> dead" (pure but for `seen`)."""
    lines = []
    for i, r in rows.items():
        if "timed out after" not in (r["last_error"] or ""):
            continue
        attempt = failed_attempt(r["status"], r["attempt_count"])
        if (i, attempt) in seen:
            continue
        seen.add((i, attempt))
        then = f"running again (attempt {r['attempt_count']})" if r["status"] == "running" else r["status"]
        lines.append(f"job {i} ({r['payload']['document']}) attempt {attempt}: {first_line(r['last_error'])} -> {then}")
    return lines


def first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def reclaim_note(text: str | None) -> str:
    start = (text or "").find("[lease expired")
    return (text or "")[start:].split("]")[0] + "]" if start >= 0 else ""


def check(rows: dict[int, dict[str, Any]], roles: dict[int, str], n_results: int) -> list[str]:
    """What the demo promises; an empty list when all of it held."""
    problems = []
    succeeded = [r for r in rows.values() if r["status"] == "succeeded"]
    if n_results != len(succeeded):
        problems.append(f"{n_results} result rows for {len(succeeded)} succeeded jobs")
    for i, role in roles.items():
        r = rows[i]
        if role == "poison" and r["status"] != "dead":
            problems.append(f"poison job {i} is {r['status']}, not dead")
        if role == "flaky" and (r["status"] != "succeeded" or r["attempt_count"] != 3):
            problems.append(f"flaky job {i} is {r['status']} after {r['attempt_count']} attempts, not succeeded at 3")
        if role == "long" and (r["status"] != "succeeded" or r["attempt_count"] != 2):
            problems.append(f"long job {i} is {r['status']} at attempt {r['attempt_count']}, not succeeded at 2")
        if role == "hung" and (r["status"] != "dead" or "timed out after" not in (r["last_error"] or "")):
            problems.append(f"hung job {i} is {r['status']} ({first_line(r['last_error'])}), not dead by its timeout")
        if role == "long" and (r["checkpoint"] or {}).get("page") != LONG_SCAN_PAGES:
            problems.append(f"long job {i} ended with checkpoint {r['checkpoint']}, not its last page")
        if role in ("clean", "index") and r["status"] != "succeeded":
            problems.append(f"{role} job {i} is {r['status']}")
    return problems
