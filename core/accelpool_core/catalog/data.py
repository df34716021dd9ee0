"""The catalog's entries: every accelerator accelpool knows, each value with its source (the tags
are explained in the package docstring). Declarative data; `index` looks entries up."""

from __future__ import annotations

from accelpool_core.catalog.model import (
    Accelerator,
    Detection,
    FormFactor,
    MigProfile,
    Peaks,
    Vendor,
)


def _mig_table(one: str, one_double: str, two: str, three: str, four: str, seven: str) -> tuple[MigProfile, ...]:
    """The 7-slice MIG table shape shared by A100/H100/H200/GH200/B200 [mig].

    1g takes 1 memory slice (its double-memory variant 2), 2g 2, 3g 4, 4g 4, 7g 8; `+me` x1.
    """
    profiles = [MigProfile(one, 1, 1, 7), MigProfile(f"{one}+me", 1, 1, 1)]
    profiles += [
        MigProfile(one_double, 1, 2, 4),
        MigProfile(two, 2, 2, 3),
        MigProfile(three, 3, 4, 2),
        MigProfile(four, 4, 4, 1),
        MigProfile(seven, 7, 8, 1),
    ]
    return tuple(profiles)


MIG_A100_40GB = _mig_table("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
MIG_80GB = _mig_table("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
MIG_H100_94GB = _mig_table("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb")
# GH200 offers `+me` like every other Hopper part: NVIDIA's default mig-parted config [parted] lists
# `all-1g.12gb.me` for "H100 NVL, H800 NVL, GH200" and `all-1g.18gb.me` for "H200-141GB, GH200 144G HBM3e".
MIG_GH200_96GB = _mig_table("1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb")
MIG_H200_141GB = _mig_table("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")
MIG_GH200_144GB = _mig_table("1g.18gb", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb")
MIG_B200_180GB = _mig_table("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb")

MIG_A30_24GB = (
    # [mig] A30-24GB row; the same profiles and counts as the `# A30-24GB` entries of [parted].
    MigProfile("1g.6gb", 1, 1, 4),
    MigProfile("1g.6gb+me", 1, 1, 1),
    MigProfile("2g.12gb", 2, 2, 2),
    MigProfile("2g.12gb+me", 2, 2, 1),
    MigProfile("4g.24gb", 4, 4, 1),
)

_TPU_MODES = "bf16 (and int8) only: no fp16 or fp8 mode; fp32 unpublished, half of bf16 (estimate)"
"""What Cloud TPU pages state of the dtypes: a bf16 and an int8 peak per chip, nothing else."""

NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
AWS_NEURON = "aws.amazon.com/neuron"
GOOGLE_TPU = "google.com/tpu"

ACCELERATORS: tuple[Accelerator, ...] = (
    # ---------------------------------------------------------------- NVIDIA, not MIG-capable
    Accelerator(
        name="T4",
        model="T4",
        vendor=Vendor.NVIDIA,
        compute_capability=(7, 5),  # [cc]
        memory_gb=16,
        form_factor=FormFactor.PCIE,
        peaks=Peaks(fp32=8.1, tf32=None, fp16=65, bf16=None, fp8=None),
        bandwidth_gbps=320,
        tdp_watts=70,
        resource=NVIDIA_GPU,
        detection=Detection(
            gfd_products=("Tesla-T4",),
            gke_accelerators=("nvidia-tesla-t4",),
            karpenter_names=("t4",),
            instance_types={"g4dn.xlarge": 1, "g4dn.12xlarge": 4, "g4dn.metal": 8},
        ),
        aliases=("tesla-t4", "nvidia-tesla-t4"),
        default_count=1,
        source="[hw] peaks and bandwidth; [vendor] 70 W board power; [lbl] labels",
    ),
    Accelerator(
        name="L4",
        model="L4",
        vendor=Vendor.NVIDIA,
        compute_capability=(8, 9),  # [cc]
        memory_gb=24,
        form_factor=FormFactor.PCIE,
        peaks=Peaks(fp32=30.3, tf32=60, fp16=121, bf16=121, fp8=242.5),
        bandwidth_gbps=300,
        tdp_watts=72,
        resource=NVIDIA_GPU,
        detection=Detection(
            gfd_products=("NVIDIA-L4",),
            gke_accelerators=("nvidia-l4",),
            karpenter_names=("l4",),
            instance_types={
                "g6.xlarge": 1,
                "g6.12xlarge": 4,
                "g6.48xlarge": 8,
                "g2-standard-8": 1,
                "g2-standard-48": 4,
                "g2-standard-96": 8,
            },
        ),
        aliases=("nvidia-l4",),
        default_count=1,
        source="[hw] peaks and bandwidth; [vendor] 72 W board power; [lbl] labels",
    ),
    Accelerator(
        name="L40S",
        model="L40S",
        vendor=Vendor.NVIDIA,
        compute_capability=(8, 9),  # [cc]
        memory_gb=48,
        form_factor=FormFactor.PCIE,
        peaks=Peaks(fp32=91.6, tf32=183, fp16=362, bf16=362, fp8=733),
        bandwidth_gbps=864,
        tdp_watts=350,
        resource=NVIDIA_GPU,
        detection=Detection(
            gfd_products=("NVIDIA-L40S",),
            gke_accelerators=("nvidia-l40s",),
            karpenter_names=("l40s",),
            instance_types={"g6e.xlarge": 1, "g6e.12xlarge": 4, "g6e.48xlarge": 8},
        ),
        aliases=("nvidia-l40s",),
        default_count=4,
        source="[hw] peaks and bandwidth; [vendor] 350 W board power; [lbl] labels",
    ),
    Accelerator(
        name="A10G",
        model="A10G",
        vendor=Vendor.NVIDIA,
        compute_capability=(8, 6),  # [cc]
        memory_gb=24,
        form_factor=FormFactor.PCIE,
        peaks=Peaks(fp32=31.2, tf32=35, fp16=70, bf16=70, fp8=None),
        bandwidth_gbps=600,
        tdp_watts=150,
        resource=NVIDIA_GPU,
        detection=Detection(
            gfd_products=("NVIDIA-A10G",),
            karpenter_names=("a10g",),
            instance_types={"g5.xlarge": 1, "g5.12xlarge": 4, "g5.48xlarge": 8},
        ),
        aliases=("nvidia-a10g",),
        default_count=1,
        source="[hw]† AWS publishes no datasheet: approximate peaks; [vendor] 150 W; [lbl] labels",
    ),
    Accelerator(
        name="V100-16GB",
        model="V100",
        vendor=Vendor.NVIDIA,
        compute_capability=(7, 0),  # [cc]
        memory_gb=16,
        form_factor=FormFactor.SXM,
        peaks=Peaks(fp32=15.7, tf32=None, fp16=125, bf16=None, fp8=None),
        bandwidth_gbps=900,
        tdp_watts=300,
        resource=NVIDIA_GPU,
        detection=Detection(
            gfd_products=("Tesla-V100-SXM2-16GB",),
            gke_accelerators=("nvidia-tesla-v100",),
            karpenter_names=("v100",),
            karpenter_memory_mib=(15000, 17000),
            instance_types={"p3.2xlarge": 1, "p3.8xlarge": 4, "p3.16xlarge": 8},
        ),
        aliases=("v100", "tesla-v100", "nvidia-tesla-v100", "v100-sxm2"),
        source="[hw] V100 SXM2 peaks and bandwidth; [vendor] 300 W; [lbl] labels",
    ),
    Accelerator(
        name="V100-32GB",
        model="V100",
        vendor=Vendor.NVIDIA,
        compute_capability=(7, 0),  # [cc]
        memory_gb=32,
        form_factor=FormFactor.SXM,
        peaks=Peaks(fp32=15.7, tf32=None, fp16=125, bf16=None, fp8=None),
        bandwidth_gbps=900,
        tdp_watts=300,
        resource=NVIDIA_GPU,
        detection=Detection(
            gfd_products=("Tesla-V100-SXM2-32GB",),
            karpenter_names=("v100",),
            karpenter_memory_mib=(30000, 34000),
            instance_types={"p3dn.24xlarge": 8},
        ),
        aliases=("v100-sxm2-32gb",),
        source="[hw] V100 SXM2 peaks and bandwidth; [vendor] 300 W; [lbl] labels",
    ),
    # ---------------------------------------------------------------- NVIDIA Ampere, MIG-capable
    Accelerator(
        name="A30",
        model="A30",
        vendor=Vendor.NVIDIA,
        compute_capability=(8, 0),  # [cc]
        memory_gb=24,
        form_factor=FormFactor.PCIE,
        peaks=Peaks(fp32=10.3, tf32=82, fp16=165, bf16=165, fp8=None),
        bandwidth_gbps=933,
        tdp_watts=165,
        resource=NVIDIA_GPU,
        detection=Detection(gfd_products=("NVIDIA-A30",)),
        aliases=("a30-24gb", "nvidia-a30"),
        mig_profiles=MIG_A30_24GB,
        mig_table="A30-24GB",
        mig_compute_slices=4,  # [mig]
        mig_memory_slices=4,
        default_count=4,
        source=(
            "[vendor] NVIDIA A30 datasheet (dense: FP64 5.2, FP32 10.3, TF32 82, FP16/BF16 165 TFLOPS; "
            "24 GB HBM2, 933 GB/s; 165 W; PCIe); [mig] A30-24GB, confirmed by [parted]; [lbl] GFD name"
        ),
    ),
    Accelerator(
        name="A100-40GB",
        model="A100",
        vendor=Vendor.NVIDIA,
        compute_capability=(8, 0),  # [cc]
        memory_gb=40,
        form_factor=FormFactor.SXM,
        peaks=Peaks(fp32=19.5, tf32=156, fp16=312, bf16=312, fp8=None),
        bandwidth_gbps=1555,
        tdp_watts=400,
        resource=NVIDIA_GPU,
        detection=Detection(
            gfd_products=("NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"),
            gke_accelerators=("nvidia-tesla-a100",),
            karpenter_names=("a100",),
            karpenter_memory_mib=(39000, 41984),
            instance_types={"p4d.24xlarge": 8, "a2-highgpu-1g": 1, "a2-highgpu-8g": 8},
        ),
        aliases=("a100", "a100-sxm4-40gb", "nvidia-tesla-a100", "nvidia-a100-40gb"),
        mig_profiles=MIG_A100_40GB,
        mig_table="A100-40GB",
        mig_compute_slices=7,  # [mig]
        mig_memory_slices=8,
        source="[hw] A100 40GB peaks and bandwidth; [vendor] 400 W SXM; [mig] A100-40GB; [lbl] labels",
    ),
    Accelerator(
        name="A100-80GB",
        model="A100",
        vendor=Vendor.NVIDIA,
        compute_capability=(8, 0),  # [cc]
        memory_gb=80,
        form_factor=FormFactor.SXM,
        peaks=Peaks(fp32=19.5, tf32=156, fp16=312, bf16=312, fp8=None),
        bandwidth_gbps=2039,
        tdp_watts=400,
        resource=NVIDIA_GPU,
        detection=Detection(
            gfd_products=("NVIDIA-A100-SXM4-80GB",),
            gke_accelerators=("nvidia-a100-80gb",),
            karpenter_names=("a100",),
            karpenter_memory_mib=(79000, 82000),
            instance_types={"p4de.24xlarge": 8, "a2-ultragpu-1g": 1, "a2-ultragpu-8g": 8},
        ),
        aliases=("a100-sxm4-80gb", "nvidia-a100-80gb"),
        mig_profiles=MIG_80GB,
        mig_table="A100-80GB",
        mig_compute_slices=7,  # [mig]
        mig_memory_slices=8,
        source="[hw] A100 80GB SXM peaks, 2,039 GB/s; [vendor] 400 W; [mig] A100-80GB; [lbl] labels",
    ),
    Accelerator(
        name="A100-80GB-PCIE",
        model="A100",
        vendor=Vendor.NVIDIA,
        compute_capability=(8, 0),  # [cc]
        memory_gb=80,
        form_factor=FormFactor.PCIE,
        peaks=Peaks(fp32=19.5, tf32=156, fp16=312, bf16=312, fp8=None),
        bandwidth_gbps=1935,
        tdp_watts=300,
        resource=NVIDIA_GPU,
        detection=Detection(gfd_products=("NVIDIA-A100-PCIE-80GB", "NVIDIA-A100-80GB-PCIe")),
        aliases=("a100-pcie-80gb",),
        mig_profiles=MIG_80GB,
        mig_table="A100-80GB",
        mig_compute_slices=7,  # [mig]
        mig_memory_slices=8,
        source="[hw] A100 80GB PCIe peaks, 1,935 GB/s; [vendor] 300 W; [mig] A100-80GB",
    ),
    # ---------------------------------------------------------------- NVIDIA Hopper
    Accelerator(
        name="H100-80GB",
        model="H100",
        vendor=Vendor.NVIDIA,
        compute_capability=(9, 0),  # [cc]
        memory_gb=80,
        form_factor=FormFactor.SXM,
        peaks=Peaks(fp32=67, tf32=494.5, fp16=989, bf16=989, fp8=1979),
        bandwidth_gbps=3350,
        tdp_watts=700,
        resource=NVIDIA_GPU,
        detection=Detection(
            gfd_products=("NVIDIA-H100-80GB-HBM3",),
            gke_accelerators=("nvidia-h100-80gb", "nvidia-h100-mega-80gb"),
            karpenter_names=("h100",),
            karpenter_memory_mib=(79000, 82000),
            instance_types={"p5.48xlarge": 8, "p5.4xlarge": 1},
        ),
        aliases=("h100", "h100-sxm", "h100-sxm5", "h100-80gb-sxm", "nvidia-h100-80gb", "nvidia-h100"),
        mig_profiles=MIG_80GB,
        mig_table="H100-80GB",
        mig_compute_slices=7,  # [mig]
        mig_memory_slices=8,
        source="[hw] H100 SXM peaks and 3.35 TB/s; [vendor] 700 W; [mig] H100-80GB; [lbl] labels",
    ),
    Accelerator(
        name="H100-80GB-PCIE",
        model="H100",
        vendor=Vendor.NVIDIA,
        compute_capability=(9, 0),  # [cc]
        memory_gb=80,
        form_factor=FormFactor.PCIE,
        peaks=Peaks(fp32=51, tf32=378, fp16=756, bf16=756, fp8=1513),
        bandwidth_gbps=2000,
        tdp_watts=350,
        resource=NVIDIA_GPU,
        detection=Detection(gfd_products=("NVIDIA-H100-PCIe",)),
        aliases=("h100-pcie",),
        mig_profiles=MIG_80GB,
        mig_table="H100-80GB",
        mig_compute_slices=7,  # [mig]
        mig_memory_slices=8,
        source="[hw] H100 PCIe peaks and 2.0 TB/s; [vendor] 350 W; [mig] H100-80GB",
    ),
    Accelerator(
        name="H100-94GB-NVL",
        model="H100",
        vendor=Vendor.NVIDIA,
        compute_capability=(9, 0),  # [cc]
        memory_gb=94,
        form_factor=FormFactor.NVL,
        peaks=Peaks(fp32=60, tf32=417.5, fp16=835.5, bf16=835.5, fp8=1670.5),
        bandwidth_gbps=3900,
        tdp_watts=400,
        resource=NVIDIA_GPU,
        detection=Detection(gfd_products=("NVIDIA-H100-NVL",)),
        aliases=("h100-nvl", "h100-94gb"),
        mig_profiles=MIG_H100_94GB,
        mig_table="H100-94GB",
        mig_compute_slices=7,  # [mig]
        mig_memory_slices=8,
        default_count=2,
        source="[hw] H100 NVL peaks and 3.9 TB/s; [vendor] 400 W; [mig] H100-94GB",
    ),
    Accelerator(
        name="H200-141GB",
        model="H200",
        vendor=Vendor.NVIDIA,
        compute_capability=(9, 0),  # [cc]
        memory_gb=141,
        form_factor=FormFactor.SXM,
        peaks=Peaks(fp32=67, tf32=494.5, fp16=989, bf16=989, fp8=1979),
        bandwidth_gbps=4800,
        tdp_watts=700,
        resource=NVIDIA_GPU,
        detection=Detection(
            gfd_products=("NVIDIA-H200",),
            gke_accelerators=("nvidia-h200-141gb",),
            karpenter_names=("h200",),
            instance_types={"p5e.48xlarge": 8, "p5en.48xlarge": 8},
        ),
        aliases=("h200", "h200-sxm", "nvidia-h200-141gb"),
        mig_profiles=MIG_H200_141GB,
        mig_table="H200-141GB",
        mig_compute_slices=7,  # [mig]
        mig_memory_slices=8,
        source="[hw] H200 SXM peaks and 4.8 TB/s; [vendor] 700 W; [mig] H200-141GB; [lbl] labels",
    ),
    Accelerator(
        name="GH200-96GB",
        model="GH200",
        vendor=Vendor.NVIDIA,
        compute_capability=(9, 0),  # [cc]
        memory_gb=96,
        form_factor=FormFactor.SUPERCHIP,
        peaks=Peaks(fp32=67, tf32=494.5, fp16=989, bf16=989, fp8=1979),
        bandwidth_gbps=4000,
        tdp_watts=900,
        resource=NVIDIA_GPU,
        detection=Detection(gfd_products=("NVIDIA-GH200-480GB", "NVIDIA-GH200-96GB-HBM3")),
        aliases=("gh200",),
        mig_profiles=MIG_GH200_96GB,
        mig_table="H100-96GB",
        mig_compute_slices=7,  # [mig]
        mig_memory_slices=8,
        default_count=1,
        source="[mamf] bf16 peak from 828.6 TFLOPS = 83.8%; [vendor] 4 TB/s, 900 W module; [mig] H100-96GB",
    ),
    Accelerator(
        name="GH200-144GB",
        model="GH200",
        vendor=Vendor.NVIDIA,
        compute_capability=(9, 0),  # [cc]
        memory_gb=144,
        form_factor=FormFactor.SUPERCHIP,
        peaks=Peaks(fp32=67, tf32=494.5, fp16=989, bf16=989, fp8=1979),
        bandwidth_gbps=4900,
        tdp_watts=1000,
        resource=NVIDIA_GPU,
        detection=Detection(gfd_products=("NVIDIA-GH200-144G-HBM3e", "NVIDIA-GH200-144GB-HBM3e")),
        aliases=("gh200-144gb",),
        mig_profiles=MIG_GH200_144GB,
        mig_table="GH200-144GB",
        mig_compute_slices=7,  # [mig]
        mig_memory_slices=8,
        default_count=1,
        source="[mamf] bf16 peak as GH200-96GB; [vendor]† 4.9 TB/s, 1000 W; [mig] GH200-144GB (weaker source)",
    ),
    # ---------------------------------------------------------------- NVIDIA Blackwell
    Accelerator(
        name="B200-180GB",
        model="B200",
        vendor=Vendor.NVIDIA,
        compute_capability=(10, 0),  # [cc]
        memory_gb=180,
        form_factor=FormFactor.SXM,
        peaks=Peaks(fp32=75, tf32=1125, fp16=2250, bf16=2250, fp8=4500),
        bandwidth_gbps=7700,
        tdp_watts=1000,
        resource=NVIDIA_GPU,
        detection=Detection(
            gfd_products=("NVIDIA-B200",),
            gke_accelerators=("nvidia-b200",),
            karpenter_names=("b200",),
            instance_types={"p6-b200.48xlarge": 8},
        ),
        aliases=("b200", "nvidia-b200"),
        mig_profiles=MIG_B200_180GB,
        mig_table="B200-180GB",
        mig_compute_slices=7,  # [mig]
        mig_memory_slices=8,
        source="[hw] B200 HGX per-GPU peaks (TF32 approximate) and 7.7 TB/s; [vendor] 1000 W; [mig] B200-180GB",
    ),
    # ---------------------------------------------------------------- AMD
    Accelerator(
        name="MI250X",
        model="MI250X",
        vendor=Vendor.AMD,
        # One GCD, the unit `amd.com/gpu` counts: the package's two dies are two PCI functions, and
        # ROCm/k8s-device-plugin `internal/pkg/amdgpu/amdgpu.go` `GetAMDGPUs` makes one device of each;
        # ROCr and Slurm treat each GCD as a GPU with 64 GB at 1.6 TB/s (OLCF Frontier user guide,
        # olcf/olcf-user-docs `systems/frontier_user_guide.rst`, "AMD GPUs"). The package: 128 GB,
        # 3.2768 TB/s, 560 W, matrix FP32 95.7 and FP16/BF16 383 TFLOPS; each GCD half of it.
        memory_gb=64,
        form_factor=FormFactor.OAM,
        peaks=Peaks(fp32=47.85, tf32=None, fp16=191.5, bf16=191.5, fp8=None),
        bandwidth_gbps=1638.4,
        tdp_watts=280,
        resource=AMD_GPU,
        detection=Detection(amd_products=("Instinct_MI250X", "Instinct_MI250X_MI250")),
        aliases=("instinct-mi250x", "amd-mi250x"),
        units_per_package=2,
        source=(
            "[vendor]† AMD Instinct MI250X product page, halved per GCD (package: matrix FP32 95.7, "
            "FP16/BF16 383 TFLOPS, no TF32 or FP8 mode (CDNA 2); 128 GB HBM2e, 3.2768 TB/s, 560 W); "
            "GCD = one amd.com/gpu: ROCm/k8s-device-plugin GetAMDGPUs, OLCF Frontier user guide"
        ),
    ),
    Accelerator(
        name="MI300X",
        model="MI300X",
        vendor=Vendor.AMD,
        memory_gb=192,
        form_factor=FormFactor.OAM,
        peaks=Peaks(fp32=163.4, tf32=653.7, fp16=1307, bf16=1307, fp8=2615),
        bandwidth_gbps=5300,
        tdp_watts=750,
        resource=AMD_GPU,
        detection=Detection(
            amd_products=("Instinct_MI300X", "Instinct_MI300X_OAM"),
            instance_types={"ND96isr_MI300X_v5": 8, "Standard_ND96isr_MI300X_v5": 8},
        ),
        aliases=("instinct-mi300x", "amd-mi300x"),
        source="[hw] AMD MI300X product page figures; [vendor] 750 W",
    ),
    # ---------------------------------------------------------------- AWS Neuron
    Accelerator(
        name="Trainium",
        model="Trainium",
        vendor=Vendor.AWS,
        memory_gb=32,
        form_factor=FormFactor.ASIC,
        peaks=Peaks(fp32=47.5, tf32=190, fp16=190, bf16=190, fp8=190),
        bandwidth_gbps=820,
        tdp_watts=500,
        resource=AWS_NEURON,
        detection=Detection(
            karpenter_names=("trainium",),
            instance_types={"trn1.2xlarge": 1, "trn1.32xlarge": 16, "trn1n.32xlarge": 16},
        ),
        aliases=("trainium1", "trn1", "aws-trainium"),
        default_count=16,
        source=(
            "[vendor] AWS Neuron docs, Trainium Architecture (per chip: 190 FP16/BF16/cFP8/TF32 TFLOPS, "
            "47.5 FP32; 32 GiB, 820 GiB/s); [lbl] labels"
        ),
    ),
    Accelerator(
        name="Trainium2",
        model="Trainium2",
        vendor=Vendor.AWS,
        memory_gb=96,
        form_factor=FormFactor.ASIC,
        peaks=Peaks(fp32=181, tf32=667, fp16=667, bf16=667, fp8=1299),
        bandwidth_gbps=2900,
        tdp_watts=500,
        resource=AWS_NEURON,
        detection=Detection(
            karpenter_names=("trainium2",),
            instance_types={"trn2.48xlarge": 16, "trn2u.48xlarge": 16},
        ),
        aliases=("trn2", "aws-trainium2"),
        default_count=16,
        source=(
            "[vendor] AWS Neuron docs, Trainium2 Architecture (per chip: 1,299 FP8, 667 BF16/FP16/TF32, "
            "181 FP32 TFLOPS dense; 96 GiB, 2.9 TB/s)"
        ),
    ),
    Accelerator(
        name="Inferentia2",
        model="Inferentia2",
        vendor=Vendor.AWS,
        memory_gb=32,
        form_factor=FormFactor.ASIC,
        peaks=Peaks(fp32=47.5, tf32=190, fp16=190, bf16=190, fp8=190),
        bandwidth_gbps=820,
        tdp_watts=150,
        resource=AWS_NEURON,
        detection=Detection(
            karpenter_names=("inferentia2",),
            instance_types={"inf2.xlarge": 1, "inf2.8xlarge": 1, "inf2.24xlarge": 6, "inf2.48xlarge": 12},
        ),
        aliases=("inf2", "aws-inferentia2"),
        default_count=1,
        # AWS Neuron docs: Inferentia2 is "the second generation AWS purpose-built Machine Learning
        # inference accelerator"; the Neuron SDK setup guide: training on Trn1/Trn2/Trn3, Inf2 for inference.
        training=False,
        source=(
            "[vendor] AWS Neuron docs, Inferentia2 Architecture (per chip: 190 FP16/BF16/cFP8/TF32 TFLOPS, "
            "47.5 FP32; 32 GiB, 820 GiB/s; an inference accelerator: the Neuron SDK trains on Trn "
            "instances only); [vendor]† 150 W; [lbl] inf2"
        ),
    ),
    # ---------------------------------------------------------------- Google TPU
    Accelerator(
        name="TPU-v5e",
        model="TPU-v5e",
        vendor=Vendor.GOOGLE,
        memory_gb=16,
        form_factor=FormFactor.ASIC,
        peaks=Peaks(fp32=98.5, tf32=None, fp16=None, bf16=197, fp8=None),
        bandwidth_gbps=819,
        tdp_watts=250,
        resource=GOOGLE_TPU,
        detection=Detection(
            gke_accelerators=("tpu-v5-lite-podslice", "tpu-v5-lite-device"),
            instance_types={"ct5lp-hightpu-1t": 1, "ct5lp-hightpu-4t": 4, "ct5lp-hightpu-8t": 8},
        ),
        aliases=("tpu-v5-lite", "v5e", "tpuv5e"),
        default_count=4,
        source=(
            "[vendor]† Cloud TPU v5e page (197 TFLOPS BF16, 16 GB HBM2, 819 GB/s; " + _TPU_MODES + "); "
            "[lbl] GKE TPU labels"
        ),
    ),
    Accelerator(
        name="TPU-v5p",
        model="TPU-v5p",
        vendor=Vendor.GOOGLE,
        memory_gb=95,
        form_factor=FormFactor.ASIC,
        peaks=Peaks(fp32=229.5, tf32=None, fp16=None, bf16=459, fp8=None),
        bandwidth_gbps=2765,
        tdp_watts=450,
        resource=GOOGLE_TPU,
        detection=Detection(gke_accelerators=("tpu-v5p-slice",), instance_types={"ct5p-hightpu-4t": 4}),
        aliases=("v5p", "tpuv5p"),
        default_count=4,
        source=(
            "[vendor]† Cloud TPU v5p page (459 TFLOPS BF16, 95 GB HBM2e, 2,765 GB/s; " + _TPU_MODES + "); "
            "[lbl] GKE TPU labels"
        ),
    ),
    Accelerator(
        name="TPU-v6e",
        model="TPU-v6e",
        vendor=Vendor.GOOGLE,
        memory_gb=32,
        form_factor=FormFactor.ASIC,
        peaks=Peaks(fp32=459, tf32=None, fp16=None, bf16=918, fp8=None),
        bandwidth_gbps=1640,
        tdp_watts=300,
        resource=GOOGLE_TPU,
        detection=Detection(
            gke_accelerators=("tpu-v6e-slice",),
            instance_types={"ct6e-standard-1t": 1, "ct6e-standard-4t": 4, "ct6e-standard-8t": 8},
        ),
        aliases=("trillium", "v6e", "tpuv6e"),
        default_count=4,
        source=(
            "[vendor]† Cloud TPU v6e page (918 TFLOPS BF16, 32 GB HBM, 1,640 GB/s; " + _TPU_MODES + "); "
            "[lbl] GKE TPU labels"
        ),
    ),
)
