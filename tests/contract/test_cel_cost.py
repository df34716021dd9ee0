"""The CEL cost budget: every rule of the committed CRD, estimated as a Kubernetes API server estimates it
when the CRD is created (tests/support/cel_cost/), fits the server's limits; and the estimator agrees with the
API server's own expected costs, rejects what a server rejects, and refuses what it does not model.

Limits: StaticEstimatedCostLimit and StaticEstimatedCRDCostLimit in kubernetes/kubernetes
staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go, which also
multiplies each rule by the number of times it can run (`getExpressionCost`, cardinality from
cel_validation.go) and words the rejection (`getCostErrorMessage`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cel_cost import (
    MAX_REQUEST_SIZE_BYTES,
    PER_CALL_LIMIT,
    STATIC_ESTIMATED_COST_LIMIT,
    STATIC_ESTIMATED_CRD_COST_LIMIT,
    CELCompileError,
    SchemaCost,
    UnmodelledCEL,
    cost_error_message,
    estimate,
    estimate_crd,
    estimate_schema,
)
from tests.support.environment import missing

pytestmark = pytest.mark.contract
ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "crds" / "accelpool.io_computepools.yaml"
PUBLISHED_CRDS = ROOT.parent / "shared" / "crds"
TOO_EXPENSIVE = "estimated rule cost exceeds budget by factor of"  # validation.go getCostErrorMessage


def _crd() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CRD_FILE.read_text())
    return loaded


def _rules_in(node: dict[str, Any]) -> int:
    """Rules anywhere under a schema node, counted independently of the estimator's walk."""
    count = len(node.get("x-kubernetes-validations") or [])
    children = list((node.get("properties") or {}).values())
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            children.append(node[key])
    return count + sum(_rules_in(child) for child in children)


def _table(schema: SchemaCost) -> str:
    lines = [f"{'cost':>10} {'x':>4} {'total':>10}  {'message':>8}  rule"]
    for r in schema.rules:
        message = "" if r.message_expression_cost is None else str(r.message_expression_cost)
        lines.append(f"{r.cost:>10} {r.cardinality:>4} {r.total:>10}  {message:>8}  {r.rule}")
    lines.append(
        f"total {schema.total} of {STATIC_ESTIMATED_CRD_COST_LIMIT}; per rule limit {STATIC_ESTIMATED_COST_LIMIT}"
    )
    return "\n".join(lines)


# ------------------------------------------------------------------ our CRD


def test_every_rule_of_the_committed_crd_fits_the_api_server_budget() -> None:
    crd = _crd()
    for version, schema in zip(crd["spec"]["versions"], estimate_crd(crd), strict=True):
        print(f"\n{crd['metadata']['name']} {version['name']}:\n{_table(schema)}")
        assert len(schema.rules) == _rules_in(version["schema"]["openAPIV3Schema"]) >= 5, "a rule was not estimated"
        assert schema.errors() == [], "\n".join(schema.errors())
        for rule in schema.rules:
            assert rule.total <= STATIC_ESTIMATED_COST_LIMIT, rule
            assert rule.message_expression_cost is None or rule.message_expression_cost <= STATIC_ESTIMATED_COST_LIMIT
        assert schema.total <= STATIC_ESTIMATED_CRD_COST_LIMIT


