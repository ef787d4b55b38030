"""Reading EXPLAIN (FORMAT JSON) plans: the same on every PostgreSQL version, unlike the text form."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


def plan_nodes(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every node of a plan tree, the root first (preorder), init plans and subplans included."""
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)
