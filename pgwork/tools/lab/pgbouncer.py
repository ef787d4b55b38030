"""A real PgBouncer (Debian's, 1.18) in transaction mode in front of a PostgreSQL server, for the
lab's pooler experiment and the pooler tests (tests/support/pgbouncer.py). It refuses to run as
root, so as root it runs as the `postgres` user,
with its own config and auth file in a private directory, on a free port; `pooled(dsn)` is the
same database through it. Every database of the server is reachable (`* =`); the server
connections it opens log in as the test server's user, whatever user the client names."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

BINARY = "/usr/sbin/pgbouncer"
START_SECONDS = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config(
    server_dsn: str,
    port: int,
    directory: Path,
    *,
    pool_size: int,
    mode: str,
    round_robin: bool = False,
    deallocate_each_transaction: bool = False,
) -> str:
    """pgbouncer.ini for a pool of `pool_size` server connections per database to the server of
    `server_dsn` (pure). `round_robin` hands out server connections in turn instead of the most
    recently used first. `deallocate_each_transaction` runs `DEALLOCATE ALL` whenever a server
    connection goes back to the pool, in every pool mode: a statement a session prepared is gone by
    its next transaction, so a client that relies on session state fails at once, every time,
    instead of when two of its transactions happen to land on different server connections."""
    params = conninfo_to_dict(server_dsn)
    target = {
        "host": str(params.get("host") or "127.0.0.1"),
        "port": str(params.get("port") or "5432"),
        "user": str(params.get("user") or "postgres"),
    }
    if params.get("password"):
        target["password"] = str(params["password"])
    line = " ".join(f"{k}={v}" for k, v in target.items())
    reset = ""
    if deallocate_each_transaction:
        reset = "server_reset_query = DEALLOCATE ALL\nserver_reset_query_always = 1\n"
    return f"""[databases]
* = {line}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = any
pool_mode = {mode}
default_pool_size = {pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 2000
max_db_connections = {pool_size}
server_lifetime = 3600
server_round_robin = {1 if round_robin else 0}
ignore_startup_parameters = extra_float_digits
admin_users = {target["user"]}
stats_users = {target["user"]}
logfile = {directory}/pgbouncer.log
pidfile = {directory}/pgbouncer.pid
{reset}"""


@dataclass
class Bouncer:
    port: int
    directory: Path
    process: subprocess.Popen[bytes]
    server_user: str

    def pooled(self, dsn: str) -> str:
        """`dsn`'s database through the pooler."""
        return make_conninfo(dsn, host="127.0.0.1", port=str(self.port), hostaddr="")

    def admin(self, dsn: str) -> str:
        return make_conninfo(self.pooled(dsn), dbname="pgbouncer", user=self.server_user)

    def log(self) -> str:
        path = self.directory / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def available() -> bool:
    return Path(BINARY).exists()


def start(
    server_dsn: str,
    *,
    pool_size: int = 10,
    mode: str = "transaction",
    round_robin: bool = False,
    deallocate_each_transaction: bool = False,
) -> Bouncer:
    directory = Path(tempfile.mkdtemp(prefix="pgwork-pgbouncer-"))
    port = free_port()
    ini = directory / "pgbouncer.ini"
    ini.write_text(
        config(
            server_dsn,
            port,
            directory,
            pool_size=pool_size,
            mode=mode,
            round_robin=round_robin,
            deallocate_each_transaction=deallocate_each_transaction,
        )
    )
    uid: int | None = None
    gid: int | None = None
    if os.geteuid() == 0:
        # PgBouncer will not run as root: hand the directory to postgres (or, for a server on a
        # private Unix socket such as the embedded one, to the socket directory's owner) and run as it.
        host = str(conninfo_to_dict(server_dsn).get("host") or "")
        owner = Path(host).stat().st_uid if host.startswith("/") else None
        user = pwd.getpwuid(owner) if owner else pwd.getpwnam("postgres")
        os.chown(directory, user.pw_uid, user.pw_gid)
        os.chown(ini, user.pw_uid, user.pw_gid)
        uid, gid = user.pw_uid, user.pw_gid
    process = subprocess.Popen(
        [BINARY, str(ini)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        user=uid,
        group=gid,
        extra_groups=[] if uid is not None else None,
    )
    server_user = str(conninfo_to_dict(server_dsn).get("user") or "postgres")
    bouncer = Bouncer(port, directory, process, server_user)
    probe = bouncer.pooled(server_dsn)
    deadline = time.monotonic() + START_SECONDS
    while True:
        if process.poll() is not None:
            bouncer.stop()
            raise RuntimeError(f"pgbouncer exited {process.returncode}: {bouncer.log()[-2000:]}")
        try:
            with psycopg.connect(probe, connect_timeout=2, prepare_threshold=None) as conn:
                conn.execute("SELECT 1")
            return bouncer
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                log = bouncer.log()[-2000:]
                bouncer.stop()
                raise RuntimeError(
                    f"pgbouncer not accepting connections after {START_SECONDS:g}s ({exc}): {log}"
                ) from None
        time.sleep(0.05)
