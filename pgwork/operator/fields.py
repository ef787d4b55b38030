"""Reading a JobQueue spec section by section: the error every refusal raises, and a reader that
fills defaults and names the field (`spec.scaling.minReplicas`) with the fix in every message."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pgwork.errors import InvalidArgument


class SpecError(InvalidArgument):
    """A JobQueue spec the operator refuses; `field` is the path, e.g. spec.lease.heartbeatSeconds."""


def shown(value: Any) -> str:
    """A bad value as quoted in a message: repr (so a newline shows as \\n), cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class Reader:
    """Reads one section of the spec, filling defaults and naming fields in errors."""

    def __init__(self, raw: Any, path: str, defaults: Mapping[str, Any]) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise SpecError(path, f"must be an object, got {type(raw).__name__}", "see the JobQueue reference")
        self.raw = raw
        self.path = path
        self.defaults = defaults

    def field(self, name: str) -> str:
        return f"{self.path}.{name}"

    def get(self, name: str) -> Any:
        value = self.raw.get(name)
        return self.defaults.get(name) if value is None else value

    def string(self, name: str, *, required: bool = False, fix: str = "") -> str | None:
        value = self.get(name)
        if value is None:
            if required:
                raise SpecError(self.field(name), "is required", fix or "set it")
            return None
        if not isinstance(value, str) or not value.strip():
            raise SpecError(self.field(name), f"must be a non-empty string, got {shown(value)}", fix or "set a value")
        return value

    def matching(self, name: str, rule: str, max_length: int, fix: str, *, required: bool = False) -> str | None:
        """A string that must match `rule` whole (fullmatch: no trailing newline slips through)."""
        value = self.string(name, required=required, fix=fix)
        if value is not None and (len(value) > max_length or not re.fullmatch(rule, value)):
            raise SpecError(self.field(name), f"{shown(value)} is not allowed here", fix)
        return value

    def one_of(self, name: str, choices: tuple[str, ...], fix: str) -> str:
        """One of `choices` exactly (an enum in the CRD)."""
        value = self.get(name)
        if value not in choices:
            raise SpecError(self.field(name), f"{shown(value)} is not one of {', '.join(map(repr, choices))}", fix)
        return str(value)

    def checked(self, name: str, valid: bool, value: str | None, fix: str) -> str | None:
        if value is not None and not valid:
            raise SpecError(self.field(name), f"{shown(value)} is not allowed here", fix)
        return value

    def integer(self, name: str, low: int, high: int, fix: str) -> int:
        value = self.get(name)
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise SpecError(self.field(name), f"must be a whole number, got {value!r}", fix)
        if not low <= value <= high:
            raise SpecError(self.field(name), f"{value} is out of range {low}..{high}", fix)
        return value

    def number(self, name: str, low: float, high: float, fix: str) -> float:
        value = self.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(self.field(name), f"must be a number of seconds, got {value!r}", fix)
        if not low <= value <= high:
            raise SpecError(self.field(name), f"{value} is out of range {low}..{high}", fix)
        return float(value)

    def boolean(self, name: str) -> bool:
        value = self.get(name)
        if not isinstance(value, bool):
            raise SpecError(self.field(name), f"must be true or false, got {value!r}", "write true or false")
        return value

    def strings(self, name: str) -> tuple[str, ...] | None:
        value = self.get(name)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SpecError(self.field(name), f"must be a list of strings, got {value!r}", 'e.g. ["pgwork"]')
        return tuple(value)
