"""A batch's job lines (pgwork.worker.bookkeeping): one LogRecord per job, the later ones copied from
the first the logger made (issue 28), each with its own message, a custom record factory still used
for every one, and nothing a handler adds to one record showing on the next; where only the
command line's own handler would see them, the batch's lines in one write, each as its record would
have been written. No database."""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable, Iterator

import pytest

from pgwork import logsetup
from pgwork.tables import inert
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


# -- the command line's own handler: a batch's lines in one write (logsetup.batch_handler) -----


class Writes(io.StringIO):
    """A stream that keeps each write apart."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)


HOSTILE = "ocr\x1b[2J\n\u202eé"  # ESC, a newline, a bidi override, a printable non-ASCII letter
NOW_NS = 1_764_950_400_123_456_789


@pytest.fixture
def own(monkeypatch: pytest.MonkeyPatch) -> tuple[logsetup.LineHandler, Writes]:
    """The jobs logger writing only to a handler made as `logsetup.configure` makes it: a logger of
    its own, outside logging's tree (pytest hangs its handlers on the root and on every logger
    that does not propagate), the module's for the test."""
    stream = Writes()
    handler = logsetup.LineHandler(stream)
    handler.setFormatter(logsetup.ScrubbingFormatter(logsetup.FORMAT, "s3cret"))
    log = logging.Logger("pgwork.worker.jobs", logging.INFO)
    log.addHandler(handler)
    monkeypatch.setattr(bookkeeping, "log", log)
    return handler, stream


def as_emitted(handler: logging.Handler, level: int, msg: str, *args: object) -> str:
    """What the handler's emit writes for one record made at NOW_NS."""
    record = logging.LogRecord("pgwork.worker.jobs", level, __file__, 1, msg, args, None)
    record.created, record.msecs = NOW_NS / 1e9, float((NOW_NS % 1_000_000_000) // 1_000_000)
    return handler.format(record) + "\n"


def test_own_handler_writes_a_batch_once_with_each_line_as_emit_would(
    own: tuple[logsetup.LineHandler, Writes], monkeypatch: pytest.MonkeyPatch
) -> None:
    handler, stream = own
    monkeypatch.setattr(time, "time_ns", lambda: NOW_NS)
    lines = bookkeeping._Lines()
    for n in (1, 2, 3):
        lines.line(logging.INFO, SUCCESS, n, HOSTILE, 1, 0.25, "")
    assert stream.writes == []  # held until the batch is booked
    lines.flush()
    expected = "".join(as_emitted(handler, logging.INFO, SUCCESS, n, inert(HOSTILE), 1, 0.25, "") for n in (1, 2, 3))
    assert stream.writes == [expected]
    assert expected.count("\n") == 3 and "\x1b" not in expected and "\u202e" not in expected
    assert "job 2 (ocr\\u001b[2J\\n\\u202eé) attempt 1 succeeded in 0.250s\n" in expected


def test_a_warning_between_lines_keeps_their_order(own: tuple[logsetup.LineHandler, Writes]) -> None:
    _, stream = own
    lines = bookkeeping._Lines()
    lines.line(logging.INFO, SUCCESS, 1, "ocr", 1, 0.25, "")
    lines.line(logging.INFO, SUCCESS, 2, "ocr", 1, 0.25, "")
    lines.line(logging.WARNING, "job %s (%s) attempt %d failed -> %s: %s", 3, "ocr", 1, "retry", "s3cret here")
    lines.line(logging.INFO, SUCCESS, 4, "ocr", 1, 0.25, "")
    lines.flush()
    assert [w.count("\n") for w in stream.writes] == [2, 1, 1]  # the warning is a record of its own
    text = "".join(stream.writes)
    assert [line.split(": ", 1)[1].split(" ")[1] for line in text.splitlines()] == ["1", "2", "3", "4"]
    assert "s3cret" not in text  # a WARNING line is scrubbed, as every record at that level


def handler_above(log: logging.Logger) -> None:
    log.parent = logging.Logger("pgwork.worker")
    log.parent.addHandler(Keep())  # the program's own, on a logger above


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(handler_above, id="another handler on the way up"),
        pytest.param(lambda log: log.addFilter(lambda r: True), id="a filter on the logger"),
        pytest.param(lambda log: log.handlers[0].addFilter(lambda r: True), id="a filter on the handler"),
        pytest.param(lambda log: log.handlers[0].setFormatter(logging.Formatter()), id="another formatter"),
        pytest.param(
            lambda log: log.handlers[0].setFormatter(logsetup.LineFormatter(logsetup.FORMAT, "%H:%M")), id="a datefmt"
        ),
    ],
)
def test_each_line_is_a_record_when_the_program_changed_logging(
    own: tuple[logsetup.LineHandler, Writes], change: Callable[[logging.Logger], object]
) -> None:
    _, stream = own
    change(bookkeeping.log)
    lines = bookkeeping._Lines()
    for n in (1, 2, 3):
        lines.line(logging.INFO, SUCCESS, n, "ocr", 1, 0.25, "")
    assert len(stream.writes) == 3  # written as they come, one emit each
    lines.flush()
    assert len(stream.writes) == 3


