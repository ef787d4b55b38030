from __future__ import annotations

from typing import Any

import pytest

from pgwork.operator.deletion_cost import annotations_to_set, busy_pods, cost
from pgwork.operator.render import DELETION_COST


def pod(name: str, cost_now: str | None = None, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if cost_now is not None:
        meta["annotations"] = {DELETION_COST: cost_now}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


@pytest.mark.parametrize(("jobs", "expected"), [(0, 0), (1, 100), (3, 300), (-1, 0), (10**9, 2_000_000_000)])
def test_cost(jobs: int, expected: int) -> None:
    assert cost(jobs) == expected


@pytest.mark.parametrize(
    ("pods", "held", "expected"),
    [
        ([pod("a"), pod("b")], {"b": 2}, {"a": "0", "b": "200"}),
        ([pod("a", "0"), pod("b", "200")], {"b": 2}, {}),  # already right: no patch
        ([pod("a", "100"), pod("b")], {}, {"a": "0", "b": "0"}),  # finished its job: cheap again
        ([pod("a", deleting=True), pod("b")], {"a": 1}, {"b": "0"}),  # going anyway
        ([pod("a")], {"gone-pod": 3}, {"a": "0"}),  # owners without a pod are ignored
    ],
)
def test_annotations_to_set(pods: list[dict[str, Any]], held: dict[str, int], expected: dict[str, str]) -> None:
    assert annotations_to_set(pods, held) == expected


def test_busy_pods() -> None:
    assert busy_pods([pod("a"), pod("b"), pod("c")], {"a": 1, "c": 4, "x": 1}) == 2
