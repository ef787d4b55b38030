"""The lab's database: created for the lab (UTF8, from template0), migrated, reset between runs.

`--dsn` names a server; the lab creates its own database there and drops it afterwards. Without
`--dsn` it starts an embedded PostgreSQL in a temporary directory (DATABASE_URL is ignored on
purpose: a benchmark that creates and drops databases must never pick up a production URL).
"""

from __future__ import annotations

import platform
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from pgwork import embedded
from pgwork.db import AnyConnection, Queue, connect, migrate
from pgwork.dsn import with_dbname
from pgwork.errors import InvalidArgument
from pgwork.models import NewJob
from pgwork.tools.lab import query

JOB_TYPE = "lab"
LAB_PREFIX = "pgwork_lab"
ENQUEUE_CHUNK = 20_000


@dataclass(frozen=True)
class RunSummary:
    jobs: int
    succeeded: int
    attempts: int
    inflated: int
    max_attempt: int
    seconds: float
    results: int


def wait_for_next_segment(conn: psycopg.Connection[Any]) -> None:
    """Wait for the ready ring's next segment (at most 10 s), so what is written next lies apart
    from what came before, as jobs enqueued a while after a batch do."""
    segment = query("ready_segment_now")
    first = conn.execute(segment).fetchone()
    while conn.execute(segment).fetchone() == first:
        time.sleep(0.05)


class LabDatabase:
    def __init__(self, server_dsn: str | None, name: str = "pgwork_lab", *, keep: bool = False) -> None:
        if not name.replace("_", "").isalnum() or not name.isascii() or len(name) > 63:
            raise InvalidArgument("--database", f"{name!r} is not a plain name", "use up to 63 letters, digits, _")
        # The lab drops and recreates this database: never let it name one that holds real data.
        if not name.startswith(LAB_PREFIX):
            raise InvalidArgument("--database", f"{name!r} does not start with {LAB_PREFIX!r}", "e.g. pgwork_lab_2")
        self.name = name
        self.keep = keep
        self._server: Any = None
        self._tmp: Path | None = None
        if server_dsn:
            self.admin_dsn = server_dsn
        else:
            self._tmp = Path(tempfile.mkdtemp(prefix="pgwork-lab-pg-"))
            self._server = embedded.start(self._tmp / "data", delete_on_exit=True)
            self.admin_dsn = embedded.admin_dsn(self._server)
        try:
            self._create()
        except BaseException:
            self._stop_server()
            raise

    def _create(self) -> None:
        name = self.name
        self._admin(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)),
            sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'").format(
                sql.Identifier(name)
            ),
        )
        self.dsn = with_dbname(self.admin_dsn, name)
        migrate(self.dsn)
        self.conn: AnyConnection = connect(self.dsn, application_name="pgwork-lab")
        self.run("setup")
        self.queue = Queue(self.dsn, pool_size=2, application_name="pgwork-lab")

    def _admin(self, *statements: sql.Composed) -> None:
        with connect(self.admin_dsn, application_name="pgwork-lab-admin") as conn:
            for statement in statements:
                conn.execute(statement)

    def close(self) -> None:
        self.queue.close()
        self.conn.close()
        if not self.keep:
            self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.name)))
        self._stop_server()

    def _stop_server(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> LabDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        with self.conn.cursor() as cur:
            cur.execute(query(name), params or {})
            return list(cur.fetchall()) if cur.description else []

    def one(self, name: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        rows = self.run(name, params)
        if not rows:
            raise RuntimeError(f"lab query {name} returned no row")
        return rows[0]

    def reset(self) -> None:
        """Jobs tables emptied and the whole database VACUUMed: every experiment's case starts on the
        same footing. Without the VACUUM a later case drained among the dead tuples earlier cases left
        (pgwork.ready's partitions, the catalogs), since the local server runs with autovacuum off."""
        self.run("reset")
        self.run("vacuum_database")

    def enqueue(self, count: int, first: int = 0) -> None:
        for start in range(first, first + count, ENQUEUE_CHUNK):
            stop = min(first + count, start + ENQUEUE_CHUNK)
            self.queue.enqueue_many([NewJob(JOB_TYPE, {"n": i}) for i in range(start, stop)])
        self.run("analyze")

    def analyze(self) -> None:
        self.run("analyze")

    def fresh_queue(self, jobs: int) -> None:
        self.reset()
        self.enqueue(jobs)

    def summary(self) -> RunSummary:
        r = self.one("run_summary")
        return RunSummary(
            int(r["jobs"]),
            int(r["succeeded"]),
            int(r["attempts"]),
            int(r["inflated"]),
            int(r["max_attempt"]),
            float(r["seconds"] or 0.0),
            int(r["results"]),
        )

    def machine(self) -> dict[str, str]:
        server = self.one("server_version")
        return {
            "cpu": _cpu_model(),
            "cores": str(_cores()),
            "memory": _memory(),
            "os": f"{platform.system()} {platform.release()}",
            "python": platform.python_version(),
            "postgresql": str(server["version"]),
            "server": "embedded (Unix socket)" if self._server is not None else "local server (TCP 127.0.0.1)",
            "synchronous_commit": str(server["synchronous_commit"]),
            "fsync": str(server["fsync"]),
            "shared_buffers": str(server["shared_buffers"]),
        }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    return "unknown"
