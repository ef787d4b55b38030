"""CPU time of processes read from /proc (Linux): the lab's scripts that split a job's cost between
client and server (scripts/cpu_per_job.py, scripts/server_cost.py) read the server's side here."""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()  # fields from the third (state) on


def proc_cpu(pid: int) -> float:
    """Seconds of CPU a live process has used so far (its own, not its children's)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / TICK


def server_cpu(postmaster: int) -> float:
    """Seconds of CPU used so far by a server: the postmaster, its reaped and its live children."""
    own = _stat(postmaster)
    total = sum(int(v) for v in own[11:15])  # utime stime cutime cstime
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                fields = _stat(int(entry.name))
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[1]) == postmaster:
                total += int(fields[11]) + int(fields[12])
    return total / TICK