def test_each_line_is_a_record_under_a_record_factory_of_the_programs(
    own: tuple[logsetup.LineHandler, Writes],
) -> None:
    _, stream = own
    default = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        return default(*args, **kwargs)

    logging.setLogRecordFactory(factory)
    try:
        lines = bookkeeping._Lines()
        for n in (1, 2):
            lines.line(logging.INFO, SUCCESS, n, "ocr", 1, 0.25, "")
    finally:
        logging.setLogRecordFactory(default)
    assert len(stream.writes) == 2


def test_a_disabled_logger_or_level_writes_nothing(own: tuple[logsetup.LineHandler, Writes]) -> None:
    _, stream = own
    log = bookkeeping.log
    logging.disable(logging.INFO)
    try:
        lines = bookkeeping._Lines()
        lines.line(logging.INFO, SUCCESS, 1, "ocr", 1, 0.25, "")
        lines.flush()
    finally:
        logging.disable(logging.NOTSET)
    log.disabled = True
    try:
        lines = bookkeeping._Lines()
        lines.line(logging.INFO, SUCCESS, 1, "ocr", 1, 0.25, "")
        lines.flush()
    finally:
        log.disabled = False
    assert stream.writes == []


def test_lines_of_two_levels_are_written_in_their_order(own: tuple[logsetup.LineHandler, Writes]) -> None:
    _, stream = own
    bookkeeping.log.setLevel(logging.DEBUG)
    lines = bookkeeping._Lines()
    for level, n in ((logging.INFO, 1), (logging.INFO, 2), (logging.DEBUG, 3), (logging.INFO, 4)):
        lines.line(level, SUCCESS, n, "ocr", 1, 0.25, "")
    lines.flush()
    assert [w.count("\n") for w in stream.writes] == [2, 1, 1]
    assert [line.split(" ")[2] for line in "".join(stream.writes).splitlines()] == ["INFO", "INFO", "DEBUG", "INFO"]


def test_format_codes_in_a_job_type_are_text(own: tuple[logsetup.LineHandler, Writes]) -> None:
    _, stream = own
    lines = bookkeeping._Lines()
    lines.line(logging.INFO, SUCCESS, 1, "ocr %s %(x)s %d", 1, 0.25, "")
    lines.flush()
    assert stream.writes[0].endswith(": job 1 (ocr %s %(x)s %d) attempt 1 succeeded in 0.250s\n")


class Broken(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError("the reader went away")


def test_a_stream_that_fails_is_reported_as_emit_would_and_the_batch_goes_on(
    own: tuple[logsetup.LineHandler, Writes], monkeypatch: pytest.MonkeyPatch
) -> None:
    handler, _ = own
    handler.setStream(Broken())
    reported: list[logging.LogRecord] = []
    monkeypatch.setattr(handler, "handleError", reported.append)
    lines = bookkeeping._Lines()
    for n in (1, 2):
        lines.line(logging.INFO, SUCCESS, n, "ocr", 1, 0.25, "")
    lines.flush()  # no exception reaches the bookkeeper
    assert len(reported) == 1 and reported[0].getMessage().startswith("job 1 (ocr)")
