"""Handlers the bad-input catalogue runs in real `pgwork worker` processes."""

from __future__ import annotations

from typing import Any

import pgwork
from pgwork import Job


class UnprintableError(Exception):
    """An exception whose own __str__ raises: a handler bug inside a handler bug."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ exploded")


@pgwork.handler("echo")
def echo(job: Job) -> dict[str, Any]:
    return {"payload": job.payload}


@pgwork.handler("unprintable")
def unprintable(job: Job) -> None:
    raise UnprintableError()


@pgwork.handler("not_json")
def not_json(job: Job) -> dict[str, Any]:
    return {"when": object()}


@pgwork.handler("nan")
def nan(job: Job) -> float:
    return float("nan")


@pgwork.handler("interrupt")
def interrupt(job: Job) -> None:
    raise KeyboardInterrupt
