"""The idempotency key rule.

A key must come from the work, not from the worker, so that two executions of the same work
produce the same key and the effect is written once. When the producer gives no key, pgwork
derives one: the job type and a SHA-256 of the payload serialised canonically (sorted keys, no
whitespace, UTF-8). Equal payloads give equal keys whatever the key order of the JSON object.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# One encoder for every call: json.dumps with options builds a new one each time, a third of
# the cost of serialising a small payload.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    return _CANONICAL.encode(value)


def derive_key(job_type: str, payload: Any) -> str:
    return key_of_canonical(job_type, canonical_json(payload))


def key_of_canonical(job_type: str, payload_json: str) -> str:
    """derive_key for a payload already serialised by canonical_json (a bulk enqueue serialises
    each payload once, not twice)."""
    digest = hashlib.sha256(payload_json.encode("utf-8")).hexdigest()
    return f"{job_type}:sha256:{digest}"
