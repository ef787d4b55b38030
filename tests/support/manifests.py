"""Reading rendered manifests in tests."""

from __future__ import annotations

from typing import Any


def env_entries(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Every env entry of every container and init container in a rendered manifest."""
    entries: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "containers" in node:
                for c in node["containers"] + node.get("initContainers", []):
                    entries.extend(c.get("env", []))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(manifest)
    return entries
