"""The limits and constants the API server and cel-go use, saturating uint64 arithmetic, and the
errors of the estimator."""

from __future__ import annotations

import math

UINT64_MAX = 2**64 - 1

# staging/src/k8s.io/apiserver/pkg/apis/cel/config.go
PER_CALL_LIMIT = 1_000_000
"""The runtime limit of one evaluation: an object whose rule costs more is rejected when it is written.
The static estimate may exceed it (the server only compares the estimate with the static limits)."""
RUNTIME_CEL_COST_BUDGET = 10_000_000
MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024
MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES = 5 * 1024

# staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go
STATIC_ESTIMATED_COST_LIMIT = 10_000_000
"""The largest estimated cost of one rule (times its cardinality) or messageExpression."""
STATIC_ESTIMATED_CRD_COST_LIMIT = 100_000_000
"""The largest estimated total of a version's schema: every rule (times cardinality) and messageExpression."""

# google/cel-go common/cost.go
_SELECT_AND_IDENT_COST = 1
_CONST_COST = 0
_LIST_CREATE_BASE_COST = 10
_MAP_CREATE_BASE_COST = 30
_STRING_TRAVERSAL_COST_FACTOR = 0.1
_REGEX_STRING_LENGTH_COST_FACTOR = 0.25
_PRESENCE_TEST_COST = 0  # environment/base.go: cel.CostEstimatorOptions(checker.PresenceTestHasCost(false))

# staging/src/k8s.io/apiserver/pkg/cel/limits.go
_MAX_DURATION_SIZE_JSON = 32
_MAX_DATETIME_SIZE_JSON = 32
_MIN_DURATION_SIZE_JSON = 3
_JSON_DATE_SIZE = 12
_MIN_DATETIME_SIZE_JSON = 21
_MIN_STRING_SIZE = 2
_MIN_BOOL_SIZE = 4
_MIN_NUMBER_SIZE = 1


class UnmodelledCEL(Exception):
    """The expression uses a construct this estimator does not model: it refuses rather than guess."""


class CELCompileError(Exception):
    """The API server would not compile this expression (an unknown field or variable, a wrong type)."""


# --- saturating uint64 arithmetic (checker/cost.go addUint64NoOverflow, multiplyUint64NoOverflow,
# multiplyByCostFactor) ---


def _add(*values: int) -> int:
    return min(sum(values), UINT64_MAX)


def _mul(x: int, y: int) -> int:
    return min(x * y, UINT64_MAX)


def _factor(x: int, factor: float) -> int:
    """x * factor, rounded up, as cel-go computes it (in float64)."""
    as_float = float(x)
    if as_float > 0 and factor > 0 and as_float > UINT64_MAX / factor:
        return UINT64_MAX
    rounded = math.ceil(as_float * factor)
    return UINT64_MAX if rounded >= 2**64 else rounded
