"""The API's identity (group, version, kind, plural) and the rules for a ComputePool's name.

Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any

from accelpool.api.problems import Problem

GROUP = "accelpool.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ComputePool"
PLURAL = "computepools"
SINGULAR = "computepool"
SHORT_NAMES = ("cpool",)
CATEGORIES = ("accelpool",)
DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
"""What the API server requires of an object's name (k8s.io/apimachinery pkg/util/validation validation.go)."""
DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{DNS1123_SUBDOMAIN}')"
)
MAX_POOL_NAME = 63
"""A pool's name is the value of the `accelpool.io/pool` label on its nodes: at most 63 characters."""


def name_problems(name: Any) -> list[Problem]:
    """A ComputePool's name as the API server judges it: ObjectMeta's rules (k8s.io/apiextensions-apiserver
    pkg/registry/customresource/validator.go: ValidateObjectMetaAccessor with NameIsDNSSubdomain), then the
    CRD schema's `maxLength` (a pool's name is the value of its nodes' `accelpool.io/pool` label)."""
    if not isinstance(name, str):
        return []  # ObjectMeta's decoder refuses it first (a type error on metadata.name)
    if not name:
        return [Problem("metadata.name", None, "name or generateName is required", error_type="Required")]
    problems = []
    if not re.fullmatch(DNS1123_SUBDOMAIN, name) or len(name) > 253:
        problems.append(Problem("metadata.name", name, DNS1123_SUBDOMAIN_MESSAGE))
    if len(name) > MAX_POOL_NAME:
        problems.append(
            Problem(
                "metadata.name", name, f"may not be more than {MAX_POOL_NAME} bytes", error_type="TooLong", shown=None
            )
        )
    return problems
