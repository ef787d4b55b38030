"""The name rules Kubernetes itself applies (k8s.io/apimachinery/pkg/util/validation), as pure checks.

Every string from a JobQueue spec that becomes part of an API path, an object name, a label, or a
Secret lookup goes through one of these, both when the spec is parsed and again in the API client's
path builder, so no caller can build a path that leaves the JobQueue's namespace.

The patterns use `re.fullmatch`: `re.match(r"...$")` would accept a trailing newline.
"""

from __future__ import annotations

import re

# RFC 1123 label: namespaces, most object names with a 63-character limit, label values' shape.
DNS1123_LABEL_MAX = 63
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(_DNS1123_LABEL)
# RFC 1123 subdomain: Secret, Deployment, CronJob, ServiceAccount names.
DNS1123_SUBDOMAIN_MAX = 253
DNS1123_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
# RFC 1035 label: Service names (must start with a letter).
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# Secret and ConfigMap data keys.
SECRET_KEY_MAX = 253
SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")
# Container environment variable names.
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
# CronJob names: the controller appends an 11-character suffix to the Job names it makes.
CRONJOB_NAME_MAX = 52


def is_dns1123_label(value: object) -> bool:
    return isinstance(value, str) and len(value) <= DNS1123_LABEL_MAX and bool(DNS1123_LABEL.fullmatch(value))


def is_dns1123_subdomain(value: object) -> bool:
    return isinstance(value, str) and len(value) <= DNS1123_SUBDOMAIN_MAX and bool(DNS1123_SUBDOMAIN.fullmatch(value))


def is_dns1035_label(value: object) -> bool:
    return isinstance(value, str) and len(value) <= DNS1123_LABEL_MAX and bool(DNS1035_LABEL.fullmatch(value))


def is_secret_key(value: object) -> bool:
    """Kubernetes' IsConfigMapKey: the key characters, and never `.`, `..` or a `..` prefix."""
    return (
        isinstance(value, str)
        and len(value) <= SECRET_KEY_MAX
        and bool(SECRET_KEY.fullmatch(value))
        and not value.startswith("..")
        and value != "."
    )


def is_env_name(value: object) -> bool:
    return isinstance(value, str) and bool(ENV_NAME.fullmatch(value))
