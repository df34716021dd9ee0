"""The API's identity (group, version, kind, plural) and the rules for a ComputePool's name."""

from __future__ import annotations

import re
from typing import Any

from accelpool_api.problems import Problem

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


QUALIFIED_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUALIFIED_NAME_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    f"'{QUALIFIED_NAME}')"
)
LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    f"validation is '{LABEL_VALUE}')"
)
MAX_ANNOTATIONS_BYTES = 256 * 1024


def _qualified_name(value: str) -> list[str]:
    """apimachinery pkg/util/validation/validation.go `IsQualifiedName`: an optional DNS-subdomain prefix and
    '/', then a name part of at most 63 characters."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            f"{QUALIFIED_NAME_MESSAGE.removesuffix(')')}) with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    found = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            found.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                found.append("prefix part must be no more than 253 characters")
            if not re.fullmatch(DNS1123_SUBDOMAIN, prefix):
                found.append(f"prefix part {DNS1123_SUBDOMAIN_MESSAGE}")
    if not name:
        found.append("name part must be non-empty")
    elif len(name) > 63:
        found.append("name part must be no more than 63 bytes")
    if not re.fullmatch(QUALIFIED_NAME, name):
        found.append(QUALIFIED_NAME_MESSAGE)
    return found


def metadata_problems(metadata: Any) -> list[Problem]:
    """A pool's labels and annotations as the API server judges them (apimachinery pkg/api/validation
    objectmeta.go: `ValidateLabels` — each key a qualified name, each value a label value — and
    `ValidateAnnotations` — each key a qualified name, 256 KiB in all), each problem on the map's field."""
    if not isinstance(metadata, dict):
        return []
    problems: list[Problem] = []
    labels = metadata.get("labels")
    for key, value in labels.items() if isinstance(labels, dict) else ():
        problems += [Problem("metadata.labels", key, why) for why in _qualified_name(str(key))]
        if len(str(value)) > 63:
            problems.append(Problem("metadata.labels", value, "must be no more than 63 bytes"))
        if not re.fullmatch(LABEL_VALUE, str(value)):
            problems.append(Problem("metadata.labels", value, LABEL_VALUE_MESSAGE))
    annotations = metadata.get("annotations")
    total = 0
    for key, value in annotations.items() if isinstance(annotations, dict) else ():
        problems += [Problem("metadata.annotations", key, why) for why in _qualified_name(str(key).lower())]
        total += len(str(key)) + len(str(value))
    if total > MAX_ANNOTATIONS_BYTES:
        problems.append(
            Problem(
                "metadata.annotations",
                None,
                f"may not be more than {MAX_ANNOTATIONS_BYTES} bytes",
                error_type="TooLong",
                shown=None,
            )
        )
    return problems
