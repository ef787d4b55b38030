"""What a handler may report about a long job: its progress and its checkpoint (pure checks).

Progress is a fraction 0..1 with an optional short note, sent with the worker's next heartbeat;
a checkpoint is a small JSON value saved at once and handed to the job's next attempt. The
checks run on the handler's thread when it reports, so a bad value is the handler's error there
and then, never a heartbeat that fails (and with it every lease the worker holds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgwork.errors import InvalidArgument
from pgwork.jsonshape import check_json, jsonb_text_bytes
from pgwork.quoting import quoted
from pgwork.validation import error_text

# Enough for "page 3 of 10 (invoice-2024-03.pdf)"; the column's check says the same.
MAX_NOTE_CHARS = 200
# A position to resume from (a page, a cursor, a few ids), not the work's data; pgwork.checkpoint
# in migration 0012 refuses more with the same figure.
MAX_CHECKPOINT_BYTES = 64 * 1024


@dataclass(frozen=True)
class Progress:
    fraction: float
    note: str | None = None


def check_progress(fraction: Any, note: Any = None) -> Progress:
    """The progress as stored, or InvalidArgument naming `fraction` or `note`. A note longer than
    MAX_NOTE_CHARS is cut (a note built from a file name must not fail the job); one PostgreSQL
    cannot hold (a NUL, a lone surrogate) is shown escaped, as last_error shows such text."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise InvalidArgument(
            "fraction", f"must be a number from 0 to 1, got {quoted(fraction)}", "e.g. job.progress(page / pages)"
        )
    # Compared before float(): float(10**400) raises OverflowError; NaN fails the comparison.
    if not 0 <= fraction <= 1:
        raise InvalidArgument(
            "fraction", f"{quoted(fraction, 40)} is outside 0..1", "pass done / total, e.g. 0.4 for 4 of 10, not 40"
        )
    value = float(fraction)
    if note is None:
        return Progress(value)
    if not isinstance(note, str):
        raise InvalidArgument("note", f"must be a string or None, got {quoted(note)}", "e.g. 'page 3 of 10'")
    return Progress(value, error_text(note, MAX_NOTE_CHARS) if note else None)


CHECKPOINT_SIZE_FIX = (
    "save a position to resume from (a page number, a cursor), not the data; "
    "keep large state in your own storage and checkpoint its key"
)


def checkpoint_json(state: Any) -> str:
    """`state` as the JSON text a checkpoint stores, or InvalidArgument naming `state`. Its size is
    measured as pgwork.checkpoint measures it (the stored jsonb's text), and its shape is what the
    server's check allows (migration 0019): what is accepted here is stored, and what is stored
    the next attempt decodes."""
    text = check_json(
        state,
        "state",
        MAX_CHECKPOINT_BYTES,
        canonical=False,
        size_fix=CHECKPOINT_SIZE_FIX,
        types_fix="save JSON types only (dict, list, str, int, float, bool, None)",
    )
    size = jsonb_text_bytes(state, text)
    if size > MAX_CHECKPOINT_BYTES:
        problem = f"is {size} bytes as the server stores it (numbers in plain decimal), over the limit of"
        raise InvalidArgument("state", f"{problem} {MAX_CHECKPOINT_BYTES}", CHECKPOINT_SIZE_FIX)
    return text
