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


@pgwork.handler("deep_result")
def deep_result(job: Job) -> Any:
    value: Any = "leaf"
    for _ in range(int(job.payload.get("depth", 5000))):
        value = [value]
    return value


@pgwork.handler("huge_result")
def huge_result(job: Job) -> Any:
    return {"text": "x" * (17 * 1024 * 1024)}


@pgwork.handler("infinite_result")
def infinite_result(job: Job) -> Any:
    return {"score": float("inf")}


@pgwork.handler("nul_result")
def nul_result(job: Job) -> Any:
    return {"text": "a\x00b"}


@pgwork.handler("escaped_nul_result")
def escaped_nul_result(job: Job) -> Any:
    # The six characters backslash-u-0-0-0-0: ordinary text, stored as given.
    return {"text": "a\\u0000b"}


@pgwork.handler("leaky")
def leaky(job: Job) -> None:
    raise ConnectionError(
        "could not reach postgresql://billing:s3cr3t-pw@db.internal/billing "
        "(also tried host=db2 password=hunter2 dbname=billing)"
    )


@pgwork.handler("nul_error")
def nul_error(job: Job) -> None:
    raise RuntimeError("bad byte \x00 here and a lone \udcff there")