def test_the_mig_layout_rule_fits_only_because_profiles_has_max_items() -> None:
    """`profiles.all(p, p == profiles[0])` compares unbounded strings: without maxItems: 7 it is refused."""
    crd = _crd()
    mig = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["mig"]
    assert mig["properties"]["profiles"]["maxItems"] == 7
    bounded = estimate_schema(mig, "mig")
    assert bounded.errors() == []
    unbounded = copy.deepcopy(mig)
    del unbounded["properties"]["profiles"]["maxItems"]
    errors = estimate_schema(unbounded, "mig").errors()
    assert errors[0] == (
        f"mig.x-kubernetes-validations[1].rule: Forbidden: {TOO_EXPENSIVE} more than 100x (try simplifying the rule, "
        "or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
    assert errors[-1].startswith("mig: Forbidden: x-kubernetes-validations estimated rule cost total for entire")


def test_a_rule_on_a_field_cel_cannot_see_is_a_compile_error() -> None:
    """spec.accelerator keeps unknown fields and has no type: the API server gives CEL no declaration for it."""
    spec = _crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    with pytest.raises(CELCompileError, match="undefined field 'accelerator'"):
        estimate("self.accelerator == 'H100'", spec)


# ------------------------------------------------------------------ the estimator can fail


def _string_list(rule: str, **bounds: int) -> dict[str, Any]:
    """A list of strings whose items carry `rule`; `maxItems`/`maxLength` where given."""
    item: dict[str, Any] = {"type": "string", "x-kubernetes-validations": [{"rule": rule, "message": "m"}]}
    if "maxLength" in bounds:
        item["maxLength"] = bounds["maxLength"]
    node: dict[str, Any] = {"type": "array", "items": item}
    if "maxItems" in bounds:
        node["maxItems"] = bounds["maxItems"]
    return {"type": "object", "properties": {"names": node}}


DNS_LABEL = "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')"


def test_matches_over_unbounded_strings_is_refused_and_bounds_bring_it_under() -> None:
    unbounded = estimate_schema(_string_list(DNS_LABEL), "s")
    (rule,) = unbounded.rules
    # one evaluation: (3 MiB - 2 characters + 1) * 0.1, times ceil(32-character regex * 0.25), plus `self`
    assert rule.cost == 314_573 * 8 + 1
    assert rule.cardinality == MAX_REQUEST_SIZE_BYTES // 3  # cel_validation.go: no maxItems, as many "" as fit
    assert rule.total > 100 * STATIC_ESTIMATED_COST_LIMIT
    assert any(TOO_EXPENSIVE + " more than 100x" in e for e in unbounded.errors())
    assert any("estimated rule cost total for entire OpenAPIv3 schema exceeds budget" in e for e in unbounded.errors())

    only_items = estimate_schema(_string_list(DNS_LABEL, maxItems=16), "s")  # the strings are still 3 MiB
    assert only_items.rules[0].total == 16 * (314_573 * 8 + 1) > STATIC_ESTIMATED_COST_LIMIT
    assert any(TOO_EXPENSIVE + " 4.0x" in e for e in only_items.errors())

    bounded = estimate_schema(_string_list(DNS_LABEL, maxItems=16, maxLength=63), "s")
    assert bounded.rules[0].cost == 26 * 8 + 1  # ceil((63 * 4 + 1) * 0.1) * 8: up to 4 bytes a character
    assert bounded.errors() == []


def test_all_over_an_unbounded_list_is_refused_and_max_items_brings_it_under() -> None:
    def schema(**bounds: int) -> dict[str, Any]:
        items: dict[str, Any] = {"type": "string", "enum": ["1g.10gb", "3g.40gb"]}
        node: dict[str, Any] = {
            "type": "array",
            "items": items,
            "x-kubernetes-validations": [{"rule": "self.all(p, self.all(q, p == q))", "message": "m"}],
        }
        node.update(bounds)
        return node

    unbounded = estimate_schema(schema(), "p")
    assert unbounded.rules[0].cost > 100 * STATIC_ESTIMATED_COST_LIMIT
    assert unbounded.errors()[0].startswith(f"p.x-kubernetes-validations[0].rule: Forbidden: {TOO_EXPENSIVE} more")
    bounded = estimate_schema(schema(maxItems=7), "p")
    assert bounded.errors() == []
    # per item: the loop condition (2) and the && step (1) around the body; a loop adds its range and result (2)
    inner = 7 * (2 + 1 + 3) + 2  # p == q: ceil(7-byte enum * 0.1) + p + q
    assert bounded.rules[0].cost == 7 * (2 + 1 + inner) + 2


def test_the_crd_total_is_limited_even_when_every_rule_fits() -> None:
    rule = {"rule": DNS_LABEL, "message": "m"}
    item = {"type": "string", "maxLength": 1000, "x-kubernetes-validations": [rule]}
    properties = {f"f{i}": {"type": "array", "maxItems": 1000, "items": item} for i in range(32)}
    schema = estimate_schema({"type": "object", "properties": properties}, "root")
    assert all(r.total == 1000 * (401 * 8 + 1) for r in schema.rules)  # ceil((1000 * 4 + 1) * 0.1) * 8 + 1
    assert schema.total > STATIC_ESTIMATED_CRD_COST_LIMIT
    errors = schema.errors()
    assert errors[-1].startswith(
        "root: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds "
        "budget by factor of 1.026880x"
    )
    assert sum("contributed to estimated rule cost total exceeding cost limit" in e for e in errors) == 4


def test_a_message_expression_has_its_own_limit_and_is_not_multiplied() -> None:
    def schema(message: str) -> dict[str, Any]:
        rule = {"rule": "size(self) < 10", "messageExpression": message}
        items = {"type": "array", "items": {"type": "string"}, "x-kubernetes-validations": [rule]}
        return {"type": "object", "properties": {"lists": {"type": "array", "maxItems": 10, "items": items}}}

    cheap = estimate_schema(schema("'has ' + string(size(self)) + ' items'"), "root")
    (rule,) = cheap.rules
    assert rule.cardinality == 10
    assert rule.message_expression_cost is not None
    assert cheap.total == rule.cost * 10 + rule.message_expression_cost  # the message is not multiplied
    expensive = estimate_schema(schema("'duplicates: ' + self.filter(x, self.exists(y, y == x)).join(', ')"), "root")
    assert expensive.rules[0].total == cheap.rules[0].total
    assert expensive.errors()[0] == (
        "root.properties[lists].items.x-kubernetes-validations[0].messageExpression: Forbidden: "
        + cost_error_message("estimated messageExpression cost", expensive.rules[0].message_expression_cost or 0)
    )


@pytest.mark.parametrize(
    "expression",
    [
        "self.x.url() != null",  # a Kubernetes library function not modelled
        "self.x.replace('a', 'b') == ''",
        "Obj{a: 1} == self",  # message construction
        ".self == self",  # a leading-dot name
        "self.l.all(i, v, v > 0)",  # two-variable comprehension
        "self.l.reverse() == []",
        "self.x.format([1]) == ''",
    ],
)
def test_what_is_not_modelled_is_refused_not_costed_zero(expression: str) -> None:
    l_schema = {"type": "array", "items": {"type": "integer"}}
    schema = {"type": "object", "properties": {"x": {"type": "string"}, "l": l_schema}}
    with pytest.raises(UnmodelledCEL):
        estimate(expression, schema)


def test_compile_errors_the_server_reports() -> None:
    schema = {"type": "object", "properties": {"i": {"type": "integer"}}}
    with pytest.raises(CELCompileError, match="undeclared reference to 'other'"):
        estimate("other.i > 0", schema)
    with pytest.raises(CELCompileError, match="must evaluate to a bool"):
        estimate("self.i", schema)
    with pytest.raises(CELCompileError, match="no matching overload for 'size'"):
        estimate("size(self.i) == 1", schema)


def test_cost_error_message_words_the_factor_as_the_server_does() -> None:
    assert "by factor of 1.200000x (" in cost_error_message("estimated rule cost", 12_000_000)
    assert "by factor of 2.5x (" in cost_error_message("estimated rule cost", 25_000_000)
    assert "by factor of more than 100x (" in cost_error_message("estimated rule cost", 10**10)


# ------------------------------------------------------------------ agreement with the API server's own numbers

# kubernetes/kubernetes staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/compilation_test.go,
# TestCostEstimation: (name, schema generator taking the bound, rule, cost unbounded, bound, cost bounded).
# None: that test only checks that the cost exceeds its costLimit (100000000).


def _typed(kind: str) -> dict[str, Any]:
    if kind in ("duration", "date", "date-time"):
        return {"type": "string", "format": kind}
    if kind == "int-or-string":
        return {"x-kubernetes-int-or-string": True}
    return {"type": kind}


def _bound(key: str, value: int | None) -> dict[str, Any]:
    return {} if value is None else {key: value}


_OBJECT = {
    "type": "object",
    "required": ["required"],
    "properties": {"required": {"type": "string"}, "optional": {"type": "string"}},
}
Gen = Callable[[int | None], dict[str, Any]]


def _array(kind: str) -> Gen:
    return lambda m: {"type": "array", "items": _typed(kind), **_bound("maxItems", m)}


def _array_of(items: dict[str, Any]) -> Gen:
    return lambda m: {"type": "array", "items": items, **_bound("maxItems", m)}


def _map(kind: str) -> Gen:
    return lambda m: {"type": "object", "additionalProperties": _typed(kind), **_bound("maxProperties", m)}


def _map_of(item: dict[str, Any]) -> Gen:
    return lambda m: {"type": "object", "additionalProperties": item, **_bound("maxProperties", m)}


def _string(**extra: Any) -> Gen:
    return lambda m: {"type": "string", **extra, **_bound("maxLength", m)}


def _nested(m: int | None) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": {"type": "string", **_bound("maxLength", m)},
        **_bound("maxProperties", m),
    }


