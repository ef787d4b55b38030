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


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def derive_key(job_type: str, payload: Any) -> str:
    digest = hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()
    return f"{job_type}:sha256:{digest}"
