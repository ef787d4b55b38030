"""The JobQueue CRD as the API server judges it (defaults, the schema with RE2 patterns, the
x-kubernetes-validations rules in CEL) beside the operator's own verdict, for the tests that hold
the two to agreement."""

from __future__ import annotations

import copy
from importlib import resources
from typing import Any

import celpy
import jsonschema
import re2
import yaml

from pgwork.operator.fields import SpecError
from pgwork.operator.spec import check_name, parse_spec

CRD = yaml.safe_load(resources.files("pgwork.operator").joinpath("crd.yaml").read_text())
VERSION = CRD["spec"]["versions"][0]
SCHEMA = VERSION["schema"]["openAPIV3Schema"]
CEL = celpy.Environment()


def walk(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, schema)]
    for name, sub in (schema.get("properties") or {}).items():
        found += walk(sub, f"{path}.{name}")
    if "items" in schema:
        found += walk(schema["items"], f"{path}[]")
    return found


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    if isinstance(value, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = apply_defaults(sub, value[name])
    elif isinstance(value, list) and "items" in schema:
        return [apply_defaults(schema["items"], v) for v in value]
    return value


def plain(schema: Any) -> Any:
    """The schema without Kubernetes extensions, for a JSON-schema validator."""
    if isinstance(schema, dict):
        return {k: plain(v) for k, v in schema.items() if not k.startswith("x-kubernetes")}
    if isinstance(schema, list):
        return [plain(v) for v in schema]
    return schema


def as_cel_value(schema: dict[str, Any], value: Any) -> Any:
    """`type: number` fields are doubles in CEL even when written as 10."""
    if schema.get("type") == "number" and isinstance(value, int):
        return float(value)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        return {k: as_cel_value(props.get(k, {}), v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_cel_value(schema.get("items", {}), v) for v in value]
    return value


def cel_failures(schema: dict[str, Any], value: Any) -> list[str]:
    failures = []
    for rule in schema.get("x-kubernetes-validations") or []:
        program = CEL.program(CEL.compile(rule["rule"]))
        result = program.evaluate({"self": celpy.json_to_cel(as_cel_value(schema, value))})
        if not bool(result):
            failures.append(rule["message"])
    if isinstance(value, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name in value:
                failures += cel_failures(sub, value[name])
    elif isinstance(value, list) and "items" in schema:
        for item in value:
            failures += cel_failures(schema["items"], item)
    return failures


def _re2_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    """`pattern` as the API server evaluates it (Go's RE2): Python's `re` lets `$` match before a
    trailing newline, which would make this test accept what a cluster refuses."""
    if isinstance(instance, str) and not re2.search(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


SchemaValidator = jsonschema.validators.extend(jsonschema.Draft7Validator, {"pattern": _re2_pattern})


def api_server_verdict(spec: dict[str, Any], name: str = "ocr") -> list[str]:
    obj = apply_defaults(SCHEMA, {"apiVersion": "pgwork.dev/v1alpha1", "kind": "JobQueue",
                                  "metadata": {"name": name}, "spec": copy.deepcopy(spec)})  # fmt: skip
    errors = [e.message for e in SchemaValidator(plain(SCHEMA)).iter_errors(obj)]
    # Unknown fields: a structural schema prunes them; kubectl's strict validation rejects them.
    db = obj["spec"].get("database") or {}
    errors += [
        f"unknown field database.{k}"
        for k in db
        if k not in SCHEMA["properties"]["spec"]["properties"]["database"]["properties"]
    ]
    return errors + (cel_failures(SCHEMA, obj) if not errors else [])


def operator_verdict(spec: dict[str, Any], name: str = "ocr") -> str | None:
    try:
        check_name(name)
        parse_spec(spec)
    except SpecError as exc:
        return str(exc)
    return None


BASE: dict[str, Any] = {"database": {"secretName": "db"}, "jobTypes": ["ocr"], "worker": {"image": "i:1", "app": "m"}}


def spec_with(section: str, **values: Any) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    spec[section] = {**spec.get(section, {}), **values} if section in spec or values else values
    return spec


def assert_agree(case: str, spec: dict[str, Any], valid: bool) -> None:
    api = api_server_verdict(spec)
    operator = operator_verdict(spec)
    assert (not api) is valid, f"API server verdict for {case}: {api}"
    assert (operator is None) is valid, f"operator verdict for {case}: {operator}"
