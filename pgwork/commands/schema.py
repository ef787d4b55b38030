"""`pgwork migrate` and `pgwork grant`: the schema and who may use it."""

from __future__ import annotations

import argparse
from typing import Any

from pgwork.commands.common import adder, dsn_of, seconds
from pgwork.db import GRANT_PROFILES, grant, migrate
from pgwork.db.schema import LOCK_WAIT_SECONDS


def cmd_migrate(args: argparse.Namespace) -> int:
    applied = migrate(dsn_of(args), lock_wait=seconds(args.lock_wait, "--lock-wait"))
    print(f"applied migrations {applied}" if applied else "already up to date")
    return 0


def cmd_grant(args: argparse.Namespace) -> int:
    applied = grant(dsn_of(args), args.role, args.profile)
    print(f"granted {args.role} the {' + '.join(applied)} privileges on schema pgwork")
    return 0


def register(sub: Any) -> None:
    add = adder(sub)
    p = add("migrate", cmd_migrate, "create or upgrade the pgwork schema (safe to run from many pods at once)")
    p.add_argument(
        "--lock-wait",
        default=f"{LOCK_WAIT_SECONDS:g}s",
        metavar="DURATION",
        help="how long to wait while another migrate holds the migration lock, e.g. 30m (default %(default)s)",
    )
    p = add("grant", cmd_grant, "give an existing role least-privilege access (run as the migrating role)")
    p.add_argument("role", metavar="ROLE")
    p.add_argument(
        "--profile",
        choices=GRANT_PROFILES,
        default="worker",
        help="reader (counts, ages, errors; no payloads), producer (+ enqueue), worker (+ claim, heartbeat, "
        "finish), reaper (reader + reap, prune), maintainer (reaper + retry, cancel); sets exactly that profile",
    )
