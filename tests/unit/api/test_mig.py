"""MIG validation: every row of reference/mig-and-labels.md, the slice budgets, and the shorthand."""

from __future__ import annotations

import re

import pytest

import accelpool_api as api
from accelpool_api.validation import validate_spec
from accelpool_core import catalog

# The reference table, verbatim: "GPU | profiles × max instances per GPU". The GH200 rows carry `+me`, as
# NVIDIA's default mig-parted config lists them (`all-1g.12gb.me`, `all-1g.18gb.me` for GH200).
REFERENCE_ROWS = {
    "A30": "1g.6gb×4, 1g.6gb+me×1, 2g.12gb×2, 2g.12gb+me×1, 4g.24gb×1",
    "A100-40GB": "1g.5gb×7, 1g.5gb+me×1, 1g.10gb×4, 2g.10gb×3, 3g.20gb×2, 4g.20gb×1, 7g.40gb×1",
    "A100-80GB": "1g.10gb×7, 1g.10gb+me×1, 1g.20gb×4, 2g.20gb×3, 3g.40gb×2, 4g.40gb×1, 7g.80gb×1",
    "A100-80GB-PCIE": "1g.10gb×7, 1g.10gb+me×1, 1g.20gb×4, 2g.20gb×3, 3g.40gb×2, 4g.40gb×1, 7g.80gb×1",
    "H100-80GB": "1g.10gb×7, 1g.10gb+me×1, 1g.20gb×4, 2g.20gb×3, 3g.40gb×2, 4g.40gb×1, 7g.80gb×1",
    "H100-80GB-PCIE": "1g.10gb×7, 1g.10gb+me×1, 1g.20gb×4, 2g.20gb×3, 3g.40gb×2, 4g.40gb×1, 7g.80gb×1",
    "H100-94GB-NVL": "1g.12gb×7, 1g.12gb+me×1, 1g.24gb×4, 2g.24gb×3, 3g.47gb×2, 4g.47gb×1, 7g.94gb×1",
    "GH200-96GB": "1g.12gb×7, 1g.12gb+me×1, 1g.24gb×4, 2g.24gb×3, 3g.48gb×2, 4g.48gb×1, 7g.96gb×1",
    "H200-141GB": "1g.18gb×7, 1g.18gb+me×1, 1g.35gb×4, 2g.35gb×3, 3g.71gb×2, 4g.71gb×1, 7g.141gb×1",
    "GH200-144GB": "1g.18gb×7, 1g.18gb+me×1, 1g.36gb×4, 2g.36gb×3, 3g.72gb×2, 4g.72gb×1, 7g.144gb×1",
    "B200-180GB": "1g.23gb×7, 1g.23gb+me×1, 1g.45gb×4, 2g.45gb×3, 3g.90gb×2, 4g.90gb×1, 7g.180gb×1",
}
MEMORY_SLICES = {"1": 1, "2": 2, "3": 4, "4": 4, "7": 8}  # per compute size; the 1g double-memory variant takes 2
BUDGETS = {"A30": (4, 4)}  # compute and memory slices per GPU; (7, 8) for every other MIG-capable GPU

ROWS = [
    (gpu, profile, int(maximum))
    for gpu, text in REFERENCE_ROWS.items()
    for profile, maximum in (item.strip().split("×") for item in text.split(","))
]


def _spec(gpu: str, **mig: object) -> dict[str, object]:
    return {"accelerator": {"name": gpu}, "mig": mig}


def test_catalog_tables_are_the_reference_tables() -> None:
    for gpu, text in REFERENCE_ROWS.items():
        expected = [(p.strip().split("×")[0], int(p.strip().split("×")[1])) for p in text.split(",")]
        assert [(p.name, p.max_instances) for p in catalog.BY_NAME[gpu].mig_profiles] == expected, gpu


@pytest.mark.parametrize(("gpu", "profile", "maximum"), ROWS, ids=lambda v: str(v))
def test_reference_row(gpu: str, profile: str, maximum: int) -> None:
    entry = catalog.BY_NAME[gpu]
    found = entry.mig_profile(profile)
    assert found is not None and found.max_instances == maximum
    compute = int(profile[0])
    double = profile.startswith("1g") and maximum == 4 and gpu != "A30"  # the 1g variant with twice the memory
    assert found.compute_slices == compute
    assert found.memory_slices == (2 if double else MEMORY_SLICES[str(compute)] if gpu != "A30" else compute)
    assert (entry.mig_compute_slices, entry.mig_memory_slices) == BUDGETS.get(gpu, (7, 8))
    # The maximum itself is valid (when it fits the budgets), one more is not.
    fits = api.max_instances_that_fit(entry, found)
    assert validate_spec(_spec(gpu, profiles=[profile] * fits))[1] == ()
    assert validate_spec(_spec(gpu, profile=profile))[0] is not None
    if maximum < 7:
        problems = validate_spec(_spec(gpu, profiles=[profile] * (maximum + 1)))[1]
        assert any(f"at most {maximum} x {profile}" in p.message for p in problems), problems
    # A profile of this table is rejected on a GPU whose table lacks it, with the valid list.
    other = next(a for a in catalog.ACCELERATORS if a.mig_capable and a.mig_profile(profile) is None)
    problems = validate_spec(_spec(other.name, profile=profile))[1]
    assert [p.path for p in problems] == ["spec.mig.profile"]
    assert f"not offered by {other.mig_table}; valid: {other.mig_profiles[0].name}" in problems[0].message


