"""The accelerator catalog: coverage of DESIGN.md's list, facts from reference/hardware.md, lookups."""

from __future__ import annotations

import pytest

from accelpool_core import catalog

Row = tuple[str, int, float, float | None, float | None, float | None, float | None, float]

# (catalog name, memory GB, fp32, tf32, fp16, bf16, fp8, bandwidth GB/s) — reference/hardware.md, dense.
HARDWARE_TABLE: list[Row] = [
    ("T4", 16, 8.1, None, 65, None, None, 320),
    ("L4", 24, 30.3, 60, 121, 121, 242.5, 300),
    ("L40S", 48, 91.6, 183, 362, 362, 733, 864),
    ("A10G", 24, 31.2, 35, 70, 70, None, 600),
    ("A30", 24, 10.3, 82, 165, 165, None, 933),  # NVIDIA's A30 datasheet [vendor], not in hardware.md
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

# (catalog name, memory GB, fp32, tf32, fp16, bf16, fp8, bandwidth GB/s) for parts hardware.md lacks, from
# the vendor: AWS Neuron docs' Trainium, Trainium2 and Inferentia2 Architecture pages (per chip:
# "190 FP16/BF16/cFP8/TF32 TFLOPS, and 47.5 FP32"; Trainium2 "1,299 FP8, 667 BF16/FP16/TF32, 181 FP32");
# AMD's MI250X product page per package (matrix FP32 95.7, FP16/BF16 383, no TF32 or FP8; 128 GB,
# 3,276.8 GB/s) halved to one GCD, the unit `amd.com/gpu` counts (OLCF Frontier user guide: "each GPU
# contains 64 GB ... at a peak bandwidth of 1.6 TB/s"); Cloud TPU pages (bf16 only of these dtypes).
VENDOR_TABLE: list[Row] = [
    ("Trainium", 32, 47.5, 190, 190, 190, 190, 820),
    ("Trainium2", 96, 181, 667, 667, 667, 1299, 2900),
    ("Inferentia2", 32, 47.5, 190, 190, 190, 190, 820),
    ("MI250X", 64, 47.85, None, 191.5, 191.5, None, 1638.4),
    ("TPU-v5e", 16, 98.5, None, None, 197, None, 819),
    ("TPU-v5p", 95, 229.5, None, None, 459, None, 2765),
    ("TPU-v6e", 32, 459, None, None, 918, None, 1640),
]

DESIGN_LIST = [
    "T4", "L4", "L40S", "A10G", "V100", "A100-40GB", "A100-80GB", "H100", "H100-PCIe", "H100-NVL", "H200", "GH200",
    "B200", "MI250X", "MI300X", "Trainium", "Trainium2", "Inferentia2", "TPU-v5e", "TPU-v5p", "TPU-v6e",
]  # fmt: skip


@pytest.mark.parametrize("row", HARDWARE_TABLE + VENDOR_TABLE, ids=lambda r: r[0])
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


# NVIDIA's "CUDA GPUs" page (developer.nvidia.com/cuda-gpus): compute capability per model.
COMPUTE_CAPABILITY = {
    "T4": "7.5", "L4": "8.9", "L40S": "8.9", "A10G": "8.6", "V100": "7.0", "A30": "8.0", "A100": "8.0",
    "H100": "9.0", "H200": "9.0", "GH200": "9.0", "B200": "10.0",
}  # fmt: skip


def test_every_nvidia_gpu_has_its_compute_capability() -> None:
    for entry in catalog.ACCELERATORS:
        if entry.vendor == catalog.Vendor.NVIDIA:
            assert entry.compute_capability_text == COMPUTE_CAPABILITY[entry.model], entry.name
        else:
            assert entry.compute_capability is None, entry.name


def test_a30() -> None:
    a30 = catalog.lookup("nvidia-a30")
    assert (a30.name, a30.memory_gb, a30.form_factor, a30.tdp_watts) == ("A30", 24, catalog.FormFactor.PCIE, 165)
    assert a30.detection.gfd_products == ("NVIDIA-A30",)
    assert not a30.detection.karpenter_names and not a30.detection.instance_types, "no AWS instance has an A30"
    assert (a30.mig_table, a30.mig_compute_slices, a30.mig_memory_slices) == ("A30-24GB", 4, 4)


def test_slice_budgets_belong_to_each_gpu() -> None:
    for entry in catalog.ACCELERATORS:
        if not entry.mig_capable:
            assert (entry.mig_compute_slices, entry.mig_memory_slices) == (0, 0), entry.name
            continue
        for profile in entry.mig_profiles:
            assert profile.compute_slices <= entry.mig_compute_slices, (entry.name, profile.name)
            assert profile.memory_slices <= entry.mig_memory_slices, (entry.name, profile.name)
    assert not hasattr(catalog, "MIG_COMPUTE_SLICES"), "no global budget: the A30 has 4 slices, not 7"


def test_every_hopper_and_blackwell_gpu_offers_a_media_extension_profile() -> None:
    """GH200 included: NVIDIA's default mig-parted config lists all-1g.12gb.me and all-1g.18gb.me for it."""
    for entry in catalog.ACCELERATORS:
        if entry.mig_capable:
            media = [p for p in entry.mig_profiles if p.name.endswith("+me")]
            assert media and all(p.max_instances == 1 for p in media), entry.name
    assert catalog.BY_NAME["GH200-96GB"].mig_profile("1g.12gb+me") is not None
    assert catalog.BY_NAME["GH200-144GB"].mig_profile("1g.18gb+me") is not None


def test_a_mig_table_that_does_not_fit_its_gpu_is_refused() -> None:
    with pytest.raises(AssertionError, match="slice budgets"):
        catalog.Accelerator(
            name="X",
            model="X",
            vendor=catalog.Vendor.NVIDIA,
            memory_gb=1,
            form_factor=catalog.FormFactor.PCIE,
            peaks=catalog.Peaks(fp32=1, tf32=None, fp16=2, bf16=None, fp8=None),
            bandwidth_gbps=1,
            tdp_watts=1,
            resource=catalog.NVIDIA_GPU,
            detection=catalog.Detection(),
            mig_profiles=(catalog.MigProfile("1g.1gb", 1, 1, 1),),
        )


def test_dtype_support_is_read_from_the_peaks() -> None:
    """One statement of support: a dtype with a peak. The parts the issue named lack these modes."""
    lacking = {
        "bf16": {"T4", "V100-16GB", "V100-32GB"},
        "fp8": {"T4", "V100-16GB", "V100-32GB", "A10G", "A30", "A100-40GB", "A100-80GB", "A100-80GB-PCIE", "MI250X"},
    }
    for dtype, names in lacking.items():
        for name in names:
            entry = catalog.BY_NAME[name]
            assert not entry.supports(dtype) and catalog.Dtype(dtype) not in entry.peaks.dtypes, (name, dtype)
    assert catalog.BY_NAME["H100-80GB"].peaks.dtypes == tuple(catalog.Dtype)
    assert catalog.BY_NAME["T4"].peaks.dtypes == (catalog.Dtype.FP32, catalog.Dtype.FP16)
    for tpu in ("TPU-v5e", "TPU-v5p", "TPU-v6e"):
        assert catalog.BY_NAME[tpu].peaks.dtypes == (catalog.Dtype.FP32, catalog.Dtype.BF16), tpu


def test_only_inferentia2_is_inference_only() -> None:
    """AWS: Inferentia2 is "purpose-built ... inference"; the Neuron SDK trains on Trn instances only."""
    assert [e.name for e in catalog.ACCELERATORS if not e.training] == ["Inferentia2"]
    assert catalog.lookup("inf2").source.count("inference accelerator") == 1


def test_mi250x_is_described_per_gcd() -> None:
    """`amd.com/gpu` counts GCDs: one unit of the catalog entry is half a package."""
    mi250x = catalog.lookup("MI250X")
    assert (mi250x.memory_gb, mi250x.units_per_package, mi250x.resource) == (64, 2, catalog.AMD_GPU)
    assert mi250x.memory_gb * mi250x.units_per_package == 128
    assert mi250x.peaks.bf16 is not None and mi250x.peaks.bf16 * mi250x.units_per_package == 383
    assert all(e.units_per_package == 1 for e in catalog.ACCELERATORS if e.name != "MI250X")
