"""Accelerator factories, one per model of accelpool's catalog, by vendor; and the catalog's names.

GENERATED from `accelpool_core.catalog` by `make sdk` (python -m accelpool_sdk.generate): do not edit.
tests/unit/sdk/test_factories.py fails when this file and the catalog disagree.

    Accelerator.NVIDIA.H100(count=8, mig="3g.40gb")   # a factory: validated, carries the catalog's facts
    NVIDIA.A100                                       # the factory itself: ComputePool calls it

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias

from accelpool_sdk.accelerator import CatalogAccelerator

NvidiaName: TypeAlias = Literal[
    "T4",
    "L4",
    "L40S",
    "A10G",
    "V100-16GB",
    "V100-32GB",
    "A30",
    "A100-40GB",
    "A100-80GB",
    "A100-80GB-PCIE",
    "H100-80GB",
    "H100-80GB-PCIE",
    "H100-94GB-NVL",
    "H200-141GB",
    "GH200-96GB",
    "GH200-144GB",
    "B200-180GB",
]
"""The catalog names of NVIDIA's devices."""

AmdName: TypeAlias = Literal["MI250X", "MI300X"]
"""The catalog names of AMD's devices."""

AwsName: TypeAlias = Literal["Trainium", "Trainium2", "Inferentia2"]
"""The catalog names of AWS's devices."""

GoogleName: TypeAlias = Literal["TPU-v5e", "TPU-v5p", "TPU-v6e"]
"""The catalog names of Google's devices."""

AcceleratorName: TypeAlias = NvidiaName | AmdName | AwsName | GoogleName
"""Every catalog name (aliases are accepted too)."""

A30Mig: TypeAlias = Literal["1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"]
"""A30's MIG profiles."""

A100Mig: TypeAlias = Literal[
    "1g.5gb",
    "1g.5gb+me",
    "1g.10gb",
    "2g.10gb",
    "3g.20gb",
    "4g.20gb",
    "7g.40gb",
    "1g.10gb+me",
    "1g.20gb",
    "2g.20gb",
    "3g.40gb",
    "4g.40gb",
    "7g.80gb",
]
"""A100's MIG profiles."""

H100Mig: TypeAlias = Literal[
    "1g.10gb",
    "1g.10gb+me",
    "1g.20gb",
    "2g.20gb",
    "3g.40gb",
    "4g.40gb",
    "7g.80gb",
    "1g.12gb",
    "1g.12gb+me",
    "1g.24gb",
    "2g.24gb",
    "3g.47gb",
    "4g.47gb",
    "7g.94gb",
]
"""H100's MIG profiles."""

