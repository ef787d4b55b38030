"""The command line's log level: `-v` for DEBUG, else PGWORK_LOG_LEVEL, else INFO. Pure but for
`configure`, which applies it once per process."""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Mapping, Sequence
from traceback import TracebackException
from typing import Any, TextIO

from pgwork.credentials import scrub
from pgwork.errors import InvalidArgument
from pgwork.tables import inert

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_level(verbose: bool, environ: Mapping[str, str]) -> int:
    """The level to log at. A worker logs one INFO line per finished job; PGWORK_LOG_LEVEL=WARNING
    keeps only problems (a Deployment sets it with spec.worker.env)."""
    if verbose:
        return logging.DEBUG
    given = environ.get("PGWORK_LOG_LEVEL", "").strip()
    if not given:
        return logging.INFO
    if given.upper() not in LEVELS:
        raise InvalidArgument("PGWORK_LOG_LEVEL", f"{given!r} is not a log level", f"use one of {', '.join(LEVELS)}")
    return int(getattr(logging, given.upper()))


class LineFormatter(logging.Formatter):
    """FORMAT, with the date and time of day formatted once per second rather than once per
    line (a worker writes a line per job; strftime was a good part of each line's cost).

    Every line is made inert (pgwork.tables.inert): a log line may quote job data (a handler's
    error quoting a producer's payload, a job type, an owner), and ESC, BEL or CR in it would let
    whoever wrote that data erase or rewrite lines on the terminal reading the log, or forge a line.
    The message is escaped whole (a newline in it is `\\n`); a traceback keeps its line breaks."""

    _second: tuple[int, str] = (-1, "")

    def formatMessage(self, record: logging.LogRecord) -> str:
        return inert(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:
        """The traceback with its own line breaks, each exception's message escaped whole: a
        message is job data as often as not, and a newline in it must not start a line."""
        te = traceback.TracebackException(ei[0], ei[1], ei[2])
        messages: set[str] = set()
        seen: TracebackException | None = te
        while seen is not None and len(messages) < 100:
            messages.update(seen.format_exception_only())
            seen = seen.__cause__ or seen.__context__
        chunks = [
            inert(chunk.removesuffix("\n")) + "\n" if chunk in messages else inert(chunk, keep_newlines=True)
            for chunk in te.format()
        ]
        return "".join(chunks).removesuffix("\n")

    def formatStack(self, stack_info: str) -> str:
        return inert(super().formatStack(stack_info), keep_newlines=True)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return self.stamp(record.created, record.msecs)

    def stamp(self, created: float, msecs: float) -> str:
        """`asctime` for an instant, as formatTime writes it with no datefmt."""
        second = int(created)
        cached = self._second  # one tuple: another thread's update is never seen half done
        if cached[0] != second:
            cached = (second, time.strftime(self.default_time_format, self.converter(created)))
            self._second = cached
        return f"{cached[1]},{int(msecs):03d}"  # logging's default_msec_format, '%s,%03d'


class ScrubbingFormatter(LineFormatter):
    """LineFormatter whose WARNING-and-above lines (where libpq's text and exceptions appear: a
    pool that cannot connect, a listener reconnecting, a traceback) pass `scrub` with the
    process's connection string. INFO lines (one per job) are pgwork's own words and skip it."""

    def __init__(self, fmt: str, secret: str | None) -> None:
        super().__init__(fmt)
        self._secret = secret

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return scrub(text, self._secret) if record.levelno >= logging.WARNING else text


class LineHandler(logging.StreamHandler[TextIO]):
    """The command line's handler (configure): a StreamHandler that can also write a batch of one
    logger's lines below WARNING in one write (`write_lines`, for the worker's per-job lines),
    each exactly as `emit` would have written it."""

    def write_lines(self, name: str, level: int, messages: Sequence[str]) -> None:
        """Write `messages` (each already `msg % args`) as lines of logger `name` at `level`, all
        stamped now. Only for what `batch_handler` allowed."""
        formatter = self.formatter
        assert isinstance(formatter, LineFormatter)
        now = time.time_ns()
        created, msecs = now / 1e9, (now % 1_000_000_000) // 1_000_000
        # inert() maps character by character: the prefix (a stamp, a level, a logger name: all
        # printable ASCII but for an odd level name, escaped here as formatMessage would) and each
        # message can be escaped apart.
        prefix = inert(f"{formatter.stamp(created, msecs)} {logging.getLevelName(level)} {name}: ")
        text = "".join([prefix + inert(m) + self.terminator for m in messages])
        self.acquire()
        try:
            self.stream.write(text)
            self.flush()
        except RecursionError:  # as StreamHandler.emit
            raise
        except Exception:
            self.handleError(logging.LogRecord(name, level, __file__, 0, "%s", (messages[0],), None))
        finally:
            self.release()


def batch_handler(logger: logging.Logger, level: int) -> LineHandler | None:
    """The one handler a record of `logger` at `level` (enabled) would reach, when writing lines
    through its `write_lines` gives exactly the text, and only the effects, that logging each as
    its own record would: no filter on the logger, no record factory of the program's own, and
    of every handler on the way up that takes `level`, exactly one, the command line's own
    (configure), unfiltered, formatting FORMAT. Else None: log each record (an embedding
    program's handlers and filters see every one)."""
    if level >= logging.WARNING or logger.disabled or logger.filters:
        return None  # WARNING and above may be scrubbed (ScrubbingFormatter)
    if logging.getLogRecordFactory() is not logging.LogRecord:
        return None
    found: list[logging.Handler] = []
    current: logging.Logger | None = logger
    while current is not None:
        found.extend(h for h in current.handlers if level >= h.level)
        current = current.parent if current.propagate else None
    if len(found) != 1:
        return None  # none: logging.lastResort's own format; several: each its own record
    handler = found[0]
    formatter = handler.formatter
    if (
        type(handler) is not LineHandler
        or handler.filters
        or type(formatter) not in (LineFormatter, ScrubbingFormatter)
        or formatter is None
        or formatter._fmt != FORMAT
        or formatter.datefmt is not None
    ):
        return None
    return handler


def configure(verbose: bool, environ: Mapping[str, str], secret: str | None = None) -> None:
    handler = LineHandler()
    handler.setFormatter(ScrubbingFormatter(FORMAT, secret))
    logging.basicConfig(level=log_level(verbose, environ), handlers=[handler])
