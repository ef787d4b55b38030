"""`pgwork chaos`: the fault-injection run and its invariants (see docs/reliability.md)."""

from pgwork.sql_files import Statements

# The claim log the harness installs in its own database, and the one statement that reads the invariants.
SQL = Statements(__name__, "claimlog.sql", "invariants.sql")
