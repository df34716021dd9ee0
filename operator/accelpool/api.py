"""The ComputePool API (`accelpool.io/v1alpha1`): pydantic models for spec and status, and their validation.

This module is the one model everything else is generated from: the CRD schema and its CEL
rules (`accelpool.crd`), `accelpool validate`, and the operator's `Valid` condition all call
into it. Structural rules (types, ranges, exclusive fields) live on the models; rules that need
the catalog (is this MIG profile offered by that GPU, does the layout fit) live in
`spec_problems`, which names the field path, the bad value and what would be valid.

Pure: no I/O. Callers: `accelpool.crd`, `accelpool.validation`, the planner and the handlers.
"""

from __future__ import annotations

import decimal
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from accelpool_core import catalog

GROUP = "accelpool.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ComputePool"
PLURAL = "computepools"
SINGULAR = "computepool"
SHORT_NAMES = ("cpool",)
CATEGORIES = ("accelpool",)

ACCELERATOR_STRING_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._ -]*(:[1-9][0-9]*)?$"
MIG_PROFILE_PATTERN = r"^[1-7]g\.[0-9]+gb(\+me)?$"
DURATION_PATTERN = r"^([0-9]{1,5}(\.[0-9]{1,9})?(ms|s|m|h)){1,4}$"
"""15m, 1h30m, 90s. At most 4 parts of at most 5 digits: even 4 x 99999h stays within what CEL's
duration() (Go's time.ParseDuration, int64 nanoseconds: about 2,562,047h) can parse, so the CRD's
duration rules never fail to evaluate (a rule that errors rejects the object with the error's text)."""
PERCENT_PATTERN = r"^(100|[1-9]?[0-9])%$"
MEMORY_PATTERN = r"^[0-9]+ ?(GB|GiB|G|gb|gib|g)$"
MAX_DURATION_LENGTH = 32
"""Durations are short strings; the bound also keeps the API server's CEL cost estimate small."""
MIN_INTERVAL = "1m"
MAX_INTERVAL = "168h"
MAX_HOLD_DOWN = "168h"
MAX_NODES = 10_000
DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
"""What the API server requires of an object's name (k8s.io/apimachinery pkg/util/validation validation.go)."""
DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{DNS1123_SUBDOMAIN}')"
)
MAX_POOL_NAME = 63
"""A pool's name is the value of the `accelpool.io/pool` label on its nodes: at most 63 characters."""


@dataclass(frozen=True)
class Rule:
    """A cross-field rule, declared once: its CEL text goes into the CRD, and `holds` is the same rule
    in Python, for the models and `accelpool validate`.

    `holds` gets what CEL's `self` is: the object as on the wire (camelCase keys, absent fields absent)
    after the schema's scalar defaults, so the rule can be checked, as the API server checks it, even
    where another field of the object is out of range.
    """

    cel: str
    holds: Callable[[Mapping[str, Any]], bool]
    message: str
    field: str | None = None
    """The field the rule is about (its error path), when it is about one field."""


class Model(BaseModel):
    """camelCase on the wire, snake_case in Python, unknown fields rejected, types strict (as the API server's)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=True,
        strict=True,
    )
    rules: ClassVar[tuple[Rule, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.rules and not issubclass(cls, RuledModel):
            raise TypeError(f"{cls.__name__} declares rules: derive it from RuledModel so they are checked")


class RuledModel(Model):
    """A model with cross-field `rules`, checked after its fields (status models, built by the operator, have none)."""

    @model_validator(mode="after")
    def _check_rules(self) -> RuledModel:
        wire = self.model_dump(by_alias=True, exclude_none=True)
        for rule in type(self).rules:
            if not rule.holds(wire):
                raise ValueError(rule.message)
        return self


# ---------------------------------------------------------------- spec


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


def _accelerator_from_wire(value: Any) -> Any:
    return AcceleratorRequest.parse(value) if isinstance(value, str) else value


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


MAX_TIME_SLICING_REPLICAS = 256
MPS_MAX_CLIENTS = 48
"""CUDA MPS serves at most 48 clients per GPU from compute capability 7.5 on. NVIDIA's device plugin
refuses more replicas (NVIDIA/k8s-device-plugin `cmd/mps-control-daemon/mps/device.go` `maxClients`;
CHANGELOG v0.15.0-rc.2 "Enforce replica limits for MPS sharing")."""
MPS_MAX_CLIENTS_BEFORE_7_5 = 16
"""The same limit below compute capability 7.5 (V100 in the catalog): needs the catalog, so it is
checked in `spec_problems`. NVIDIA's code calls the test `isAtLeastVolta` but compares with 7.5."""
MPS_LIMIT_CAPABILITY = (7, 5)


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
            "the clients one MPS server takes. A pod gets one replica: the device plugin always "
            "refuses requests for more under MPS (failRequestsGreaterThanOne is forced true)."
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


