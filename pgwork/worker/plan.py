"""What a worker runs, decided once before it starts: its job types, each type's handler
registration as this worker runs it, which types run in child processes, and how many jobs one
runner slot takes. Pure: a Registry and WorkerOptions in, a HandlerPlan out."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pgwork.errors import InvalidArgument
from pgwork.worker.options import WorkerOptions
from pgwork.worker.registry import HandlerSpec, Registry

# The finisher's write carries the next claim only for claims this small. At batch 1 the round
# trip saved is most of a job's cost (0.57x -> 0.65x the bare loop); at batch 100 the main loop
# waiting for the finisher's write, instead of claiming beside it, measured 0.62x the API loop
# against 0.72x without (ranges overlapping, on a loaded machine): larger batches are claimed by
# the main loop, one whole batch ahead of the jobs in hand (whole_batch_ahead).
PIPELINE_MAX_BATCH = 10


@dataclass(frozen=True)
class HandlerPlan:
    job_types: list[str]
    # Per job type: the registration as this worker runs it (--batch-wait over a batch handler's
    # own) and whether it runs on the event loop.
    handlers: dict[str, tuple[HandlerSpec, bool]]
    in_process: frozenset[str]
    # A slot runs one job, or one batch handler's call of up to its batch: the worker holds up to
    # --concurrency of the largest, and claims at least one such batch at a time.
    per_slot: int
    # Jobs claimed beyond what the slots run at once (claim_ahead).
    ahead: int = 0
    # One-job slots at a large --batch: up to one whole --batch more held, claimed while the jobs
    # in hand run (whole_batch_ahead).
    whole_ahead: int = 0


def plan_handlers(registry: Registry, options: WorkerOptions) -> HandlerPlan:
    """The types --job-types names (default: every registered one), refused when one has no
    handler or there are none."""
    types = list(options.job_types) if options.job_types is not None else registry.job_types()
    missing = [t for t in types if registry.get(t) is None]
    if missing:
        raise InvalidArgument(
            "--job-types",
            f"no handler registered for {', '.join(missing)} in {options.app}",
            f"register them with @pgwork.handler, or pick among {registry.job_types()}",
        )
    if not types:
        raise InvalidArgument(
            "--app", f"{options.app} registers no handlers", "decorate functions with @pgwork.handler('TYPE')"
        )
    in_process = frozenset(t for t in types if registry.in_process(t, options.isolation))
    handlers: dict[str, tuple[HandlerSpec, bool]] = {}
    for t in types:
        spec = registry.spec(t)
        assert spec is not None  # checked above
        if spec.batch is not None and options.batch_wait is not None:
            spec = dataclasses.replace(spec, batch_wait=options.batch_wait)
        # A job in a child process waits on a runner thread, whatever its handler's kind.
        handlers[t] = (spec, spec.is_async and t not in in_process)
    per_slot = max(spec.batch or 1 for spec, _ in handlers.values())
    return HandlerPlan(
        types, handlers, in_process, per_slot, claim_ahead(per_slot), whole_batch_ahead(per_slot, options.batch)
    )


def claim_ahead(per_slot: int) -> int:
    """Jobs a worker claims beyond what its slots run at once: one batch when a slot takes a
    batch, so the next call starts as the last one returns. Otherwise a batch handler's slot
    waits, between calls, for the write of its outcomes and the claim of its next jobs (measured
    at batch 64: 8 ms of database work beside 10 ms of model, 0.5x the bare loop). Nothing for
    one-job slots: their claim already rides on the write (pgwork.worker.finishes)."""
    return per_slot if per_slot > 1 else 0


def whole_batch_ahead(per_slot: int, batch: int) -> int:
    """Jobs a worker of one-job slots may hold beyond its capacity: one whole --batch when its
    claims are too large to ride on the finisher's write (PIPELINE_MAX_BATCH). The main loop then
    claims the next batch while the current one runs instead of after it (issue 28: back to back
    claims, the runners never waiting on one); claim_size takes it whole or not at all, and only
    after a claim that came back full, so a worker at a backlog's tail holds nothing ahead of it."""
    return batch if per_slot == 1 and batch > PIPELINE_MAX_BATCH else 0
