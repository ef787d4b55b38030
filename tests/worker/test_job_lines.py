"""A batch's job lines (pgwork.worker.bookkeeping): one LogRecord per job, the later ones copied from
the first the logger made (issue 28), each with its own message, a custom record factory still used
for every one, and nothing a handler adds to one record showing on the next. No database."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from pgwork.worker import bookkeeping

SUCCESS = "job %s (%s) attempt %d succeeded in %.3fs%s"


class Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        record.stamped = len(self.records)  # what a handler may add to the record it handles


@pytest.fixture
def kept() -> Iterator[Keep]:
    handler = Keep()
    log = logging.getLogger("pgwork.worker.jobs")
    before = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(before)


def test_each_job_is_its_own_record_with_its_own_message(kept: Keep) -> None:
    lines = bookkeeping._Lines()
    for n in (1, 2, 3):
        lines.line(logging.INFO, SUCCESS, n, "ocr\x1b[2J", 1, 0.25, "")
    lines.line(logging.WARNING, "job %s (%s) attempt %d failed -> %s: %s", 4, "ocr", 2, "retry", "boom")
    assert [r.getMessage() for r in kept.records] == [
        "job 1 (ocr\\u001b[2J) attempt 1 succeeded in 0.250s",  # job data made inert, as before
        "job 2 (ocr\\u001b[2J) attempt 1 succeeded in 0.250s",
        "job 3 (ocr\\u001b[2J) attempt 1 succeeded in 0.250s",
        "job 4 (ocr) attempt 2 failed -> retry: boom",
    ]
    assert [r.levelno for r in kept.records] == [logging.INFO] * 3 + [logging.WARNING]
    assert all(r.name == "pgwork.worker.jobs" and r.funcName == "_log" for r in kept.records)
    # What the handler added to the first record is not copied into the next.
    assert [getattr(r, "stamped", None) for r in kept.records] == [1, 2, 3, 4]
    assert len({id(r) for r in kept.records}) == 4


def test_a_custom_record_factory_makes_every_record(kept: Keep) -> None:
    made: list[logging.LogRecord] = []
    default = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = default(*args, **kwargs)
        made.append(record)
        return record

    logging.setLogRecordFactory(factory)
    try:
        lines = bookkeeping._Lines()
        for n in (1, 2, 3):
            lines.line(logging.INFO, SUCCESS, n, "ocr", 1, 0.25, "")
    finally:
        logging.setLogRecordFactory(default)
    assert made == kept.records and len(made) == 3


def test_a_quiet_logger_makes_no_record(kept: Keep) -> None:
    logging.getLogger("pgwork.worker.jobs").setLevel(logging.WARNING)
    bookkeeping._Lines().line(logging.INFO, SUCCESS, 1, "ocr", 1, 0.25, "")
    assert kept.records == []
