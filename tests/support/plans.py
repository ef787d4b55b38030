"""Reading EXPLAIN (FORMAT JSON) plans: the same on every PostgreSQL version, unlike the text form."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import psycopg
import pytest


def plan_nodes(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every node of a plan tree, the root first (preorder), init plans and subplans included."""
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def auto_explain_plans(conn: psycopg.Connection[Any]) -> list[str]:
    """auto_explain's plans of every statement run on `conn` from now on, the functions' own
    statements included, collected as notices (superuser only; the test skips where the module
    cannot be loaded)."""
    try:
        conn.execute("LOAD 'auto_explain'")
    except psycopg.Error as exc:
        pytest.skip(f"auto_explain cannot be loaded here ({exc.diag.message_primary}); the plan test needs it")
    for setting in (
        "auto_explain.log_min_duration = 0",
        "auto_explain.log_nested_statements = on",
        "auto_explain.log_analyze = on",
        "auto_explain.log_level = notice",
        "client_min_messages = notice",
    ):
        conn.execute(f"SET {setting}")
    plans: list[str] = []
    conn.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
    return plans
