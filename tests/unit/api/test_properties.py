"""Arbitrary input never crashes validation: it is valid, or it gets problems that name a path."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from accelpool_api.validation import validate_object, validate_spec
from accelpool_core import catalog

NAMES = st.sampled_from([*(a.name for a in catalog.ACCELERATORS), "H100:8", "a100-80gb:4", "nope", "", "H100:0"])
PROFILES = st.sampled_from([*sorted({p.name for a in catalog.ACCELERATORS for p in a.mig_profiles}), "9g.1gb", "x"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True), st.text(max_size=12))
JSONISH = st.recursive(SCALARS, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3))

SPECS = st.fixed_dictionaries(
    {"accelerator": st.one_of(NAMES, JSONISH, st.fixed_dictionaries({"name": NAMES}, optional={"memory": st.text()}))},
    optional={
        "nodes": st.one_of(
            st.integers(-3, 20_000),
            st.fixed_dictionaries({"min": st.integers(-1, 9), "max": st.integers(-1, 9)}),
            JSONISH,
        ),
        "maxNodes": st.one_of(st.integers(-1, 20), JSONISH),
        "mig": st.one_of(
            st.fixed_dictionaries({"profile": PROFILES}),
            st.fixed_dictionaries(
                {"profiles": st.lists(PROFILES, max_size=9)}, optional={"strategy": st.text(max_size=7)}
            ),
            JSONISH,
        ),
        "sharing": st.one_of(
            st.fixed_dictionaries({"timeSlicing": st.fixed_dictionaries({"replicas": st.integers(-1, 300)})}), JSONISH
        ),
        "provisioner": st.one_of(
            st.fixed_dictionaries({"type": st.sampled_from(["static", "karpenter", "x"])}), JSONISH
        ),
        "health": st.one_of(
            st.fixed_dictionaries({"maxUnavailable": st.one_of(st.integers(-2, 5), st.text(max_size=5))}), JSONISH
        ),
        "nodeSelector": JSONISH,
        "dedicated": SCALARS,
    },
)


@settings(max_examples=400, deadline=None)
@given(SPECS)
def test_specs_are_valid_or_explained(spec: dict[str, Any]) -> None:
    parsed, problems = validate_spec(spec)
    assert (parsed is None) == bool(problems)
    for problem in problems:
        assert problem.path.startswith(("spec", ".spec", "<nil>")) and str(problem)


@settings(max_examples=200, deadline=None)
@given(JSONISH)
def test_any_document_is_valid_or_explained(document: Any) -> None:
    verdict = validate_object(document)
    assert verdict.valid or all((p.path or p.error_type == "UnknownField") and str(p) for p in verdict.problems)
