"""`pgwork job show ID`: one job whole, as text or JSON.

Two indexed lookups by id (migration 16): the job's life, which any reader may see, and its
contents (payload, checkpoint, result), read only when the connecting role may (producers and
workers; the reader profile sees no payload). What is shown per attempt is what pgwork keeps:
the attempt count, the current (or last) attempt's start, and the newest error with the notes
pgwork appended to it (a lease reclaimed, a release, a requeue by hand); earlier attempts' own
errors are not stored.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from pgwork.cli_parser import SubcommandParser
from pgwork.commands.common import UsageError, open_queue
from pgwork.db import JobContents, JobDetail
from pgwork.db.pipelines import Relative
from pgwork.durations import format_duration
from pgwork.tables import cell, json_safe, visible
from pgwork.validation import parse_id

HIDDEN = "(not shown: this role may not read payloads and results; the producer and worker profiles may)"


def _ago(then: datetime | None, now: datetime) -> str:
    if then is None:
        return "-"
    seconds = (now - then).total_seconds()
    when = cell(then)
    if seconds >= 0:
        return f"{when} ({format_duration(seconds)} ago)"
    return f"{when} (in {format_duration(-seconds)})"


def _json_text(value: Any) -> str:
    return visible(json.dumps(json_safe(value), default=str, ensure_ascii=False, sort_keys=True))


def _lease(d: JobDetail) -> str:
    if d.status != "running" or d.lease_expires_at is None:
        return "-" if d.lease_owner is None else f"none (last held by {visible(d.lease_owner)})"
    left = (d.lease_expires_at - d.now).total_seconds()
    expiry = f"expires in {format_duration(left)}" if left >= 0 else f"expired {format_duration(-left)} ago"
    beat = (
        "" if d.heartbeat_at is None else f"; heartbeat {format_duration((d.now - d.heartbeat_at).total_seconds())} ago"
    )
    return f"held by {visible(d.lease_owner or '?')}, {expiry}{beat}"


def _progress(d: JobDetail) -> str:
    if d.progress is None and d.progress_note is None:
        return "-"
    parts = [] if d.progress is None else [f"{d.progress:.0%}"]
    if d.progress_note:
        parts.append(repr(visible(d.progress_note)))
    if d.progress_at is not None:
        parts.append(f"(reported {format_duration((d.now - d.progress_at).total_seconds())} ago)")
    return " ".join(parts)


def detail_lines(d: JobDetail, contents: JobContents | None) -> list[tuple[str, str]]:
    """The text form, label and value per line (pure)."""
    key = visible(d.idempotency_key) + (" (unique)" if d.is_unique else "")
    lines = [
        ("job", f"{d.id}  {visible(d.job_type)}  {d.status}"),
        ("attempts", f"{d.attempt_count} of {d.max_attempts}"),
        ("created", _ago(d.created_at, d.now)),
        ("available", _ago(d.available_at, d.now)),
        ("started", _ago(d.started_at, d.now) + (f"  (attempt {d.attempt_count})" if d.started_at else "")),
        ("completed", _ago(d.completed_at, d.now)),
        ("lease", _lease(d)),
        ("progress", _progress(d)),
        ("checkpoint", "-" if d.checkpoint_at is None else f"saved {_ago(d.checkpoint_at, d.now)}"),
        ("timeout", "handler's" if d.timeout_seconds is None else format_duration(d.timeout_seconds)),
        ("cancel", "-" if d.cancel_requested_at is None else f"requested {_ago(d.cancel_requested_at, d.now)}"),
        ("key", key),
        ("trace id", d.trace_id or "-"),
        ("last error", "-" if d.last_error is None else visible(d.last_error)),
    ]
    if contents is None:
        lines.append(("payload", HIDDEN))
        lines.append(("result", "exists" if d.has_result else "-"))
    else:
        lines.append(("payload", _json_text(contents.payload)))
        if contents.checkpoint is not None:
            at = dict(lines)["checkpoint"]
            lines = [(k, f"{at}: {_json_text(contents.checkpoint)}" if k == "checkpoint" else v) for k, v in lines]
        lines.append(("result", "-" if not d.has_result else _json_text(contents.result)))
    return lines


def detail_json(d: JobDetail, contents: JobContents | None) -> dict[str, Any]:
    """The JSON form (pure): every column, ages in seconds, contents or `contents_visible: false`."""
    out: dict[str, Any] = {k: v for k, v in vars(d).items() if k not in ("now", "may_read_contents")}

    def age(then: datetime | None) -> float | None:
        return None if then is None else round((d.now - then).total_seconds(), 3)

    out["read_at"] = d.now
    out["lease_remaining_seconds"] = (
        None if d.lease_expires_at is None else round((d.lease_expires_at - d.now).total_seconds(), 3)
    )
    out["since_heartbeat_seconds"] = age(d.heartbeat_at)
    out["since_progress_seconds"] = age(d.progress_at)
    out["since_checkpoint_seconds"] = age(d.checkpoint_at)
    out["contents_visible"] = contents is not None
    out["payload"] = None if contents is None else contents.payload
    out["checkpoint"] = None if contents is None else contents.checkpoint
    out["result"] = None if contents is None else contents.result
    return out


# Parents and children listed by `job show` (each); the JSON says when there are more.
FAMILY_LIMIT = 20


def family_lines(family: list[Relative]) -> list[tuple[str, str]]:
    """A pipeline job's parents and children, one line each kind (pure; none for a plain job)."""
    lines = []
    for relation, label in (("parent", "parents"), ("child", "children")):
        kin = [r for r in family if r.relation == relation]
        if kin:
            shown = ", ".join(
                f"{r.id} {visible(r.job_type)} {r.status}" + (f" (blocked by {r.blocked_by})" if r.blocked_by else "")
                for r in kin
            )
            more = f", ... (first {FAMILY_LIMIT} shown)" if len(kin) >= FAMILY_LIMIT else ""
            lines.append((label, shown + more))
    return lines


def cmd_show(args: argparse.Namespace) -> int:
    job_id = parse_id(args.id, "ID")
    with open_queue(args) as q:
        detail = q.job_detail(job_id)
        if detail is None:
            raise UsageError(f"ID: no job {job_id} (it may have been pruned); list jobs with pgwork stats/running/dead")
        contents = q.job_contents(job_id) if detail.may_read_contents else None
        family = q.job_family(job_id, limit=FAMILY_LIMIT)
    if args.json:
        out = detail_json(detail, contents)
        for relation, label in (("parent", "parents"), ("child", "children")):
            out[label] = [vars(r) for r in family if r.relation == relation]
        print(json.dumps(json_safe(out), default=str, indent=2, allow_nan=False))
    else:
        lines = detail_lines(detail, contents)
        lines[1:1] = family_lines(family)
        width = max(len(label) for label, _ in lines)
        print("\n".join(f"{label.ljust(width)}  {value}" for label, value in lines))
    return 0


def register(sub: Any) -> None:
    text = "one job whole: status, attempts, timings, lease, progress, error, payload and result"
    p = sub.add_parser("job", help=text, description=text, epilog="pgwork job show ID [--json]")
    actions = p.add_subparsers(dest="job_command", required=True, metavar="ACTION", parser_class=SubcommandParser)
    s = actions.add_parser(
        "show",
        help="one job whole (payload and result only for roles that may read them)",
        description="one job whole: status, attempts, timings, lease and heartbeat, progress, checkpoint age, newest "
        "error, key, trace id; payload and result for the producer and worker profiles",
    )
    s.add_argument("id", metavar="ID")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=cmd_show)
