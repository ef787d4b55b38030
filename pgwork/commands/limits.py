"""`pgwork limits set|show|clear`: fleet-wide limits per job type, kept in the database and
enforced by every worker's claim (migration 11). Setting and clearing need the maintainer profile;
showing, any reader."""

from __future__ import annotations

import argparse
from typing import Any

from pgwork.cli_parser import SubcommandParser
from pgwork.commands.common import open_queue, print_rows
from pgwork.errors import InvalidArgument
from pgwork.limits import MAX_RUNNING, TypeLimit, parse_rate
from pgwork.validation import check_int, parse_whole


def register(sub: Any) -> None:
    text = "fleet-wide limits per job type: at most N running at once, at most N claims per period"
    usage = (
        "pgwork limits set TYPE [--max-running N] [--rate COUNT/UNIT]  (replaces the type's whole limit); "
        "pgwork limits show [--json]; pgwork limits clear TYPE"
    )
    p = sub.add_parser("limits", help=text, description=text, epilog=usage)
    actions = p.add_subparsers(dest="limits_command", required=True, metavar="ACTION", parser_class=SubcommandParser)
    s = actions.add_parser(
        "set",
        help="set a type's whole limit (what is not given is not limited)",
        description="set a type's whole limit, replacing the one it had; options not given are not limited",
    )
    s.add_argument("job_type", metavar="TYPE")
    s.add_argument("--max-running", help="at most this many of the type's jobs running at once across all workers")
    s.add_argument("--rate", help="at most this many claims per period: 60/m, 5/s, 1000/h, 100/10s")
    s.set_defaults(func=cmd_set)
    c = actions.add_parser("clear", help="lift a type's limit", description="lift a type's limit")
    c.add_argument("job_type", metavar="TYPE")
    c.set_defaults(func=cmd_clear)
    w = actions.add_parser("show", help="every limit, with running jobs and tokens left", description="every limit")
    w.add_argument("--json", action="store_true", help="print JSON")
    w.set_defaults(func=cmd_show)


def cmd_set(args: argparse.Namespace) -> int:
    max_running = None
    if args.max_running is not None:
        fix = "give a whole number of jobs, at least 1, e.g. 4"
        max_running = check_int(
            parse_whole(args.max_running, "--max-running", fix), "--max-running", 1, MAX_RUNNING, fix
        )
    rate = None if args.rate is None else parse_rate(args.rate)
    if max_running is None and rate is None:
        raise InvalidArgument(
            "options",
            "name no limit",
            "give --max-running N and/or --rate N/UNIT; to lift the type's limit run `pgwork limits clear TYPE`",
        )
    with open_queue(args) as q:
        created = q.set_limit(args.job_type, max_running=max_running, rate=rate)
    limit = TypeLimit(args.job_type, max_running, rate.count if rate else None, rate.seconds if rate else None)
    print(f"{'limited' if created else 'changed the limit of'} {args.job_type}: {describe_limit(limit)}")
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    with open_queue(args) as q:
        cleared = q.clear_limit(args.job_type)
    print(f"lifted the limit of {args.job_type}" if cleared else f"{args.job_type} had no limit")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with open_queue(args) as q:
        limits = q.limits()
    rows = [limit_row(limit, as_json=args.json) for limit in limits]
    if rows or args.json:
        print_rows(rows, args.json)
    else:
        print("no limits")
    return 0


def describe_limit(limit: TypeLimit) -> str:
    parts = []
    if limit.max_running is not None:
        parts.append(f"at most {limit.max_running} running")
    if limit.rate is not None:
        parts.append(f"claims at most {limit.rate}")
    return ", ".join(parts)


def limit_row(limit: TypeLimit, *, as_json: bool) -> dict[str, Any]:
    """One row of `pgwork limits show` (pure): the rate as people write it in the table."""
    if as_json:
        return {
            "job_type": limit.job_type,
            "max_running": limit.max_running,
            "rate_count": limit.rate_count,
            "rate_seconds": limit.rate_seconds,
            "running": limit.running,
            "tokens": None if limit.tokens is None else round(limit.tokens, 3),
        }
    return {
        "job_type": limit.job_type,
        "max_running": "-" if limit.max_running is None else limit.max_running,
        "running": limit.running,
        "rate": "-" if limit.rate is None else str(limit.rate),
        "tokens": "-" if limit.tokens is None else f"{limit.tokens:.1f}",
    }
