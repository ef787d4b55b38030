"""The JobQueue's typed worker flags (`spec.worker.batch`, `batchWait`, `isolation`, `maxJobsPerChild`,
`maxMemoryPerChild`, `poll`, `listen`): parsed with the CRD's rules and rendered beside the
generated worker arguments (`--id $(POD_NAME)`, `--grace`, `--lease`, `--job-types` stay), so a
user never copies those by hand into `worker.args` to reach one flag.

Each flag is rendered only when its field is set: the worker's own default holds otherwise, and a
JobQueue that sets none keeps the pod template it had (no rollout of every worker on an upgrade).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pgwork.durations import parse_duration
from pgwork.operator.fields import Reader, SpecError, shown

# The bounds `pgwork worker` accepts (pgwork/worker/options.py, which the operator may not import);
# tests check the CRD, this module and the worker say the same.
MAX_BATCH = 10_000
POLL_RANGE = (0.01, 300.0)
BATCH_WAIT_MAX = 300.0
MAX_JOBS_PER_CHILD = 1_000_000
# A duration always with a unit (`20ms`, `1.5s`, `1m30s`): a bare number reads as seconds to the
# worker and as milliseconds to many people writing a batch wait.
DURATION_PATTERN = r"([0-9]+(\.[0-9]+)?(ms|s|m|h))+"
# A memory size as Kubernetes writes one (`512Mi`, `4Gi`, `2G`): the same units as `resources`.
SIZE_PATTERN = r"[1-9][0-9]*(Ki|Mi|Gi|Ti|k|M|G|T)?"
SIZE_MAX = 20
ISOLATION = ("thread", "process")
FIELDS = ("batch", "batchWait", "isolation", "maxJobsPerChild", "maxMemoryPerChild", "poll", "listen")


@dataclass(frozen=True)
class WorkerFlags:
    batch: int | None = None
    batch_wait: str | None = None
    isolation: str | None = None
    max_jobs_per_child: int | None = None
    max_memory_per_child: str | None = None
    poll: str | None = None
    listen: bool | None = None

    def args(self) -> list[str]:
        """The flags for the set fields, in a fixed order."""
        out: list[str] = []
        if self.batch is not None:
            out += ["--batch", str(self.batch)]
        if self.batch_wait is not None:
            out += ["--batch-wait", self.batch_wait]
        if self.isolation is not None:
            out += ["--isolation", self.isolation]
        if self.max_jobs_per_child is not None:
            out += ["--max-jobs-per-child", str(self.max_jobs_per_child)]
        if self.max_memory_per_child is not None:
            out += ["--max-memory-per-child", self.max_memory_per_child]
        if self.poll is not None:
            out += ["--poll", self.poll]
        if self.listen is False:
            out.append("--no-listen")
        return out

    @property
    def claim_size(self) -> int:
        return 1 if self.batch is None else self.batch


def _duration(w: Reader, name: str, low: float, high: float, fix: str) -> str | None:
    text = w.get(name)
    if text is None:
        return None
    if not isinstance(text, str) or not re.fullmatch(DURATION_PATTERN, text):
        raise SpecError(w.field(name), f"{shown(text)} is not a duration with a unit", fix)
    seconds = parse_duration(text, w.field(name))
    if not low <= seconds <= high:
        raise SpecError(w.field(name), f"{text} is out of range {low:g}s..{high:g}s", fix)
    return text


def parse_flags(w: Reader, *, has_args: bool) -> WorkerFlags:
    """The typed flags of spec.worker; refused beside `worker.args`, which replaces every rendered flag."""
    if has_args:
        for name in FIELDS:
            if w.raw.get(name) is not None:
                # args replaces every rendered argument: the field would be dropped without a word.
                raise SpecError(
                    w.field(name),
                    "has no effect when worker.args is given (args replaces every rendered worker flag)",
                    "remove worker.args (the operator renders --id, --grace, --lease and --job-types beside this "
                    "field), or put the flag in worker.args",
                )
        return WorkerFlags()
    present = {name for name in FIELDS if w.raw.get(name) is not None}
    isolation = None
    if "isolation" in present:
        isolation = w.one_of(
            "isolation", ISOLATION, "thread (handlers on the worker's threads) or process (a pool of child processes)"
        )
    memory = None
    if "maxMemoryPerChild" in present:
        memory = w.matching(
            "maxMemoryPerChild",
            SIZE_PATTERN,
            SIZE_MAX,
            "a size with a Kubernetes unit, e.g. 4Gi or 512Mi: a child above it is replaced between jobs",
        )
    listen = None
    if "listen" in present:
        listen = w.boolean("listen")
    return WorkerFlags(
        batch=w.integer("batch", 1, MAX_BATCH, "jobs claimed per statement and handed to a batch handler, e.g. 32")
        if "batch" in present
        else None,
        batch_wait=_duration(
            w,
            "batchWait",
            0,
            BATCH_WAIT_MAX,
            "the longest a claimed job waits for its batch to fill, with a unit: e.g. 20ms (at most 5m)",
        ),
        isolation=isolation,
        max_jobs_per_child=w.integer(
            "maxJobsPerChild", 1, MAX_JOBS_PER_CHILD, "jobs a handler process runs before it is replaced, e.g. 500"
        )
        if "maxJobsPerChild" in present
        else None,
        max_memory_per_child=memory,
        poll=_duration(
            w,
            "poll",
            *POLL_RANGE,
            "how often the worker polls when no notification comes, with a unit: 10ms..5m, e.g. 1s",
        ),
        listen=listen,
    )
