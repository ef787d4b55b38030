"""Reading EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) plans for the lab's experiments. Pure."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


def nodes(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every node of a plan tree, the root first."""
    yield node
    for child in node.get("Plans", []):
        yield from nodes(child)


def buffers(node: Mapping[str, Any]) -> int:
    return int(node.get("Shared Hit Blocks", 0)) + int(node.get("Shared Read Blocks", 0))


def ran(node: Mapping[str, Any]) -> bool:
    """Whether the node executed (a one-time filter or an empty outer side leaves some unrun)."""
    return int(node.get("Actual Loops", 0)) > 0


def scans_run(plan: Mapping[str, Any]) -> str:
    """The scans that executed, as `Index Scan using X` (in plan order, each once)."""
    found: list[str] = []
    for n in nodes(plan):
        if "Scan" not in str(n.get("Node Type", "")) or not ran(n) or "Relation Name" not in n:
            continue
        label = str(n["Node Type"])
        if "Index Name" in n:
            label += f" using {n['Index Name']}"
        elif "Relation Name" in n:
            label += f" on {n['Relation Name']}"
        if label not in found:
            found.append(label)
    return ", ".join(found)


def locking_buffers(plan: Mapping[str, Any]) -> int:
    """Buffers spent finding and locking rows: the outermost LockRows subtrees that ran."""
    total = 0
    for child in plan.get("Plans", []):
        if child.get("Node Type") == "LockRows":
            total += buffers(child) if ran(child) else 0
        else:
            total += locking_buffers(child)
    return total


def locking_filtered(plan: Mapping[str, Any]) -> int:
    """Rows the locking scans read and threw away by a filter (another type's, a later one's)."""
    total = 0
    for child in plan.get("Plans", []):
        if child.get("Node Type") == "LockRows":
            total += sum(int(n.get("Rows Removed by Filter", 0)) for n in nodes(child))
        else:
            total += locking_filtered(child)
    return total
