"""The lab: `pgwork bench` reproduces the reference write-up's measurements on this machine.

Each experiment is a module (`claims`, `held`, `history`, `crash`, `drain`, `wake`, `waits`) that returns
measurements; `results` appends them to results/benchmark.csv, `report` regenerates
docs/benchmarks.md from that CSV alone, `plots` draws the figures.
"""

from pgwork.sql_files import Statements

# The lab's own statements: the claim strategies it compares pgwork's claim against, and its bookkeeping.
SQL = Statements(__name__, "sql/strategies.sql", "sql/lab.sql")
query = SQL.query

# Here, not in crash_app.py / noop_app.py: importing those registers their handlers, and only the
# lab's own `pgwork worker --app pgwork.tools.lab.crash_app|noop_app` processes should do that.
CRASH_JOB_TYPE = "lab-crash"
NOOP_JOB_TYPE = "lab-noop"