def _all_max_nested(m: int | None) -> dict[str, Any]:
    inner = {"type": "object", "additionalProperties": {**_OBJECT, **_bound("maxProperties", m)}}
    return {"type": "array", "items": {**inner, **_bound("maxProperties", m)}, **_bound("maxItems", m)}


def _one_max_nested(m: int | None) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "object", "additionalProperties": _OBJECT, **_bound("maxProperties", m)}}


def _string_array(m: int | None) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string", **_bound("maxLength", m)}, **_bound("maxItems", m)}


def _split(m: int | None) -> dict[str, Any]:
    string = {"type": "string", **_bound("maxLength", m)}
    return {"type": "object", "properties": {"str": string, "separator": string}}


_NUMBER_MAP = {"type": "object", "additionalProperties": {"type": "number"}}
_NUMBER_ARRAY = {"type": "array", "items": {"type": "number"}}
API_SERVER_COSTS: list[tuple[str, Gen, str, int | None, int, int]] = [
    ("number array with all", _array("number"), "self.all(x, true)", 4718591, 10, 32),
    ("string array with all", _array("string"), "self.all(x, true)", 3145727, 20, 62),
    ("boolean array with all", _array("boolean"), "self.all(x, true)", 1887437, 5, 17),
    ("array of number arrays with all", _array_of(_NUMBER_ARRAY), "self.all(x, true)", 3145727, 100, 302),
    ("array of objects with all", _array_of(_OBJECT), "self.all(x, true)", 555128, 50, 152),
    ("map of numbers with all", _map("number"), "self.all(x, true)", 1348169, 10, 32),
    ("map of strings with all", _map("string"), "self.all(x, true)", 1179647, 3, 11),
    ("map of booleans with all", _map("boolean"), "self.all(x, true)", 943718, 100, 302),
    ("string with contains", _string(), "self.contains('test')", 314574, 10, 5),
    ("string with startsWith", _string(), "self.startsWith('test')", 2, 15, 2),
    ("string with endsWith", _string(), "self.endsWith('test')", 2, 30, 2),
    ("concat string", _string(), 'size(self + "hello") > size("hello")', 314578, 4, 7),
    ("index of array with numbers", _array("number"), "self[1] == 0.0", 2, 5000, 2),
    ("index of array with strings", _array("string"), "self[1] == self[1]", 314577, 8, 314577),
    ("O(n^2) loop with numbers", _array("number"), "self.all(x, self.all(y, true))", None, 10, 352),
    ("O(n^3) loop with numbers", _array("number"), "self.all(x, self.all(y, self.all(z, true)))", None, 10, 3552),
    ("regex matches simple", _string(), 'self.matches("x")', 314574, 50, 22),
    ("regex matches empty string", _string(), '"".matches("(((((((((())))))))))[0-9]")', 7, 10, 7),
    ("regex matches empty regex", _string(), 'self.matches("")', 1, 100, 1),
    ("map of strings with value length", _nested, "self.all(x, x.contains(self[x]))", 2752507, 10, 72),
    ("set array maxLength to zero", _array("number"), "self[3] == 0.0", 2, 0, 2),
    ("set map maxLength to zero", _map("number"), 'self["x"] == 0.0', 2, 0, 2),
    ("set string maxLength to zero", _string(), 'self == "x"', 2, 0, 1),
    ("set bytes maxLength to zero", _string(format="byte"), 'self == b"x"', 2, 0, 1),
    ("set maxLength greater than estimated", _array("number"), "self.all(x, x == 0.0)", 6291454, 6291456, 25165826),
    ("nested, all supporting maxLength", _all_max_nested, 'self.all(x, x["y"].required == "z")', 7340027, 10, 72),
    ("nested, one supporting maxLength", _one_max_nested, 'self.all(x, x["y"].required == "z")', 7340027, 10, 7340027),
    ("int-or-string array with all", _array("int-or-string"), "self.all(x, true)", 4718591, 10, 32),
    ("index of array with int-or-strings", _array("int-or-string"), "self[0] == 5", 3, 10, 3),
    ("index of array with booleans", _array("boolean"), "self[0] == false", 2, 25, 2),
    ("index of array of objects", _array_of(_OBJECT), "self[0] == null", 2, 422, 2),
    ("index of array of array of numbers", _array_of(_NUMBER_ARRAY), "self[0][0] == -1.0", 3, 51, 3),
    ("array of number maps with all", _array_of(_NUMBER_MAP), "self.all(x, x.y == 25.2)", 6291452, 12, 74),
    ("index of array of number maps", _array_of(_NUMBER_MAP), "self[0].x > 2.0", 4, 3000, 4),
    ("duration array with all", _array("duration"), "self.all(x, true)", 2359295, 5, 17),
    ("date array with all", _array("date"), "self.all(x, true)", 725936, 15, 47),
    ("date-time array with all", _array("date-time"), "self.all(x, true)", 428963, 25, 77),
    ("map of int-or-strings with all", _map("int-or-string"), "self.all(x, true)", 1348169, 15, 47),
    ("map of objects with all", _map_of(_OBJECT), "self.all(x, true)", 428963, 20, 62),
    ("map of number maps with all", _map_of(_NUMBER_MAP), "self.all(x, true)", 1179647, 10, 32),
    ("map of number arrays with all", _map_of(_NUMBER_ARRAY), "self.all(x, true)", 1179647, 25, 77),
    ("map of durations with all", _map("duration"), "self.all(x, true)", 1048577, 5, 17),
    ("map of dates with all", _map("date"), "self.all(x, true)", 524288, 10, 32),
    ("map of date-times with all", _map("date-time"), "self.all(x, true)", 349526, 25, 77),
    ("extended library regex find", _string(), "self.find('[0-9]+') == ''", 629147, 10, 11),
    ("extended library join", _string_array, "self.join(' ') == 'aa bb'", 329853068905, 10, 43),
    ("extended library isSorted", _string_array, "self.isSorted() == true", 329854432052, 10, 52),
    ("extended library split", _split, "self.str.split(self.separator) == []", 629160, 10, 22),
    ("extended library lowerAscii", _string(), "self.lowerAscii() == 'lower!'", 314575, 10, 6),
    ("check cost of size call", _map("integer"), "oldSelf.size() == self.size()", 5, 10, 5),
    ("check cost of timestamp comparison", _map("date-time"), 'self["a"] == self["b"]', 8, 7, 8),
    ("check cost of duration comparison", _map("duration"), 'self["c"] == self["d"]', 8, 42, 8),
    ("enum, maxLength of the longest", _string(enum=["A", "B", "C", "LongValue"]), "self.contains('A')", 2, 1000, 401),
]


