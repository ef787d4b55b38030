"""pgwork.tools.lab.proccpu reads CPU time from /proc: a process's own, and a server's with its children's."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from pgwork.tools.lab.proccpu import TICK, proc_cpu, server_cpu


def test_own_cpu_grows_with_work() -> None:
    before = proc_cpu(os.getpid())
    deadline = time.monotonic() + 10
    while proc_cpu(os.getpid()) < before + 2 / TICK:  # two clock ticks of work, bounded
        assert time.monotonic() < deadline, "no CPU counted for 10 s of busy work"
        sum(range(10_000))
    assert proc_cpu(os.getpid()) > before


def test_a_parent_counts_its_live_children() -> None:
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ninput()"
    child = subprocess.Popen([sys.executable, "-c", busy], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while proc_cpu(child.pid) < 0.2:
            assert time.monotonic() < deadline, "the child's busy loop was not counted"
            time.sleep(0.05)
        # This process is the child's parent: its total holds the child's CPU beside its own.
        assert server_cpu(os.getpid()) >= proc_cpu(os.getpid()) + proc_cpu(child.pid) - 2 / TICK
    finally:
        child.communicate(b"\n", timeout=10)
