"""The command line's log level: `-v` for DEBUG, else PGWORK_LOG_LEVEL, else INFO. Pure but for
`configure`, which applies it once per process."""

from __future__ import annotations

import logging
from collections.abc import Mapping

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


def configure(verbose: bool, environ: Mapping[str, str]) -> None:
    logging.basicConfig(level=log_level(verbose, environ), format=FORMAT)
