"""docs/benchmarks.md sections 15 and 16: inference fed by pgwork beside the bare loop, and CPU-bound
jobs through workers beside bare processes (issue 29). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from pgwork.tools.lab import cpubound, gpu
from pgwork.tools.lab.pivot import section, select
from pgwork.tools.lab.results import Row


def render(rows: Sequence[Row]) -> list[str]:
    parts = section(
        "## 15. Inference: the bare loop, one job per call, a batch handler",
        select(rows, gpu.NAME),
        "`pgwork bench --only gpu` (run only when named; `scripts/device/` runs it on a GPU host). The same model "
        "fed three ways in one run: the bare loop by batch size (sequences/s, no queue), `pgwork worker --burst` "
        "with one job per handler call (threads, and `--isolation process`), and a batch handler "
        f"(batch {gpu.BATCH}, `batch_wait` 20ms, both isolations) once this pgwork has them. `torch` is a "
        "12-layer encoder of BERT-base shape (bf16, 256 tokens, random weights) on CUDA, skipped with its reason "
        "elsewhere; `sim` costs a + b*n seconds per batch of n (a sleep: a device call releases the GIL). "
        f"The `side by side` rows: the bare loop at batch {gpu.BATCH} and the batch handler through one "
        "`pgwork worker --concurrency 1` on the same number of sequences, interleaved round by round, median, "
        "min and max of each rate and of the per-round ratio (with PGWORK_LAB_BASELINE=DIR, another checkout's "
        "worker in the same rounds). "
        f"Target (issue 29): the batch handler >= {gpu.TARGET_GPU}x the bare loop at batch {gpu.BATCH}.",
        ("series", "x"),
    )
    parts += section(
        "## 16. CPU-bound jobs: workers beside bare processes",
        select(rows, cpubound.NAME),
        "`pgwork bench --only cpu-bound` (run only when named). numpy jobs (products and tanh of 300x300 "
        "matrices, one BLAS thread) through W bare processes at once, on their main thread and on a second "
        "thread, and W `pgwork worker --concurrency 1` processes, in threads and in child processes, in the same "
        "run. Beside each rate: the handler's own wall and CPU ms and page faults per job (from its results), "
        "the time per job not spent in the handler (`between jobs`), and the processes' CPU per job outside the "
        "handler (their CPU less a no-job run's startup, less the handlers'). Where numpy's arrays come from "
        "differs between a main thread and other threads (glibc trims the main arena after each job): the page "
        f"faults show it. Target (issue 29): >= {cpubound.TARGET}x a bare process for 0.5 s jobs.",
        ("series", "x"),
    )
    return parts
