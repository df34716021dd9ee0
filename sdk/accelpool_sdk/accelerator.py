"""An accelerator as the Python API holds it: a catalog entry, how many per node, and its MIG layout.

`CatalogAccelerator` is the value every factory of `accelpool_sdk.factories` returns
(`Accelerator.NVIDIA.H100(count=8, mig="3g.40gb")`): the request as a ComputePool's `spec.accelerator`
and `spec.mig` say it (`request`, `mig_spec`: the API's own models) and the catalog entry it resolves
to (`entry`: memory, peak TFLOPS, bandwidth, vendor, MIG profiles). It is built only through the
validation `accelpool validate` and the API server use (`accelpool_api.validation.validate_spec`), so a
bad value fails here with the same words: field path, value, and what would be valid.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

import accelpool_api as api
from accelpool_api import AcceleratorRequest, MigSpec, validation
from accelpool_core import catalog
from accelpool_sdk.errors import InvalidSpecError

MigRequest = str | Sequence[str]
"""A MIG profile to fill every GPU with (`"3g.40gb"`), or an explicit per-GPU layout."""


@dataclass(frozen=True)
class CatalogAccelerator:
    """One accelerator model from the catalog, as a pool asks for it (count per node, MIG layout)."""

    entry: catalog.Accelerator
    """The catalog entry the request resolves to: the facts."""
    request: AcceleratorRequest
    """`spec.accelerator` as the pool will carry it."""
    mig_spec: MigSpec | None = None
    """`spec.mig`, when the GPUs are partitioned."""

    @classmethod
    def from_name(
        cls,
        name: str,
        count: int | None = None,
        *,
        memory: str | None = None,
        form_factor: str | None = None,
        mig: MigRequest | None = None,
        call: str | None = None,
    ) -> Self:
        """The accelerator a catalog name or alias names; `call` is how the caller is named in errors
        (a factory's `Accelerator.NVIDIA.H100`)."""
        wire: dict[str, Any] = {"name": name}
        for key, value in (("memory", memory), ("formFactor", form_factor), ("count", count)):
            if value is not None:
                wire[key] = value
        return cls._validated(
            {"accelerator": wire, **_mig_wire(mig)}, _call(call or name, count, memory, form_factor, mig)
        )

    @classmethod
    def parse(cls, text: str) -> Self:
        """`"H100"`, `"H100:8"`, `"a100-80gb:4"`: a ComputePool's string form of `spec.accelerator`."""
        return cls._validated({"accelerator": text}, f"accelerator {text!r}")

    @classmethod
    def _validated(cls, spec: Mapping[str, Any], where: str) -> Self:
        parsed, problems = validation.validate_spec(spec)
        if parsed is None:
            raise InvalidSpecError(where, problems)
        return cls(entry=parsed.resolve().entry, request=parsed.accelerator, mig_spec=parsed.mig)

    def with_count(self, count: int) -> Self:
        """The same accelerator, `count` per node (validated: at least 1)."""
        wire = {"accelerator": {**self.accelerator_wire(), "count": count}, **self.mig_wire()}
        return self._validated(wire, f"{self.name}.with_count({count!r})")

    # ------------------------------------------------------------ the spec's parts

    def accelerator_wire(self) -> dict[str, Any]:
        """`spec.accelerator` as sent to the API server (camelCase, unset fields left out)."""
        return self.request.model_dump(by_alias=True, exclude_none=True)

    def mig_wire(self) -> dict[str, Any]:
        """`{"mig": ...}` for a partitioned accelerator, else `{}`."""
        if self.mig_spec is None:
            return {}
        return {"mig": self.mig_spec.model_dump(by_alias=True, exclude_none=True)}

    # ------------------------------------------------------------ the catalog's facts

    @property
    def name(self) -> str:
        """The catalog's canonical name, e.g. `H100-80GB`."""
        return self.entry.name

    @property
    def model(self) -> str:
        return self.entry.model

    @property
    def vendor(self) -> str:
        """`nvidia`, `amd`, `aws` or `google`."""
        return self.entry.vendor.value

    @property
    def count(self) -> int | None:
        """Devices per node the pool asks for (None: any number)."""
        return self.request.count

    @property
    def memory_gb(self) -> int:
        return self.entry.memory_gb

    @property
    def form_factor(self) -> str:
        return self.entry.form_factor.value

    @property
    def peaks(self) -> catalog.Peaks:
        """Dense peak TFLOPS per dtype."""
        return self.entry.peaks

    def tflops(self, dtype: str = "bf16") -> float | None:
        """Dense peak TFLOPS of one device in `dtype` (fp32, tf32, fp16, bf16, fp8); None without that mode."""
        return self.entry.peaks.get(dtype)

    @property
    def bandwidth_gbps(self) -> float:
        return self.entry.bandwidth_gbps

    @property
    def tdp_watts(self) -> int:
        return self.entry.tdp_watts

    @property
    def resource(self) -> str:
        """The extended resource one whole device is requested as, e.g. `nvidia.com/gpu`."""
        return self.entry.resource

    @property
    def compute_capability(self) -> str | None:
        return self.entry.compute_capability_text

    @property
    def mig_profiles(self) -> tuple[str, ...]:
        """The MIG profiles this GPU offers (empty when it has no MIG)."""
        return tuple(p.name for p in self.entry.mig_profiles)

    @property
    def mig_layout(self) -> tuple[str, ...]:
        """The MIG instances on each GPU (a `profile` expanded to as many as fit); empty without MIG."""
        if self.mig_spec is None:
            return ()
        if self.mig_spec.profiles is not None:
            return tuple(self.mig_spec.profiles)
        assert self.mig_spec.profile is not None
        profile = self.entry.mig_profile(self.mig_spec.profile)
        assert profile is not None  # validated
        return (profile.name,) * api.max_instances_that_fit(self.entry, profile)

    def __str__(self) -> str:
        shown = f"{self.name} x{self.count}" if self.count else self.name
        return f"{shown} (MIG {', '.join(self.mig_layout)})" if self.mig_layout else shown


def _mig_wire(mig: MigRequest | None) -> dict[str, Any]:
    if mig is None:
        return {}
    if isinstance(mig, str):
        return {"mig": {"profile": mig}}
    return {"mig": {"profiles": list(mig)}}


def _call(name: str, count: int | None, memory: str | None, form_factor: str | None, mig: MigRequest | None) -> str:
    """How the request reads as a call, for errors: `Accelerator.NVIDIA.H100(count=0, mig='1g.5gb')`."""
    pairs = (("count", count), ("memory", memory), ("form_factor", form_factor), ("mig", mig))
    arguments = [f"{key}={value!r}" for key, value in pairs if value is not None]
    return f"{name}({', '.join(arguments)})"