class ProvisionerSpec(Model):
    """Where member nodes come from."""

    type: Literal["static", "karpenter"] = Field(
        "static", description="static claims existing nodes; karpenter renders a karpenter.sh/v1 NodePool."
    )
    node_class: str = Field(
        "default",
        min_length=1,
        max_length=253,
        description="karpenter only: the EC2NodeClass the NodePool's nodes use.",
    )


class MatmulPolicy(Model):
    """The matmul throughput check's pass mark."""

    dtype: Literal["fp32", "tf32", "fp16", "bf16"] = Field("bf16", description="Data type of the matmul check.")
    min_efficiency: float = Field(
        0.6, ge=0, le=1, description="Fail a GPU below this fraction of the catalog's dense peak."
    )


class HealthSpec(RuledModel):
    """How members are checked and what happens to a node that fails."""

    interval: Annotated[str, Field(pattern=DURATION_PATTERN, max_length=MAX_DURATION_LENGTH)] = Field(
        "15m",
        description=(
            f"Time between full check cycles on a node (telemetry is continuous), "
            f"from {MIN_INTERVAL} to {MAX_INTERVAL}."
        ),
    )
    matmul: MatmulPolicy = Field(default_factory=MatmulPolicy)
    remediation: Literal["taint", "cordon", "none"] = Field(
        "taint", description="What happens to a node whose AcceleratorHealthy turns False."
    )
    max_unavailable: int | str = Field(
        "50%",
        description="Circuit breaker: never quarantine more than this many (or this % of) member nodes.",
        json_schema_extra={"x-kubernetes-int-or-string": True},
    )
    hold_down: Annotated[str, Field(pattern=DURATION_PATTERN, max_length=MAX_DURATION_LENGTH)] = Field(
        "10m",
        description=(
            f"How long a quarantined node must be healthy again before it is released, at most {MAX_HOLD_DOWN}."
        ),
    )

    rules = (
        Rule(
            f"type(self.maxUnavailable) == string ? self.maxUnavailable.matches('{PERCENT_PATTERN}')"
            " : self.maxUnavailable >= 0",
            lambda h: (
                re.fullmatch(PERCENT_PATTERN, h["maxUnavailable"]) is not None
                if isinstance(h["maxUnavailable"], str)
                else h["maxUnavailable"] >= 0
            ),
            "maxUnavailable must be a number >= 0 or a percentage like '50%'",
            field="maxUnavailable",
        ),
        Rule(
            # The pattern guard keeps the rule from erroring on a malformed duration, which the
            # schema's pattern reports (a rule that errors rejects with a second, noisier message).
            f"!self.interval.matches('{DURATION_PATTERN}')"
            f" || (duration(self.interval) >= duration('{MIN_INTERVAL}')"
            f" && duration(self.interval) <= duration('{MAX_INTERVAL}'))",
            lambda h: (
                not re.fullmatch(DURATION_PATTERN, h["interval"])
                or _duration_within(h["interval"], parse_duration(MIN_INTERVAL), parse_duration(MAX_INTERVAL))
            ),
            f"interval must be between {MIN_INTERVAL} and {MAX_INTERVAL} (a full check cycle runs compute checks "
            "on every GPU; telemetry and XIDs are watched continuously in between)",
            field="interval",
        ),
        Rule(
            f"!self.holdDown.matches('{DURATION_PATTERN}') || duration(self.holdDown) <= duration('{MAX_HOLD_DOWN}')",
            lambda h: (
                not re.fullmatch(DURATION_PATTERN, h["holdDown"])
                or _duration_within(h["holdDown"], 0.0, parse_duration(MAX_HOLD_DOWN))
            ),
            f"holdDown must be at most {MAX_HOLD_DOWN}",
            field="holdDown",
        ),
    )

    @property
    def interval_seconds(self) -> float:
        return parse_duration(self.interval)

    @property
    def hold_down_seconds(self) -> float:
        return parse_duration(self.hold_down)

    def max_unavailable_nodes(self, desired: int) -> int:
        """The circuit breaker's limit for a pool of `desired` nodes (percentages round down, at least 1)."""
        if isinstance(self.max_unavailable, int):
            return self.max_unavailable
        percent = int(self.max_unavailable.rstrip("%"))
        return max(1, desired * percent // 100) if percent else 0


class ComputePoolSpec(RuledModel):
    """What a platform engineer asks for: an accelerator, a node count, a layout, a health policy."""

    accelerator: AcceleratorRequest = Field(
        description=(
            "The accelerator, as a string NAME[:COUNT] ('H100', 'H100:8', 'a100-80gb:4') "
            "or typed {name, memory, formFactor, count}."
        ),
        json_schema_extra={"x-accelpool-union": "accelerator"},
    )
    nodes: int = Field(
        1,
        ge=0,
        le=MAX_NODES,
        description=(
            "Desired member nodes; the fewest for provisioner karpenter, which may grow the pool to maxNodes. "
            "`kubectl scale cpool NAME --replicas=N` sets it."
        ),
    )
    max_nodes: int | None = Field(
        None,
        ge=1,
        le=MAX_NODES,
        description="provisioner karpenter only: the most member nodes (the NodePool's limits); nodes when unset.",
    )
    mig: MigSpec | None = Field(None, description="MIG layout of every GPU (MIG-capable NVIDIA GPUs only).")
    sharing: SharingSpec | None = Field(None, description="Time-slicing or MPS (exclusive with mig).")
    node_selector: dict[str, str] = Field(default_factory=dict, description="Extra label constraints on member nodes.")
    dedicated: bool = Field(True, description="Taint members accelpool.io/pool=<name>:NoSchedule.")
    provisioner: ProvisionerSpec = Field(default_factory=ProvisionerSpec)
    health: HealthSpec = Field(default_factory=HealthSpec)

    @field_validator("accelerator", mode="before")
    @classmethod
    def _accelerator_string(cls, value: Any) -> Any:
        return _accelerator_from_wire(value)

    # MPS on MIG is refused by the device plugin under any MIG strategy, not only mixed as the shared
    # reference says (NVIDIA/k8s-device-plugin internal/plugin/mps.go getMPSOptions: "sharing using MPS
    # is not supported for MIG devices"); the code wins.
    rules = (
        Rule(
            "!(has(self.mig) && has(self.sharing))",
            lambda s: "mig" not in s or "sharing" not in s,
            "mig and sharing are mutually exclusive: partition GPUs or share them, not both "
            "(NVIDIA's device plugin refuses MPS on MIG devices; time-slicing MIG devices is not offered)",
        ),
        Rule(
            "!has(self.maxNodes) || (has(self.provisioner) && self.provisioner.type == 'karpenter')",
            lambda s: "maxNodes" not in s or (s.get("provisioner") or {}).get("type", "static") == "karpenter",
            "maxNodes needs provisioner type karpenter; a static pool claims exactly nodes nodes",
            field="maxNodes",
        ),
        Rule(
            "!has(self.maxNodes) || self.maxNodes >= (has(self.nodes) ? self.nodes : 1)",
            lambda s: "maxNodes" not in s or s["maxNodes"] >= s.get("nodes", 1),
            "maxNodes must be at least nodes (the fewest member nodes)",
            field="maxNodes",
        ),
    )

    @model_validator(mode="after")
    def _catalog(self, info: ValidationInfo) -> ComputePoolSpec:
        if not (info.context or {}).get("structural_only"):
            problems = spec_problems(self)
            if problems:
                raise ValueError("; ".join(str(p) for p in problems))
        return self

    @property
    def most_nodes(self) -> int:
        """The pool's ceiling: maxNodes for a Karpenter pool that sets it, else nodes."""
        return self.max_nodes if self.max_nodes is not None else self.nodes

    def resolve(self) -> ResolvedAccelerator:
        """The catalog entry this spec asks for; raises ValueError when spec_problems would report."""
        resolved, problems = _resolve(self.accelerator)
        if resolved is None:
            raise ValueError("; ".join(str(p) for p in problems))
        return resolved

    def mig_layout(self) -> list[str]:
        """The per-GPU MIG layout, with the `profile` shorthand expanded. Empty without MIG."""
        if self.mig is None:
            return []
        if self.mig.profiles is not None:
            return list(self.mig.profiles)
        assert self.mig.profile is not None
        entry = self.resolve().entry
        profile = entry.mig_profile(self.mig.profile)
        if profile is None:
            return [self.mig.profile]
        return [profile.name] * max_instances_that_fit(entry, profile)

    def mig_strategy(self) -> Literal["none", "single", "mixed"]:
        if self.mig is None:
            return "none"
        if self.mig.strategy is not None:
            return self.mig.strategy
        return "single" if len(set(self.mig_layout())) == 1 else "mixed"


def max_instances_that_fit(entry: catalog.Accelerator, profile: catalog.MigProfile) -> int:
    """How many instances of one profile fill one of `entry`'s GPUs: its maximum and the GPU's own slice budgets."""
    return entry.mig_instances_that_fit(profile)


# ---------------------------------------------------------------- semantic validation


AUTO: Any = object()
"""`Problem.shown`'s default: the bad value, rendered as the API server renders values."""


@dataclass(frozen=True)
class Problem:
    """One reason an object is invalid: where, what was there, and what would be valid.

    It reads as the API server's own field errors do (k8s.io/apimachinery pkg/util/validation/field
    errors.go `Error.Error`): `spec.mig.profile: Invalid value: "1g.5gb": mig profile 1g.5gb is not
    offered by H100-80GB; valid: ...`, so `accelpool validate` and `kubectl apply` say the same words.
    """

    path: str
    value: Any
    message: str
    error_type: ErrorType = "Invalid"
    """The field error's type (k8s.io/apimachinery field.ErrorType); UnknownField for the strict
    decoding error the server answers an unknown field with, before any field validation."""
    shown: str | None = AUTO
    """The value as the server prints it after the type (None: not printed); AUTO renders `value`."""
    hint: str = ""
    """Help that goes beyond what the API server says (printed after the message by the CLI)."""

    def __post_init__(self) -> None:
        if self.shown is AUTO:
            object.__setattr__(self, "shown", None if self.value is None else go_value(self.value))

    @property
    def body(self) -> str:
        """The error without its field path: `Invalid value: 1: ... should be greater than or equal to 2`."""
        if self.error_type == "UnknownField":
            return self.message
        label = _ERROR_LABELS[self.error_type]
        head = label if self.shown is None else f"{label}: {self.shown}"
        return f"{head}: {self.message}" if self.message else head

    def __str__(self) -> str:
        return self.body if self.error_type == "UnknownField" else f"{self.path}: {self.body}"


ErrorType = Literal["Invalid", "TypeInvalid", "Required", "NotSupported", "TooMany", "TooLong", "UnknownField"]
_ERROR_LABELS: dict[str, str] = {
    "Invalid": "Invalid value",
    "TypeInvalid": "Invalid value",
    "Required": "Required value",
    "NotSupported": "Unsupported value",
    "TooMany": "Too many",
    "TooLong": "Too long",
}
"""How the API server prints each field error type (k8s.io/apimachinery pkg/util/validation/field errors.go)."""


def go_value(value: Any) -> str:
    """A decoded JSON value as the API server prints a field error's bad value (Go's %v, %q, %#v).

    Scalars as `field.Error` prints them (strings quoted, numbers and booleans bare); objects and
    lists as compact JSON, which the server's own errors never print (they show the type name).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def go_float(value: float) -> str:
    """Go's %v of a float64 (strconv 'g', shortest): 2, 1.5, 123456, 1.234567e+06, 1e-05."""
    if value == 0 or not math.isfinite(value):
        return {math.inf: "+Inf", -math.inf: "-Inf"}.get(value, "NaN" if value != value else "0")
    sign, digits, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(str(d) for d in digits)
    point = len(text) + exponent  # where the decimal point goes, counted from the first digit
    minus = "-" if sign else ""
    if not -4 <= point - 1 < 6:
        mantissa = text[0] + (f".{text[1:]}" if len(text) > 1 else "")
        power = point - 1
        return f"{minus}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{text}"
    if point >= len(text):
        return f"{minus}{text}{'0' * (point - len(text))}"
    return f"{minus}{text[:point]}.{text[point:]}"


def as_sent(value: Any) -> Any:
    """A decoded YAML value as the API server receives it from kubectl: kubectl sends JSON (Go's
    encoding/json writes 4.0 as 4) and the server decodes whole numbers as int64
    (k8s.io/apimachinery pkg/util/json), so `nodes: 4.0` arrives as the integer 4."""
    if isinstance(value, float) and value.is_integer() and -(2**63) <= value < 2**63:
        return int(value)
    if isinstance(value, Mapping):
        return {key: as_sent(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_sent(item) for item in value]
    return value


@dataclass(frozen=True)
class ResolvedAccelerator:
    """A pool's accelerator resolved against the catalog.

    `entry` gives the peaks and the MIG table; `matches` are the catalog entries whose nodes
    may be members (same model and memory; narrowed to one form factor when asked for).
    """

    entry: catalog.Accelerator
    count: int | None
    matches: tuple[catalog.Accelerator, ...]

    @property
    def display(self) -> str:
        return f"{self.entry.name} x{self.count}" if self.count else self.entry.name


def _resolve(request: AcceleratorRequest) -> tuple[ResolvedAccelerator | None, list[Problem]]:
    path = "spec.accelerator"
    try:
        entry = catalog.lookup(request.name)
    except catalog.UnknownAcceleratorError as error:
        return None, [
            Problem(f"{path}.name" if request.memory or request.form_factor else path, request.name, str(error))
        ]
    memory = request.memory_gb
    form_factor = catalog.FormFactor(request.form_factor) if request.form_factor else None
    if memory is not None and memory != entry.memory_gb:
        candidates = catalog.find(entry.model, memory)
        if not candidates:
            sizes = sorted({a.memory_gb for a in catalog.find(entry.model)})
            valid = ", ".join(f"{s}GB" for s in sizes)
            return None, [
                Problem(
                    f"{path}.memory",
                    request.memory,
                    f"{entry.model} comes with {valid}, not {request.memory}",
                )
            ]
        entry = candidates[0]
    if form_factor is not None and form_factor != entry.form_factor:
        candidates = catalog.find(entry.model, entry.memory_gb, form_factor)
        if not candidates and memory is None:
            # Without a memory size the form factor picks the variant: {name: H100, formFactor: NVL} is the
            # 94 GB H100 NVL, as Skyward's H100(form_factor="NVL") is.
            candidates = catalog.find(entry.model, None, form_factor)
            sizes = sorted({a.memory_gb for a in candidates})
            if len(sizes) > 1:
                valid = ", ".join(f"{s}GB" for s in sizes)
                return None, [
                    Problem(
                        f"{path}.memory",
                        None,
                        f"{entry.model} {form_factor.value} comes with {valid}: say which with memory",
                    )
                ]
        if not candidates:
            sizes_known = catalog.find(entry.model, entry.memory_gb if memory is not None else None)
            valid = ", ".join(sorted({a.form_factor.value for a in sizes_known}))
            size = f" {entry.memory_gb}GB" if memory is not None else ""
            return None, [
                Problem(
                    f"{path}.formFactor",
                    form_factor.value,
                    f"{entry.model}{size} comes as {valid}, not {form_factor.value}",
                )
            ]
        entry = candidates[0]
    if form_factor is not None:
        matches = tuple(catalog.find(entry.model, entry.memory_gb, form_factor))
    else:
        matches = tuple(catalog.variants(entry))
    return ResolvedAccelerator(entry=entry, count=request.count, matches=matches), []


def spec_problems(spec: ComputePoolSpec) -> list[Problem]:
    """Every catalog-dependent problem of a structurally valid spec, each with its field path."""
    resolved, problems = _resolve(spec.accelerator)
    if resolved is None:
        return problems
    entry = resolved.entry
    if spec.mig is not None:
        problems += _mig_problems(spec.mig, entry)
    if spec.sharing is not None and entry.vendor != catalog.Vendor.NVIDIA:
        problems.append(
            Problem(
                f"spec.sharing.{spec.sharing.mode}",
                spec.sharing.replicas,
                f"GPU sharing is a feature of NVIDIA's device plugin; {entry.name} is a {entry.vendor.value} device",
            )
        )
    elif spec.sharing is not None and spec.sharing.mps is not None:
        problems += _mps_problems(spec.sharing.mps, resolved)
    if spec.provisioner.type == "karpenter" and not entry.detection.karpenter_names:
        problems.append(
            Problem(
                "spec.provisioner.type",
                "karpenter",
                f"Karpenter (AWS) offers no {entry.name}; use provisioner type static",
            )
        )
    for key in spec.node_selector:
        if key.startswith(f"{GROUP}/"):
            problems.append(
                Problem(
                    f"spec.nodeSelector[{key}]",
                    key,
                    f"labels under {GROUP}/ are set by the operator and cannot be selected on",
                )
            )
    return problems


def _mps_problems(mps: MpsSpec, resolved: ResolvedAccelerator) -> list[Problem]:
    """MPS serves 16 clients per GPU below compute capability 7.5 (the 48 above it is in the schema)."""
    old = [a for a in resolved.matches if a.compute_capability and a.compute_capability < MPS_LIMIT_CAPABILITY]
    if old and mps.replicas > MPS_MAX_CLIENTS_BEFORE_7_5:
        gpu = old[0]
        return [
            Problem(
                "spec.sharing.mps.replicas",
                mps.replicas,
                f"MPS on {gpu.name} (compute capability {gpu.compute_capability_text}) serves at most "
                f"{MPS_MAX_CLIENTS_BEFORE_7_5} clients per GPU, got {mps.replicas}; NVIDIA's device plugin "
                f"refuses more (use at most {MPS_MAX_CLIENTS_BEFORE_7_5}, or timeSlicing)",
            )
        ]
    return []


def _mig_problems(mig: MigSpec, entry: catalog.Accelerator) -> list[Problem]:
    if not entry.mig_capable:
        capable = ", ".join(a.name for a in catalog.ACCELERATORS if a.mig_capable)
        return [
            Problem(
                "spec.mig",
                mig.profile or mig.profiles,
                f"{entry.name} does not support MIG; MIG-capable: {capable}",
            )
        ]
    table = entry.mig_table or entry.name
    valid = ", ".join(p.name for p in entry.mig_profiles)
    if mig.profile is not None:
        if entry.mig_profile(mig.profile) is None:
            return [
                Problem(
                    "spec.mig.profile",
                    mig.profile,
                    f"mig profile {mig.profile} is not offered by {table}; valid: {valid}",
                )
            ]
        return []
    assert mig.profiles is not None
    problems: list[Problem] = []
    profiles: list[catalog.MigProfile] = []
    for index, name in enumerate(mig.profiles):
        profile = entry.mig_profile(name)
        if profile is None:
            problems.append(
                Problem(
                    f"spec.mig.profiles[{index}]",
                    name,
                    f"mig profile {name} is not offered by {table}; valid: {valid}",
                )
            )
        else:
            profiles.append(profile)
    if problems:
        return problems
    for name, count in Counter(mig.profiles).items():
        profile = entry.mig_profile(name)
        assert profile is not None
        if count > profile.max_instances:
            problems.append(
                Problem(
                    "spec.mig.profiles",
                    mig.profiles,
                    f"{table} fits at most {profile.max_instances} x {name} per GPU, got {count}",
                )
            )
    compute = sum(p.compute_slices for p in profiles)
    memory = sum(p.memory_slices for p in profiles)
    if compute > entry.mig_compute_slices or memory > entry.mig_memory_slices:
        problems.append(
            Problem(
                "spec.mig.profiles",
                mig.profiles,
                f"layout does not fit one {table}: needs {compute} of {entry.mig_compute_slices} compute "
                f"and {memory} of {entry.mig_memory_slices} memory slices",
            )
        )
    return problems


# ---------------------------------------------------------------- status


class Condition(Model):
    """The standard metav1.Condition shape."""

    type: str = Field(
        description="Valid, NodesSelected, MigConfigured, DevicePluginConfigured, AgentReady, Healthy, Ready."
    )
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = Field(None, description="RFC 3339 time the status last changed.")
    observed_generation: int | None = Field(None, description="The spec generation the condition describes.")


class NodeCounts(Model):
    """Member counts."""

    desired: int = 0
    members: int = 0
    ready: int = 0
    quarantined: int = 0
    summary: str = Field("0/0", description="members/desired, for `kubectl get`.")


class Capacity(Model):
    """What the pool really offers now."""

    gpus: int = Field(0, description="Devices on member nodes.")
    memory_gib: int = Field(0, alias="memoryGiB", description="Device memory on member nodes, GiB.")
    resources: dict[str, int] = Field(
        default_factory=dict, description="What pods can request, e.g. nvidia.com/mig-3g.40gb."
    )
    measured_tflops: float | None = Field(
        None, alias="measuredTFLOPS", description="Sum of the latest matmul results in the policy's dtype."
    )


class Toleration(Model):
    """A pod toleration, as in a pod spec."""

    key: str
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = Field(None, description="Taint value (with operator Equal).")
    effect: str | None = Field(None, description="NoSchedule, PreferNoSchedule or NoExecute.")


class Scheduling(Model):
    """Copy into a pod spec to land on the pool."""

    node_selector: dict[str, str] = Field(default_factory=dict, description="Labels every member carries.")
    tolerations: list[Toleration] = Field(default_factory=list, description="Taints every member carries.")


class Member(Model):
    """One member node as the operator sees it."""

    node: str
    gpus: int = 0
    health: Literal["Healthy", "Unhealthy", "Unknown", "Quarantined"] = "Unknown"
    reason: str | None = Field(None, description="Why the node is not Healthy.")
    since: str | None = Field(None, description="RFC 3339 time the health last changed.")
    mig: str | None = Field(None, description="nvidia.com/mig.config.state: pending, success, failed.")
    tflops: float | None = Field(None, description="The node's latest matmul result, summed over its GPUs.")


MAX_STATUS_MEMBERS = 100


class ComputePoolStatus(Model):
    """Written by the operator only."""

    observed_generation: int | None = Field(None, description="The spec generation this status describes.")
    phase: Literal["Pending", "Provisioning", "Configuring", "Ready", "Degraded", "Failed"] = "Pending"
    accelerator: str | None = Field(None, description="The resolved accelerator, e.g. 'H100-80GB x8'.")
    selector: str | None = Field(None, description="Label selector of member nodes (for the scale subresource).")
    nodes: NodeCounts = Field(default_factory=NodeCounts)
    capacity: Capacity = Field(default_factory=Capacity)
    scheduling: Scheduling = Field(default_factory=Scheduling)
    members: list[Member] = Field(
        default_factory=list,
        max_length=MAX_STATUS_MEMBERS,
        description="The first 100 members; all are counted in nodes.",
    )
    conditions: list[Condition] = Field(default_factory=list)


class ObjectMeta(BaseModel):
    """What the API server decodes of metadata; the name's rules are `name_problems`, in the server's order."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    name: str = ""
    generation: int | None = None


def name_problems(name: Any) -> list[Problem]:
    """A ComputePool's name as the API server judges it: ObjectMeta's rules (k8s.io/apiextensions-apiserver
    pkg/registry/customresource/validator.go: ValidateObjectMetaAccessor with NameIsDNSSubdomain), then the
    CRD schema's `maxLength` (a pool's name is the value of its nodes' `accelpool.io/pool` label)."""
    if not isinstance(name, str):
        return []  # ObjectMeta's decoder refuses it first (a type error on metadata.name)
    if not name:
        return [Problem("metadata.name", None, "name or generateName is required", error_type="Required")]
    problems = []
    if not re.fullmatch(DNS1123_SUBDOMAIN, name) or len(name) > 253:
        problems.append(Problem("metadata.name", name, DNS1123_SUBDOMAIN_MESSAGE))
    if len(name) > MAX_POOL_NAME:
        problems.append(
            Problem(
                "metadata.name", name, f"may not be more than {MAX_POOL_NAME} bytes", error_type="TooLong", shown=None
            )
        )
    return problems


class ComputePool(BaseModel):
    """The whole object as it comes from the API server or a YAML file."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    api_version: Literal["accelpool.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["ComputePool"]
    metadata: ObjectMeta
    spec: ComputePoolSpec
    status: ComputePoolStatus | None = None


# ---------------------------------------------------------------- helpers


_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration_within(text: str, low: float, high: float) -> bool:
    try:
        seconds = parse_duration(text)
    except ValueError:
        return False
    return math.isfinite(seconds) and low <= seconds <= high


def parse_duration(text: str) -> float:
    """`15m`, `1h30m`, `90s` → seconds."""
    if not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError(f"duration {text!r} is not like 15m, 1h30m or 90s")
    return sum(float(n) * _DURATION_UNITS[u] for n, u in re.findall(r"([0-9.]+)(ms|s|m|h)", text))