H200Mig: TypeAlias = Literal["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]
"""H200's MIG profiles."""

GH200Mig: TypeAlias = Literal[
    "1g.12gb",
    "1g.12gb+me",
    "1g.24gb",
    "2g.24gb",
    "3g.48gb",
    "4g.48gb",
    "7g.96gb",
    "1g.18gb",
    "1g.18gb+me",
    "1g.36gb",
    "2g.36gb",
    "3g.72gb",
    "4g.72gb",
    "7g.144gb",
]
"""GH200's MIG profiles."""

B200Mig: TypeAlias = Literal["1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"]
"""B200's MIG profiles."""


class NVIDIA:
    """NVIDIA's accelerators in the catalog (requested as nvidia.com/gpu): one factory per model."""

    @staticmethod
    def T4(count: int | None = None) -> Accelerator:
        """T4: `count` devices per node (None: any).

        T4: 16 GB PCIe, peak TFLOPS fp32 8.1, fp16 65; 320 GB/s; 70 W
        """
        return Accelerator.from_name("T4", count, call="Accelerator.NVIDIA.T4")

    @staticmethod
    def L4(count: int | None = None) -> Accelerator:
        """L4: `count` devices per node (None: any).

        L4: 24 GB PCIe, peak TFLOPS fp32 30.3, tf32 60, fp16 121, bf16 121, fp8 242.5; 300 GB/s; 72 W
        """
        return Accelerator.from_name("L4", count, call="Accelerator.NVIDIA.L4")

    @staticmethod
    def L40S(count: int | None = None) -> Accelerator:
        """L40S: `count` devices per node (None: any).

        L40S: 48 GB PCIe, peak TFLOPS fp32 91.6, tf32 183, fp16 362, bf16 362, fp8 733; 864 GB/s; 350 W
        """
        return Accelerator.from_name("L40S", count, call="Accelerator.NVIDIA.L40S")

    @staticmethod
    def A10G(count: int | None = None) -> Accelerator:
        """A10G: `count` devices per node (None: any).

        A10G: 24 GB PCIe, peak TFLOPS fp32 31.2, tf32 35, fp16 70, bf16 70; 600 GB/s; 150 W
        """
        return Accelerator.from_name("A10G", count, call="Accelerator.NVIDIA.A10G")

    @staticmethod
    def V100(
        count: int | None = None,
        *,
        memory: Literal["16GB", "32GB"] | None = None,
    ) -> Accelerator:
        """V100: `count` devices per node (None: any).

        V100-16GB (default): 16 GB SXM, peak TFLOPS fp32 15.7, fp16 125; 900 GB/s; 300 W
        V100-32GB: 32 GB SXM, peak TFLOPS fp32 15.7, fp16 125; 900 GB/s; 300 W
        """
        return Accelerator.from_name("V100", count, memory=memory, call="Accelerator.NVIDIA.V100")

    @staticmethod
    def A30(
        count: int | None = None,
        *,
        mig: A30Mig | Sequence[A30Mig] | None = None,
    ) -> Accelerator:
        """A30: `count` devices per node (None: any).

        A30: 24 GB PCIe, peak TFLOPS fp32 10.3, tf32 82, fp16 165, bf16 165; 933 GB/s; 165 W; MIG (A30-24GB):
            1g.6gb, 1g.6gb+me, 2g.12gb, 2g.12gb+me, 4g.24gb
        """
        return Accelerator.from_name("A30", count, mig=mig, call="Accelerator.NVIDIA.A30")

    @staticmethod
    def A100(
        count: int | None = None,
        *,
        memory: Literal["40GB", "80GB"] | None = None,
        form_factor: Literal["SXM", "PCIe"] | None = None,
        mig: A100Mig | Sequence[A100Mig] | None = None,
    ) -> Accelerator:
        """A100: `count` devices per node (None: any).

        A100-40GB (default): 40 GB SXM, peak TFLOPS fp32 19.5, tf32 156, fp16 312, bf16 312; 1555 GB/s; 400 W;
            MIG (A100-40GB): 1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb
        A100-80GB: 80 GB SXM, peak TFLOPS fp32 19.5, tf32 156, fp16 312, bf16 312; 2039 GB/s; 400 W; MIG
            (A100-80GB): 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb
        A100-80GB-PCIE: 80 GB PCIe, peak TFLOPS fp32 19.5, tf32 156, fp16 312, bf16 312; 1935 GB/s; 300 W; MIG
            (A100-80GB): 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb
        """
        return Accelerator.from_name(
            "A100", count, memory=memory, form_factor=form_factor, mig=mig, call="Accelerator.NVIDIA.A100"
        )

    @staticmethod
    def H100(
        count: int | None = None,
        *,
        memory: Literal["80GB", "94GB"] | None = None,
        form_factor: Literal["SXM", "PCIe", "NVL"] | None = None,
        mig: H100Mig | Sequence[H100Mig] | None = None,
    ) -> Accelerator:
        """H100: `count` devices per node (None: any).

        H100-80GB (default): 80 GB SXM, peak TFLOPS fp32 67, tf32 494.5, fp16 989, bf16 989, fp8 1979; 3350
            GB/s; 700 W; MIG (H100-80GB): 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb
        H100-80GB-PCIE: 80 GB PCIe, peak TFLOPS fp32 51, tf32 378, fp16 756, bf16 756, fp8 1513; 2000 GB/s; 350
            W; MIG (H100-80GB): 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb
        H100-94GB-NVL: 94 GB NVL, peak TFLOPS fp32 60, tf32 417.5, fp16 835.5, bf16 835.5, fp8 1670.5; 3900
            GB/s; 400 W; MIG (H100-94GB): 1g.12gb, 1g.12gb+me, 1g.24gb, 2g.24gb, 3g.47gb, 4g.47gb, 7g.94gb
        """
        return Accelerator.from_name(
            "H100", count, memory=memory, form_factor=form_factor, mig=mig, call="Accelerator.NVIDIA.H100"
        )

    @staticmethod
    def H200(
        count: int | None = None,
        *,
        mig: H200Mig | Sequence[H200Mig] | None = None,
    ) -> Accelerator:
        """H200: `count` devices per node (None: any).

        H200-141GB: 141 GB SXM, peak TFLOPS fp32 67, tf32 494.5, fp16 989, bf16 989, fp8 1979; 4800 GB/s; 700 W;
            MIG (H200-141GB): 1g.18gb, 1g.18gb+me, 1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb
        """
        return Accelerator.from_name("H200", count, mig=mig, call="Accelerator.NVIDIA.H200")

    @staticmethod
    def GH200(
        count: int | None = None,
        *,
        memory: Literal["96GB", "144GB"] | None = None,
        mig: GH200Mig | Sequence[GH200Mig] | None = None,
    ) -> Accelerator:
        """GH200: `count` devices per node (None: any).

        GH200-96GB (default): 96 GB Superchip, peak TFLOPS fp32 67, tf32 494.5, fp16 989, bf16 989, fp8 1979;
            4000 GB/s; 900 W; MIG (H100-96GB): 1g.12gb, 1g.12gb+me, 1g.24gb, 2g.24gb, 3g.48gb, 4g.48gb, 7g.96gb
        GH200-144GB: 144 GB Superchip, peak TFLOPS fp32 67, tf32 494.5, fp16 989, bf16 989, fp8 1979; 4900 GB/s;
            1000 W; MIG (GH200-144GB): 1g.18gb, 1g.18gb+me, 1g.36gb, 2g.36gb, 3g.72gb, 4g.72gb, 7g.144gb
        """
        return Accelerator.from_name("GH200", count, memory=memory, mig=mig, call="Accelerator.NVIDIA.GH200")

    @staticmethod
    def B200(
        count: int | None = None,
        *,
        mig: B200Mig | Sequence[B200Mig] | None = None,
    ) -> Accelerator:
        """B200: `count` devices per node (None: any).

        B200-180GB: 180 GB SXM, peak TFLOPS fp32 75, tf32 1125, fp16 2250, bf16 2250, fp8 4500; 7700 GB/s; 1000
            W; MIG (B200-180GB): 1g.23gb, 1g.23gb+me, 1g.45gb, 2g.45gb, 3g.90gb, 4g.90gb, 7g.180gb
        """
        return Accelerator.from_name("B200", count, mig=mig, call="Accelerator.NVIDIA.B200")


class AMD:
    """AMD's accelerators in the catalog (requested as amd.com/gpu): one factory per model."""

    @staticmethod
    def MI250X(count: int | None = None) -> Accelerator:
        """MI250X: `count` devices per node (None: any).

        MI250X: 64 GB OAM, peak TFLOPS fp32 47.85, fp16 191.5, bf16 191.5; 1638.4 GB/s; 280 W
        """
        return Accelerator.from_name("MI250X", count, call="Accelerator.AMD.MI250X")

    @staticmethod
    def MI300X(count: int | None = None) -> Accelerator:
        """MI300X: `count` devices per node (None: any).

        MI300X: 192 GB OAM, peak TFLOPS fp32 163.4, tf32 653.7, fp16 1307, bf16 1307, fp8 2615; 5300 GB/s; 750 W
        """
        return Accelerator.from_name("MI300X", count, call="Accelerator.AMD.MI300X")


class AWS:
    """AWS's accelerators in the catalog (requested as aws.amazon.com/neuron): one factory per model."""

    @staticmethod
    def Trainium(count: int | None = None) -> Accelerator:
        """Trainium: `count` devices per node (None: any).

        Trainium: 32 GB ASIC, peak TFLOPS fp32 47.5, tf32 190, fp16 190, bf16 190, fp8 190; 820 GB/s; 500 W
        """
        return Accelerator.from_name("Trainium", count, call="Accelerator.AWS.Trainium")

    @staticmethod
    def Trainium2(count: int | None = None) -> Accelerator:
        """Trainium2: `count` devices per node (None: any).

        Trainium2: 96 GB ASIC, peak TFLOPS fp32 181, tf32 667, fp16 667, bf16 667, fp8 1299; 2900 GB/s; 500 W
        """
        return Accelerator.from_name("Trainium2", count, call="Accelerator.AWS.Trainium2")

    @staticmethod
    def Inferentia2(count: int | None = None) -> Accelerator:
        """Inferentia2: `count` devices per node (None: any).

        Inferentia2: 32 GB ASIC, peak TFLOPS fp32 47.5, tf32 190, fp16 190, bf16 190, fp8 190; 820 GB/s; 150 W
        """
        return Accelerator.from_name("Inferentia2", count, call="Accelerator.AWS.Inferentia2")


class Google:
    """Google's accelerators in the catalog (requested as google.com/tpu): one factory per model."""

    @staticmethod
    def TPU_v5e(count: int | None = None) -> Accelerator:
        """TPU-v5e: `count` devices per node (None: any).

        TPU-v5e: 16 GB ASIC, peak TFLOPS fp32 98.5, bf16 197; 819 GB/s; 250 W
        """
        return Accelerator.from_name("TPU-v5e", count, call="Accelerator.Google.TPU_v5e")

    @staticmethod
    def TPU_v5p(count: int | None = None) -> Accelerator:
        """TPU-v5p: `count` devices per node (None: any).

        TPU-v5p: 95 GB ASIC, peak TFLOPS fp32 229.5, bf16 459; 2765 GB/s; 450 W
        """
        return Accelerator.from_name("TPU-v5p", count, call="Accelerator.Google.TPU_v5p")

    @staticmethod
    def TPU_v6e(count: int | None = None) -> Accelerator:
        """TPU-v6e: `count` devices per node (None: any).

        TPU-v6e: 32 GB ASIC, peak TFLOPS fp32 459, bf16 918; 1640 GB/s; 300 W
        """
        return Accelerator.from_name("TPU-v6e", count, call="Accelerator.Google.TPU_v6e")


class Accelerator(CatalogAccelerator):
    """An accelerator of the catalog (`CatalogAccelerator`), with a factory per model under its vendor:
    `Accelerator.NVIDIA.H100(count=8)`, `Accelerator.AMD.MI300X()`, `Accelerator.AWS.Trainium2(16)`.
    """

    NVIDIA = NVIDIA
    AMD = AMD
    AWS = AWS
    Google = Google
