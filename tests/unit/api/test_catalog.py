"""The accelerator catalog: coverage of DESIGN.md's list, facts from reference/hardware.md, lookups."""

from __future__ import annotations

import pytest

from accelpool import catalog

# (catalog name, memory GB, fp32, tf32, fp16, bf16, fp8, bandwidth GB/s) — reference/hardware.md, dense.
HARDWARE_TABLE = [
    ("T4", 16, 8.1, None, 65, None, None, 320),
    ("L4", 24, 30.3, 60, 121, 121, 242.5, 300),
    ("L40S", 48, 91.6, 183, 362, 362, 733, 864),
    ("A10G", 24, 31.2, 35, 70, 70, None, 600),
    ("V100-16GB", 16, 15.7, None, 125, None, None, 900),
    ("V100-32GB", 32, 15.7, None, 125, None, None, 900),
    ("A100-40GB", 40, 19.5, 156, 312, 312, None, 1555),
    ("A100-80GB", 80, 19.5, 156, 312, 312, None, 2039),
    ("A100-80GB-PCIE", 80, 19.5, 156, 312, 312, None, 1935),
    ("H100-80GB", 80, 67, 494.5, 989, 989, 1979, 3350),
    ("H100-80GB-PCIE", 80, 51, 378, 756, 756, 1513, 2000),
    ("H100-94GB-NVL", 94, 60, 417.5, 835.5, 835.5, 1670.5, 3900),
    ("H200-141GB", 141, 67, 494.5, 989, 989, 1979, 4800),
    ("B200-180GB", 180, 75, 1125, 2250, 2250, 4500, 7700),
    ("MI300X", 192, 163.4, 653.7, 1307, 1307, 2615, 5300),
]

DESIGN_LIST = [
    "T4", "L4", "L40S", "A10G", "V100", "A100-40GB", "A100-80GB", "H100", "H100-PCIe", "H100-NVL", "H200", "GH200",
    "B200", "MI250X", "MI300X", "Trainium", "Trainium2", "Inferentia2", "TPU-v5e", "TPU-v5p", "TPU-v6e",
]  # fmt: skip


@pytest.mark.parametrize("row", HARDWARE_TABLE, ids=lambda r: r[0])
def test_peaks_and_bandwidth_match_the_reference(row: tuple[object, ...]) -> None:
    name, memory, fp32, tf32, fp16, bf16, fp8, bandwidth = row
    entry = catalog.BY_NAME[str(name)]
    assert entry.memory_gb == memory
    assert (entry.peaks.fp32, entry.peaks.tf32, entry.peaks.fp16, entry.peaks.bf16, entry.peaks.fp8) == (
        fp32, tf32, fp16, bf16, fp8,
    )  # fmt: skip
    assert entry.bandwidth_gbps == bandwidth


@pytest.mark.parametrize("name", DESIGN_LIST)
def test_every_accelerator_of_the_design_is_known(name: str) -> None:
    assert catalog.lookup(name)


def test_every_entry_cites_its_source_and_has_sane_numbers() -> None:
    for entry in catalog.ACCELERATORS:
        assert entry.source.startswith("["), entry.name
        assert entry.memory_gb > 0 and entry.bandwidth_gbps > 0 and entry.tdp_watts > 0
        half = entry.peaks.bf16 or entry.peaks.fp16
        assert half is not None and half > entry.peaks.fp32, entry.name
        assert entry.resource in {catalog.NVIDIA_GPU, catalog.AMD_GPU, catalog.AWS_NEURON, catalog.GOOGLE_TPU}


def test_resources_follow_the_vendor() -> None:
    expected = {
        catalog.Vendor.NVIDIA: catalog.NVIDIA_GPU,
        catalog.Vendor.AMD: catalog.AMD_GPU,
        catalog.Vendor.AWS: catalog.AWS_NEURON,
        catalog.Vendor.GOOGLE: catalog.GOOGLE_TPU,
    }
    for entry in catalog.ACCELERATORS:
        assert entry.resource == expected[entry.vendor], entry.name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("H100", "H100-80GB"),
        ("h100", "H100-80GB"),
        ("h100-sxm", "H100-80GB"),
        ("nvidia-h100-80gb", "H100-80GB"),
        ("H100 PCIe", "H100-80GB-PCIE"),
        ("h100_nvl", "H100-94GB-NVL"),
        ("A100", "A100-40GB"),
        ("a100-80gb", "A100-80GB"),
        ("nvidia-tesla-t4", "T4"),
        ("tpu-v5p", "TPU-v5p"),
        ("Trillium", "TPU-v6e"),
        ("trn2", "Trainium2"),
        ("instinct-mi300x", "MI300X"),
    ],
)
def test_lookup_is_case_insensitive_with_aliases(text: str, expected: str) -> None:
    assert catalog.lookup(text).name == expected


@pytest.mark.parametrize(
    ("typo", "closest"),
    [("H1000", "H100-80GB"), ("a100-80", "A100-80GB"), ("L40", "L40S"), ("mi300", "MI300X"), ("tranium2", "Trainium2")],
)
def test_unknown_names_get_the_closest_known_names(typo: str, closest: str) -> None:
    with pytest.raises(catalog.UnknownAcceleratorError) as raised:
        catalog.lookup(typo)
    assert closest in raised.value.suggestions
    assert closest in str(raised.value)


def test_no_alias_names_two_entries() -> None:
    seen: dict[str, str] = {}
    for entry in catalog.ACCELERATORS:
        for alias in (entry.name, *entry.aliases):
            key = alias.lower()
            assert seen.setdefault(key, entry.name) == entry.name, alias


def test_variants_share_model_and_memory() -> None:
    h100 = catalog.lookup("H100")
    assert [a.name for a in catalog.variants(h100)] == ["H100-80GB", "H100-80GB-PCIE"]
    assert catalog.find("H100", 94) == [catalog.BY_NAME["H100-94GB-NVL"]]
