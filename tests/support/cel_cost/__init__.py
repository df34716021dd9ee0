"""The CEL cost budget of a CRD, estimated statically as a Kubernetes API server does when the CRD is
created or updated, for the CEL subset accelpool's (and Karpenter's) rules use.

A real API server compiles every `x-kubernetes-validations` rule against the schema node it sits on,
estimates the rule's worst-case cost from the schema's maxLength/maxItems/maxProperties (or, where a
bound is missing, from the largest request it accepts), multiplies it by the number of times the rule
can run in one object, and rejects the CRD when one rule, or the sum over the CRD, is over the limit.
This module replays that computation:

- the CEL types a rule sees and their worst-case sizes: `SchemaDeclType` and the `estimate*` helpers
  in kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/cel/common/schemas.go, the declared types
  of staging/src/k8s.io/apiserver/pkg/cel/types.go and the sizes of .../pkg/cel/limits.go;
- the size of a node reached by a field path: `sizeEstimator.EstimateSize` in
  staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/compilation.go (which also gives
  `maxCardinality`, the repeat count of a rule under unbounded lists or maps);
- the cost of each expression node, comprehension and standard function: the `coster` of google/cel-go
  checker/cost.go, its constants in common/cost.go (listed there in cel-go's `common` package) and the
  macro expansions of parser/macro.go;
- the Kubernetes library functions' costs: `CostEstimator.EstimateCallCost` in
  staging/src/k8s.io/apiserver/pkg/cel/library/cost.go; has() costs nothing
  (`checker.PresenceTestHasCost(false)` in staging/src/k8s.io/apiserver/pkg/cel/environment/base.go);
- the limits, the multiplication by cardinality, the CRD total and the error texts:
  staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go
  (`getExpressionCost`, `getCostErrorMessage`) and cel_validation.go (`MaxCardinality`, `TotalCost`),
  with the runtime constants of staging/src/k8s.io/apiserver/pkg/apis/cel/config.go.

It estimates only the worst-case (Max) side, which is all the server compares. It is honest about its
reach: an expression it does not model (a function, macro or syntax outside the subset) raises
`UnmodelledCEL` instead of costing 0, and one the server would not compile (an unknown field, a rule
that is not a bool) raises `CELCompileError`. Where a choice had to be made it errs high: the global
form `matches(s, re)` is costed like `s.matches(re)`, which cel-go prices as O(1).

Modules, in the order a rule goes through them: `limits` (the constants and errors), `types` (the
types and sizes a rule sees), `expr` (parsing), `checker` (types of expressions), `coster` (the cost
of one expression: `estimate`), `crd` (every rule of a schema, times its cardinality, against the
limits: `estimate_schema`, `estimate_crd`).
"""

from tests.support.cel_cost.coster import estimate
from tests.support.cel_cost.crd import RuleCost, SchemaCost, cost_error_message, estimate_crd, estimate_schema
from tests.support.cel_cost.expr import (
    Call,
    Comprehension,
    Expr,
    Ident,
    ListLiteral,
    Literal,
    MapLiteral,
    Select,
    parse,
)
from tests.support.cel_cost.limits import (
    MAX_REQUEST_SIZE_BYTES,
    PER_CALL_LIMIT,
    STATIC_ESTIMATED_COST_LIMIT,
    STATIC_ESTIMATED_CRD_COST_LIMIT,
    CELCompileError,
    UnmodelledCEL,
)
from tests.support.cel_cost.types import DeclType, schema_decl_type

__all__ = [
    "MAX_REQUEST_SIZE_BYTES",
    "PER_CALL_LIMIT",
    "STATIC_ESTIMATED_COST_LIMIT",
    "STATIC_ESTIMATED_CRD_COST_LIMIT",
    "CELCompileError",
    "Call",
    "Comprehension",
    "DeclType",
    "Expr",
    "Ident",
    "ListLiteral",
    "Literal",
    "MapLiteral",
    "RuleCost",
    "SchemaCost",
    "Select",
    "UnmodelledCEL",
    "cost_error_message",
    "estimate",
    "estimate_crd",
    "estimate_schema",
    "parse",
    "schema_decl_type",
]
