"""`pgwork ui`: the operator's console, a small server-rendered web application (the `ui` extra).

Its own layer beside the tools: it reads and acts through the core (pgwork.db and the functions
of migration 17), never through the worker or the operator.
"""
