"""The Queue's checkpoint: a running job's resumable state, saved at once and fenced by its
lease token (migration 0012). Split from pgwork.db.queue only to keep modules small."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import errors
from psycopg.types.json import Jsonb

from pgwork.db.base import QueueBase
from pgwork.db.connect import AnyConnection
from pgwork.db.params import identity
from pgwork.db.rows import CheckpointRow
from pgwork.errors import InvalidArgument
from pgwork.models import Lease
from pgwork.progress import checkpoint_json
from pgwork.quoting import inert


class Checkpoints(QueueBase):
    def checkpoint(
        self, lease: Lease, state: Any, *, now: datetime | None = None, conn: AnyConnection | None = None
    ) -> bool:
        """Save `state` (JSON, at most pgwork.progress.MAX_CHECKPOINT_BYTES; None clears it) as the
        job's checkpoint, which its next attempt receives. True once it is stored; False when the
        token no longer holds the job (nothing was written: stop, the job is someone else's).
        One short statement: a checkpoint exists for the crash that may follow, so it does not
        wait for the next heartbeat."""
        # Checked here, so a bad state is the caller's error before anything is sent.
        value = None if state is None else Jsonb(checkpoint_json(state), dumps=identity)
        params = {"id": lease.job_id, "token": lease.token, "state": value, "now": now}
        try:
            return self._one("checkpoint", params, CheckpointRow, conn) is not None
        except (errors.ProgramLimitExceeded, errors.InvalidParameterValue) as exc:
            # The server's own check (a client older than it, or a limit measured differently):
            # the caller's error, named as the client would name it, never a raw database error.
            problem = (exc.diag.message_primary or "is refused by the server").removeprefix("pgwork: ")
            raise InvalidArgument(
                "state", inert(problem.removeprefix("state: ")), inert(exc.diag.message_hint or "")
            ) from None
