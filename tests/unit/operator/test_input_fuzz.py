"""Fuzz tier for the files `accelpool validate` and `accelpool plan` read: arbitrary YAML-ish documents.

Objects are generated with a plausible skeleton whose every slot (metadata, name, labels,
annotations, spec and its fields, status, taints, conditions, capacity, List items) may instead
hold any nested mix of mappings, lists and scalars; some slots get a raw YAML fragment instead
(aliases, anchors, tags, deep nesting, bad syntax). The property: the command returns 0/1 (or
0 for plan) or exits 2 with only `error: FILE...` lines on standard error, one per problem —
never an uncaught exception.

Budget: derandomized (the same examples on every run) and small, a few seconds in CI:
`FUZZ_EXAMPLES` (120) examples per test. A deeper local run: `ACCELPOOL_FUZZ_EXAMPLES=5000`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from accelpool import cli

from .conftest import LOCAL_FIXTURE

FUZZ_EXAMPLES = int(os.environ.get("ACCELPOOL_FUZZ_EXAMPLES", "120"))
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

FRAGMENT = "FRAGMENT_HERE"
FRAGMENTS = [
    "*undefined",
    "&a [*a]",
    "&x [1, 2]",
    "!!set {a, b}",
    "!!omap [a: 1]",
    "!!binary aGk=",
    "!!python/name:os.system",
    "2026-13-45",
    "2026-11-01T00:00:00Z",
    "9" * 5000,
    "[" * 120 + "]" * 120,
    "{a: [1, {b: [}",
    '"\\e[31m\\u0000"',
    "{? [a]: b}",
    ".nan",
    "-.inf",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["H100:8", "3g.40gb", "50%", "15m", "Ready", "True", "NoSchedule", "", "-1", FRAGMENT]),
)
anything = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def slot(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually the plausible value, sometimes anything at all."""
    return st.one_of(plausible, plausible, anything)


def optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


string_map = st.dictionaries(
    st.sampled_from(["a", "nvidia.com/gpu.product", "accelpool.io/pool"]), anything, max_size=3
)
metadata = slot(
    optional(name=slot(st.sampled_from(["p", "n", "x" * 70])), labels=slot(string_map), annotations=slot(string_map))
)
spec = slot(
    optional(
        accelerator=slot(st.sampled_from(["H100:8", "A100", "L4"]) | optional(name=anything, memory=anything)),
        nodes=slot(st.integers(min_value=-2, max_value=5) | optional(min=anything, max=anything)),
        mig=slot(optional(profile=slot(st.sampled_from(["3g.40gb", "1g.10gb"])))),
        sharing=anything,
        health=slot(optional(interval=anything, remediation=anything, maxUnavailable=anything)),
        nodeSelector=slot(string_map),
    )
)
pool = optional(
    apiVersion=slot(st.just("accelpool.io/v1alpha1")),
    kind=slot(st.just("ComputePool")),
    metadata=metadata,
    spec=spec,
    status=anything,
)
taint = slot(optional(key=slot(st.just("k")), value=anything, effect=slot(st.just("NoSchedule")), timeAdded=anything))
condition = slot(
    optional(
        type=slot(st.sampled_from(["Ready", "AcceleratorHealthy"])),
        status=slot(st.sampled_from(["True", "False"])),
        reason=anything,
        message=anything,
        lastTransitionTime=anything,
    )
)
node = optional(
    apiVersion=slot(st.just("v1")),
    kind=slot(st.just("Node")),
    metadata=metadata,
    spec=slot(optional(taints=slot(st.lists(taint, max_size=3)), unschedulable=anything)),
    status=slot(
        optional(
            conditions=slot(st.lists(condition, max_size=3)),
            capacity=slot(st.dictionaries(st.just("nvidia.com/gpu"), anything, max_size=1)),
            allocatable=anything,
        )
    ),
)


def stream(objects: st.SearchStrategy[Any], list_kind: str) -> st.SearchStrategy[str]:
    """YAML text: a stream of documents or a List of them, with raw fragments spliced in."""
    documents = st.one_of(
        st.lists(slot(objects), max_size=3),
        st.builds(
            lambda items: [{"apiVersion": "v1", "kind": list_kind, "items": items}], slot(st.lists(objects, max_size=3))
        ),
    )

    def render(docs: list[Any], fragments: list[str]) -> str:
        text = yaml.safe_dump_all(docs, default_flow_style=True, allow_unicode=True)
        for fragment in fragments:
            text = text.replace(FRAGMENT, fragment, 1)
        return text

    return st.builds(render, documents, st.lists(st.sampled_from(FRAGMENTS), max_size=3))


def check(code: int, err: str, allowed: set[int], *paths: Path) -> None:
    event(f"exit {code}")
    assert code in allowed | {2}, (code, err)
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    if code == 2:
        assert errors, err
        assert all(any(line.startswith(f"error: {p}:") for p in paths) for line in errors), errors
    else:
        assert not errors, errors
    assert "Traceback" not in err


@FUZZ
@given(text=stream(pool, "ComputePoolList"))
def test_validate_never_crashes(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(text)
    code = cli.main(["validate", "-f", str(path)])
    check(code, capsys.readouterr().err, {0, 1}, path)


@FUZZ
@given(text=stream(pool, "List"))
def test_plan_never_crashes_on_pools(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(text)
    code = cli.main(
        ["plan", "-f", str(path), "--nodes", str(LOCAL_FIXTURE), "-o", "json", "--now", "2026-11-02T12:00:00Z"]
    )
    check(code, capsys.readouterr().err, {0}, path)


@FUZZ
@given(text=stream(node, "NodeList"))
def test_plan_never_crashes_on_nodes(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pools = tmp_path / "pools.yaml"
    pools.write_text(
        "apiVersion: accelpool.io/v1alpha1\nkind: ComputePool\nmetadata: {name: p}\nspec: {accelerator: H100:8}\n"
    )
    path = tmp_path / "nodes.yaml"
    path.write_text(text)
    code = cli.main(["plan", "-f", str(pools), "--nodes", str(path), "--now", "2026-11-02T12:00:00Z"])
    check(code, capsys.readouterr().err, {0}, path)
