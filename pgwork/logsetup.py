"""The command line's log level: `-v` for DEBUG, else PGWORK_LOG_LEVEL, else INFO. Pure but for
`configure`, which applies it once per process."""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Mapping
from traceback import TracebackException
from typing import Any

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
        second = int(record.created)
        cached = self._second  # one tuple: another thread's update is never seen half done
        if cached[0] != second:
            cached = (second, time.strftime(self.default_time_format, self.converter(record.created)))
            self._second = cached
        return f"{cached[1]},{int(record.msecs):03d}"  # logging's default_msec_format, '%s,%03d'


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


def configure(verbose: bool, environ: Mapping[str, str], secret: str | None = None) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(ScrubbingFormatter(FORMAT, secret))
    logging.basicConfig(level=log_level(verbose, environ), handlers=[handler])