@pytest.mark.parametrize(
    ("generator", "rule", "unbounded_cost", "bound", "bounded_cost"),
    [case[1:] for case in API_SERVER_COSTS],
    ids=[case[0] for case in API_SERVER_COSTS],
)
def test_agrees_with_the_api_server_cost_estimation_tests(
    generator: Gen, rule: str, unbounded_cost: int | None, bound: int, bounded_cost: int
) -> None:
    unbounded = estimate(rule, generator(None))
    if unbounded_cost is None:
        assert unbounded >= 100_000_000
    else:
        assert unbounded == unbounded_cost
    assert estimate(rule, generator(bound)) == bounded_cost


def _published_crds() -> list[Path]:
    if not PUBLISHED_CRDS.is_dir():
        return []
    return sorted(PUBLISHED_CRDS.glob("*.yaml"))


@pytest.mark.parametrize("path", _published_crds(), ids=lambda p: p.name)
def test_published_crds_that_api_servers_accept_fit_the_estimate(path: Path) -> None:
    """Karpenter's and Kueue's CRDs are installed on real clusters: the estimator must not be stricter."""
    crd = yaml.safe_load(path.read_text())
    for schema in estimate_crd(crd):
        print(f"\n{path.name}:\n{_table(schema)}")
        assert schema.rules
        assert schema.errors() == []


def test_published_crds_are_there() -> None:
    if not _published_crds():
        missing(f"{PUBLISHED_CRDS} is missing: the published CRDs are not checked")


def test_per_call_limit_is_a_runtime_limit_not_a_creation_limit() -> None:
    """Our maxUnavailable rule estimates above PerCallLimit yet the CRD is accepted: the server compares the
    estimate only with the static limits; PerCallLimit stops an evaluation whose actual cost runs over it."""
    health = _crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["health"]
    schema = estimate_schema(health, "health")
    max_unavailable = next(r for r in schema.rules if "maxUnavailable" in r.rule)
    assert PER_CALL_LIMIT < max_unavailable.cost < STATIC_ESTIMATED_COST_LIMIT
    assert schema.errors() == []
