"""The command line's log level: `-v` for DEBUG, else PGWORK_LOG_LEVEL, else INFO. Pure but for
`configure`, which applies it once per process."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from pgwork.credentials import scrub
from pgwork.errors import InvalidArgument

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
    line (a worker writes a line per job; strftime was a good part of each line's cost)."""

    _second: tuple[int, str] = (-1, "")

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
