"""Validates ComputePool documents as the API server admits them, in the server's own words.

A real API server judges a ComputePool in three stages, and stops at the first that objects:

1. decoding: an unknown field fails strict field validation (kubectl's default) before anything
   else: `strict decoding error: unknown field "spec.gpus"`;
2. the CRD's structural schema and its CEL rules (generated from `accelpool_api` by `accelpool_api.crd`):
   `spec.sharing.timeSlicing.replicas: Invalid value: 1: spec.sharing.timeSlicing.replicas in body
   should be greater than or equal to 2`;
3. the validating admission webhook (`accelpool.admission.review`), which runs this package: what needs the
   catalog, or the `accelerator` field whose two shapes CEL cannot see.

`validate_object` runs the same stages on the same models and reports what the server would, word
for word, so `accelpool validate` and `kubectl apply` agree. The operator uses it too, for the
`Valid` condition of a pool stored before a rule existed.

The modules: `stages` (`validate_object`, `Verdict`), `schema` (the schema stage's checks beyond
pydantic's), `errors` (pydantic's errors in the API server's words).
"""

from accelpool_api.validation.errors import json_type
from accelpool_api.validation.schema import INT32_MAX, go_plain, go_type
from accelpool_api.validation.stages import (
    OBJECT_META_FIELDS,
    Stage,
    Verdict,
    denial_message,
    listed,
    validate_object,
    validate_spec,
)

__all__ = [
    "INT32_MAX",
    "OBJECT_META_FIELDS",
    "Stage",
    "Verdict",
    "denial_message",
    "go_plain",
    "go_type",
    "json_type",
    "listed",
    "validate_object",
    "validate_spec",
]
