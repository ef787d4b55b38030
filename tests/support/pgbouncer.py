"""The pooler tests' PgBouncer: the lab's launcher (pgwork/tools/lab/pgbouncer.py), one for both."""

from __future__ import annotations

from pgwork.tools.lab.pgbouncer import Bouncer, available, config, start

__all__ = ["Bouncer", "available", "config", "start"]
