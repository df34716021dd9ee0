"""A CRD's rules, their cardinality and the limits: what apiextensions' validation compares."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.cel_cost.coster import estimate
from tests.support.cel_cost.limits import (
    MAX_REQUEST_SIZE_BYTES,
    STATIC_ESTIMATED_COST_LIMIT,
    STATIC_ESTIMATED_CRD_COST_LIMIT,
    CELCompileError,
    UnmodelledCEL,
    _add,
    _mul,
)
from tests.support.cel_cost.types import schema_decl_type

# --- a CRD's rules, their cardinality and the limits: apiextensions validation.go, cel_validation.go ---


@dataclass(frozen=True)
class RuleCost:
    """One x-kubernetes-validations rule: its estimated cost per evaluation and how often it can run."""

    path: str
    """The field path the API server names the rule by, e.g. `...openAPIV3Schema.properties[spec]...rule`."""
    rule: str
    cost: int
    cardinality: int
    message_expression_cost: int | None = None

    @property
    def total(self) -> int:
        """getExpressionCost: the rule's cost times its cardinality."""
        return 0 if self.cost == 0 else _mul(self.cost, self.cardinality)


@dataclass(frozen=True)
class SchemaCost:
    """Every rule of one version's openAPIV3Schema, and the total the API server compares with its limit."""

    path: str
    rules: list[RuleCost]

    @property
    def total(self) -> int:
        return _add(*(r.total for r in self.rules), *(r.message_expression_cost or 0 for r in self.rules))

    def errors(self) -> list[str]:
        """What the API server would answer, one line per Forbidden error; empty when it accepts the schema."""
        errors: list[str] = []
        observed: list[tuple[int, str]] = []
        for r in self.rules:
            if r.total > STATIC_ESTIMATED_COST_LIMIT:
                errors.append(f"{r.path}: Forbidden: {cost_error_message('estimated rule cost', r.total)}")
            observed.append((r.total, r.path))
            if r.message_expression_cost is not None:
                path = r.path.removesuffix(".rule") + ".messageExpression"
                if r.message_expression_cost > STATIC_ESTIMATED_COST_LIMIT:
                    message = cost_error_message("estimated messageExpression cost", r.message_expression_cost)
                    errors.append(f"{path}: Forbidden: {message}")
                observed.append((r.message_expression_cost, path))
        if self.total > STATIC_ESTIMATED_CRD_COST_LIMIT:
            expensive = sorted((o for o in observed if o[0] >= STATIC_ESTIMATED_CRD_COST_LIMIT // 100), reverse=True)
            for _, path in expensive[:4]:
                errors.append(
                    f"{path}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire "
                    "OpenAPIv3 schema"
                )
            message = cost_error_message(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                self.total,
                STATIC_ESTIMATED_CRD_COST_LIMIT,
            )
            errors.append(f"{self.path}: Forbidden: {message}")
        return errors


def cost_error_message(cost_name: str, cost: int, limit: int = STATIC_ESTIMATED_COST_LIMIT) -> str:
    """validation.go getCostErrorMessage."""
    exceed = cost / limit
    if exceed > 100.0:
        factor = "more than 100x"
    elif exceed < 1.5:
        factor = f"{exceed:f}x"
    else:
        factor = f"{exceed:.1f}x"
    return (
        f"{cost_name} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, "
        "maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )


def _max_elements(node: Mapping[str, Any]) -> int | None:
    """cel_validation.go extractMaxElements: how many times a node's children can occur per occurrence."""
    kind = node.get("type")
    if kind == "object":
        if "additionalProperties" in node:
            return max(node["maxProperties"], 0) if "maxProperties" in node else None
        return 1
    if kind == "array":
        return max(node["maxItems"], 0) if "maxItems" in node else None
    return 1


def _walk(
    node: Mapping[str, Any], path: str, cardinality: int | None, root: bool
) -> Iterator[tuple[str, Mapping[str, Any], int | None, bool]]:
    yield path, node, cardinality, root
    factor = _max_elements(node)
    child = None if cardinality is None or factor is None else _mul(cardinality, factor)
    for keyword in ("allOf", "anyOf", "oneOf", "not"):
        nested = node.get(keyword)
        for sub in nested if isinstance(nested, list) else [nested] if nested else []:
            if any(n.get("x-kubernetes-validations") for _, n, _, _ in _walk(sub, path, None, False)):
                raise UnmodelledCEL(f"{path}.{keyword}: rules inside {keyword} are not modelled")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from _walk(node["additionalProperties"], f"{path}.additionalProperties", child, False)
    for name, prop in (node.get("properties") or {}).items():
        yield from _walk(prop, f"{path}.properties[{name}]", child, bool(prop.get("x-kubernetes-embedded-resource")))
    if isinstance(node.get("items"), Mapping):
        yield from _walk(
            node["items"], f"{path}.items", child, bool(node["items"].get("x-kubernetes-embedded-resource"))
        )


def estimate_schema(schema: Mapping[str, Any], path: str = "spec.versions[0].schema.openAPIV3Schema") -> SchemaCost:
    """Estimate every rule of a version's openAPIV3Schema as the API server does when the CRD is written."""
    rules: list[RuleCost] = []
    for node_path, node, cardinality, root in _walk(schema, path, 1, True):
        validations = node.get("x-kubernetes-validations") or []
        if not validations:
            continue
        decl = schema_decl_type(node, root)
        if decl is None:
            raise CELCompileError(f"{node_path}: rule declared on schema that does not support validation rules")
        # getExpressionCost: unbounded cardinality falls back on how many such values fit in a request
        repeat = cardinality if cardinality is not None else MAX_REQUEST_SIZE_BYTES // (decl.min_size + 1)
        for index, validation in enumerate(validations):
            rule_path = f"{node_path}.x-kubernetes-validations[{index}].rule"
            try:
                cost = estimate(validation["rule"], node, is_resource_root=root)
                message_cost = None
                if validation.get("messageExpression"):
                    message_cost = estimate(
                        validation["messageExpression"], node, is_resource_root=root, result="string"
                    )
            except (UnmodelledCEL, CELCompileError) as error:
                raise type(error)(f"{rule_path}: {error}") from error
            rules.append(RuleCost(rule_path, validation["rule"], cost, repeat, message_cost))
    return SchemaCost(path, rules)


def estimate_crd(crd: Mapping[str, Any]) -> list[SchemaCost]:
    """One SchemaCost per version of a CustomResourceDefinition."""
    return [
        estimate_schema(version["schema"]["openAPIV3Schema"], f"spec.versions[{i}].schema.openAPIV3Schema")
        for i, version in enumerate(crd["spec"]["versions"])
    ]
