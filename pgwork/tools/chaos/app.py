"""The handler module chaos workers run (`pgwork worker --app pgwork.tools.chaos.app`).

Everything it does is decided by the job's payload, so a run is reproducible from its seed, and
it records nothing outside the database: the result row is the only effect.
  ms         how long the work takes (long ones outlive a lease and need heartbeats)
  flaky      fail (retryable) while attempt <= flaky
  permanent  fail with PermanentError: the job goes dead at once
"""

from __future__ import annotations

from typing import Any

import pgwork
from pgwork import Job, PermanentError
from pgwork.tools.chaos.workload import JOB_TYPE


@pgwork.handler(JOB_TYPE)
def work(job: Job) -> dict[str, Any]:
    payload = job.payload
    if payload.get("permanent"):
        raise PermanentError(f"job {payload.get('n')} is marked permanent-failure")
    if job.attempt <= int(payload.get("flaky", 0)):
        raise ConnectionError(f"upstream refused attempt {job.attempt} of job {payload.get('n')}")
    job.sleep(float(payload.get("ms", 0)) / 1000.0)
    return {"n": payload.get("n"), "attempt": job.attempt}
