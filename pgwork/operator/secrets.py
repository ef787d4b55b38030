"""The connection strings the operator reads itself: a key of a Secret in the JobQueue's own
namespace, checked for its shape before anything connects; no value is ever repeated."""

from __future__ import annotations

from pgwork.credentials import EXPECTED, dsn_problem
from pgwork.operator.db import DatabaseProblem
from pgwork.operator.kube import Kube, UnsafeName
from pgwork.operator.spec import SecretRef


def secret_source(namespace: str, ref: SecretRef) -> str:
    return f"Secret {namespace}/{ref.name} key {ref.key!r} ({ref.field})"


def read_dsn(kube: Kube, namespace: str, ref: SecretRef) -> str:
    """The connection string in `ref`, read from the JobQueue's own namespace and checked for its
    shape before anything connects. Raises DatabaseProblem with a message that says which Secret
    and key are wrong and what was expected, and repeats nothing of the value."""
    where = secret_source(namespace, ref)
    try:
        raw = kube.read_secret_bytes(namespace, ref.name, ref.key)
    except UnsafeName as exc:  # parse_spec refuses such names; this is the second wall
        raise DatabaseProblem("InvalidSpec", f"{where}: {exc}") from None
    if raw is None:
        raise DatabaseProblem(
            "SecretMissing",
            f"{where} not found; create it: kubectl -n {namespace} create secret generic "
            f"{ref.name} --from-literal={ref.key}=postgresql://...",
        )
    try:
        value = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DatabaseProblem("InvalidDSN", f"{where} is not UTF-8 text; {EXPECTED}") from None
    problem = dsn_problem(value)
    if problem is not None:
        raise DatabaseProblem("InvalidDSN", f"{where} {problem}; {EXPECTED}")
    return value
