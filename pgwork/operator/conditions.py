"""Status conditions (Ready, DatabaseReachable, Scaling) as Kubernetes expects them. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

Condition = dict[str, Any]


def timestamp(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: Sequence[Mapping[str, Any]] | None,
    type_: str,
    status: bool,
    reason: str,
    message: str,
    *,
    generation: int | None,
    now: float,
) -> list[Condition]:
    """The list with `type_` set; lastTransitionTime moves only when the status flips."""
    text = "True" if status else "False"
    result: list[Condition] = []
    found = False
    for old in conditions or []:
        if old.get("type") != type_:
            result.append(dict(old))
            continue
        found = True
        kept = old.get("lastTransitionTime") if old.get("status") == text else None
        since = kept or timestamp(now)
        result.append(_condition(type_, text, reason=reason, message=message, generation=generation, since=since))
    if not found:
        result.append(
            _condition(type_, text, reason=reason, message=message, generation=generation, since=timestamp(now))
        )
    return result


def _condition(type_: str, status: str, *, reason: str, message: str, generation: int | None, since: str) -> Condition:
    condition: Condition = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


def get_condition(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    for condition in conditions or []:
        if condition.get("type") == type_:
            return condition
    return None
