"""Tools outside the core: the lab (`pgwork bench`), the fault-injection run (`pgwork chaos`) and
the demo (`pgwork demo`), plus the one helper they share for running `pgwork worker` processes.

Nothing in the queue, the worker or the operator imports this package (an import-linter contract
in pyproject.toml holds it to that); the CLI imports a tool only when its subcommand runs.
"""
