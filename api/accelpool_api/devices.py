"""`spec.accelerator`, `spec.mig` and `spec.sharing`: which accelerator a pool wants, and how each GPU is divided.

The structural rules live here, on the models; the rules that need the catalog (is this MIG
profile offered by that GPU, does the layout fit) are in `accelpool_api.resolution`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

from accelpool_api.rules import Model, Rule, RuledModel
from accelpool_core import catalog

ACCELERATOR_STRING_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._ -]*(:[1-9][0-9]*)?$"
MIG_PROFILE_PATTERN = r"^[1-7]g\.[0-9]+gb(\+me)?$"
MEMORY_PATTERN = r"^[0-9]+ ?(GB|GiB|G|gb|gib|g)$"
MAX_TIME_SLICING_REPLICAS = 256
MPS_MAX_CLIENTS = 48
"""CUDA MPS serves at most 48 clients per GPU from compute capability 7.5 on. NVIDIA's device plugin
refuses more replicas (NVIDIA/k8s-device-plugin `cmd/mps-control-daemon/mps/device.go` `maxClients`;
CHANGELOG v0.15.0-rc.2 "Enforce replica limits for MPS sharing")."""
MPS_MAX_CLIENTS_BEFORE_7_5 = 16
"""The same limit below compute capability 7.5 (V100 in the catalog): needs the catalog, so it is
checked in `spec_problems`. NVIDIA's code calls the test `isAtLeastVolta` but compares with 7.5."""
MPS_LIMIT_CAPABILITY = (7, 5)


class AcceleratorRequest(Model):
    """The typed form of `spec.accelerator`; the string form `NAME[:COUNT]` parses into it."""

    name: str = Field(
        min_length=1,
        max_length=64,
        description="Catalog name or alias, case-insensitive: H100, A100-80GB, L4, MI300X, Trainium2, TPU-v5p.",
    )
    memory: Annotated[str, Field(pattern=MEMORY_PATTERN)] | None = Field(
        None, description="Memory per device, e.g. 80GB; picks the memory variant of the model."
    )
    form_factor: catalog.FormFactor | None = Field(
        None,
        strict=False,  # a string on the wire names the enum member; strictness is about numbers and booleans
        description="SXM, PCIe, NVL, ...: only nodes with this form factor are members.",
    )
    count: int | None = Field(None, ge=1, le=64, description="Devices per node; members have at least this many.")

    @classmethod
    def parse(cls, text: str) -> AcceleratorRequest:
        """`H100`, `H100:8`, `a100-80gb:4` (SkyPilot's NAME[:COUNT])."""
        if not re.match(ACCELERATOR_STRING_PATTERN, text):
            raise ValueError(
                f"accelerator must be NAME[:COUNT] with COUNT >= 1 (e.g. 'H100', 'H100:8', 'a100-80gb:4'), got {text!r}"
            )
        name, _, count = text.partition(":")
        return cls(name=name.strip(), count=int(count) if count else None)

    @property
    def memory_gb(self) -> int | None:
        if self.memory is None:
            return None
        return int(re.sub(r"[^0-9]", "", self.memory))


class MigSpec(RuledModel):
    """How each GPU of a member is partitioned with MIG (NVIDIA A100/H100/H200/B200 class only)."""

    profile: Annotated[str, Field(pattern=MIG_PROFILE_PATTERN)] | None = Field(
        None, description="Shorthand: fill every GPU with as many instances of this profile as fit."
    )
    profiles: list[Annotated[str, Field(pattern=MIG_PROFILE_PATTERN)]] | None = Field(
        None,
        min_length=1,
        max_length=7,
        description="Explicit per-GPU layout, e.g. [3g.40gb, 2g.20gb, 1g.10gb].",
    )
    strategy: Literal["single", "mixed"] | None = Field(
        None,
        description="Device-plugin MIG strategy; default single for one profile type, mixed otherwise.",
    )

    rules = (
        Rule(
            "has(self.profile) != has(self.profiles)",
            lambda m: ("profile" in m) != ("profiles" in m),
            "mig needs exactly one of 'profile' (shorthand) or 'profiles' (explicit layout)",
        ),
        Rule(
            "!has(self.strategy) || self.strategy != 'single' || !has(self.profiles)"
            " || self.profiles.all(p, p == self.profiles[0])",
            lambda m: m.get("strategy") != "single" or "profiles" not in m or len(set(m["profiles"])) == 1,
            "the single MIG strategy needs one profile type; use strategy mixed for a mixed layout",
            field="strategy",
        ),
    )


class TimeSlicingSpec(Model):
    """CUDA time-slicing: `replicas` pods take turns on each GPU, with no memory or fault isolation."""

    replicas: int = Field(
        ge=2, le=MAX_TIME_SLICING_REPLICAS, description="How many pods share each device (at least 2)."
    )
    fail_requests_greater_than_one: bool = Field(
        False,
        description=(
            "Refuse pods that request more than one replica. NVIDIA's default (false) lets a pod asking "
            "for 2 replicas get the same GPU twice, which gives it no more compute; true makes such a "
            "pod fail to start instead."
        ),
    )


class MpsSpec(Model):
    """CUDA Multi-Process Service: `replicas` pods run on each GPU at once, each with an equal share."""

    replicas: int = Field(
        ge=2,
        le=MPS_MAX_CLIENTS,
        description=(
            f"How many pods share each device: at least 2, at most {MPS_MAX_CLIENTS} "
            f"({MPS_MAX_CLIENTS_BEFORE_7_5} on GPUs below compute capability 7.5, such as V100), "
            "the clients one MPS server takes."
        ),
    )
    fail_requests_greater_than_one: bool = Field(
        True,
        description=(
            "Refuse pods that request more than one replica (NVIDIA's default under MPS). false lets a "
            "pod get several replicas of the same GPU, each an equal share of it (honoured by the NVIDIA "
            "device plugin since v0.20.0)."
        ),
    )


class SharingSpec(RuledModel):
    """Oversubscribe whole GPUs with the NVIDIA device plugin (exclusive with MIG)."""

    time_slicing: TimeSlicingSpec | None = Field(None, description="CUDA time-slicing.")
    mps: MpsSpec | None = Field(None, description="CUDA Multi-Process Service (not on MIG devices).")

    rules = (
        Rule(
            "has(self.timeSlicing) != has(self.mps)",
            lambda s: ("timeSlicing" in s) != ("mps" in s),
            "sharing needs exactly one of 'timeSlicing' or 'mps'",
        ),
    )

    @property
    def mode(self) -> Literal["timeSlicing", "mps"]:
        return "timeSlicing" if self.time_slicing is not None else "mps"

    @property
    def replicas(self) -> int:
        chosen = self.time_slicing or self.mps
        assert chosen is not None
        return chosen.replicas