@pytest.mark.parametrize(
    ("gpu", "layout", "fits"),
    [
        ("A100-40GB", ["4g.20gb", "3g.20gb"], True),  # 7 compute, 8 memory
        ("H100-80GB", ["4g.40gb", "4g.40gb"], False),  # 8 compute
        ("A100-40GB", ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"], True),  # mig-parted's "balanced"
        ("A100-80GB", ["3g.40gb", "3g.40gb", "1g.10gb"], False),  # 9 memory slices
        ("H200-141GB", ["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"], True),
        ("B200-180GB", ["7g.180gb", "1g.23gb"], False),
        ("A100-40GB", ["1g.5gb"] * 7, True),
        ("A100-40GB", ["1g.10gb"] * 4, True),
        # A30: 4 compute and 4 memory slices per GPU, not 7 and 8
        ("A30", ["2g.12gb", "1g.6gb", "1g.6gb"], True),  # mig-parted's A30 "balanced"
        ("A30", ["2g.12gb+me", "2g.12gb"], True),
        ("A30", ["1g.6gb+me", "1g.6gb", "1g.6gb", "1g.6gb"], True),
        ("A30", ["4g.24gb", "1g.6gb"], False),  # 5 of 4 compute
        ("A30", ["2g.12gb", "2g.12gb", "1g.6gb"], False),
        ("GH200-96GB", ["1g.12gb+me", "3g.48gb", "2g.24gb", "1g.12gb"], True),
        ("GH200-144GB", ["1g.18gb+me", "1g.18gb", "1g.18gb", "4g.72gb"], True),
    ],
)
def test_mixed_layouts_must_fit_both_budgets(gpu: str, layout: list[str], fits: bool) -> None:
    problems = validate_spec(_spec(gpu, profiles=layout))[1]
    assert (problems == ()) == fits, problems


@pytest.mark.parametrize(
    ("gpu", "profile", "expanded"),
    [
        ("H100", "3g.40gb", 2),
        ("H100", "1g.10gb", 7),
        ("H100", "1g.20gb", 4),
        ("H100", "2g.20gb", 3),
        ("A100-40GB", "4g.20gb", 1),
        ("H200", "7g.141gb", 1),
        ("H100", "1g.10gb+me", 1),
        ("A30", "1g.6gb", 4),
        ("A30", "2g.12gb", 2),
        ("GH200", "1g.12gb+me", 1),
        ("GH200-144GB", "1g.18gb+me", 1),
        ({"name": "H100", "formFactor": "NVL"}, "3g.47gb", 2),
    ],
)
def test_shorthand_fills_the_gpu(gpu: str | dict[str, str], profile: str, expanded: int) -> None:
    spec, problems = validate_spec({"accelerator": gpu, "mig": {"profile": profile}})
    assert spec is not None, problems
    assert spec.mig_layout() == [profile] * expanded
    assert spec.mig_strategy() == "single"


def test_strategy_defaults_to_mixed_for_several_types() -> None:
    spec, _ = validate_spec({"accelerator": "H100", "mig": {"profiles": ["3g.40gb", "2g.20gb"]}})
    assert spec is not None and spec.mig_strategy() == "mixed"


@pytest.mark.parametrize("name", [a.name for a in catalog.ACCELERATORS if not a.mig_capable])
def test_mig_only_on_mig_capable_gpus(name: str) -> None:
    problems = validate_spec({"accelerator": name, "mig": {"profile": "1g.10gb"}})[1]
    assert [p.path for p in problems] == ["spec.mig"]
    assert "does not support MIG" in problems[0].message


def test_profile_names_follow_the_pattern() -> None:
    for entry in catalog.ACCELERATORS:
        for profile in entry.mig_profiles:
            assert re.fullmatch(api.MIG_PROFILE_PATTERN, profile.name), profile.name
