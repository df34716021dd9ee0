"""Which Kubernetes release the emulated API server is, and how it was started: what decides the APIs it
serves where releases differ (today `resource.k8s.io`: `dra`). Pure data.

A real kube-apiserver's served APIs follow its release and two flags, which `Release` models by their
names: `--runtime-config` (group versions switched on or off, `resource.k8s.io/v1beta2=true`) and
`--feature-gates` (`DRADeviceTaintRules=true`). Only the entries whose effect the emulator models are
accepted; anything else is a ValueError naming what would be valid. The defaults are the release's own
(k8s.io/kubernetes pkg/features/kube_features.go; pkg/registry/resource/rest/storage_resource.go for what
each gate serves):

| | 1.36 | 1.37 |
|---|---|---|
| `resource.k8s.io/v1` | served | served |
| `resource.k8s.io/v1beta2` | off (beta APIs are off by default) | off |
| `DRADeviceTaintRules` | beta, off | GA, on |
| DeviceTaintRule | v1beta2, with the gate and the runtime-config | v1 (and v1beta2 with its runtime-config) |

The default is 1.37: the demo behaves as a 1.37 cluster. The transcripts under `../shared/fidelity`
were recorded on 1.36.2 started with `--runtime-config=resource.k8s.io/v1beta2=true
--feature-gates=DRADeviceTaintRules=true` (`RECORDED`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

VERSIONS = ("1.36", "1.37")
"""The releases modelled (`major.minor`)."""
DEFAULT_VERSION = "1.37"
PATCH_VERSIONS = {"1.36": "1.36.2", "1.37": "1.37.0"}
"""The patch release `/version` names (1.36.2: the recorded server's)."""
GATE_DEFAULTS: Mapping[str, Mapping[str, bool]] = {"DRADeviceTaintRules": {"1.36": False, "1.37": True}}
"""The feature gates modelled, and their default per release (kube_features.go)."""
GROUP_VERSION_DEFAULTS: Mapping[str, Mapping[str, bool]] = {
    "resource.k8s.io/v1": {"1.36": True, "1.37": True},
    "resource.k8s.io/v1beta2": {"1.36": False, "1.37": False},
}
"""The group versions `--runtime-config` may switch, and whether each is served by default."""


def _frozen(found: Mapping[str, bool] | None) -> Mapping[str, bool]:
    return MappingProxyType(dict(found or {}))


@dataclass(frozen=True)
class Release:
    """A kube-apiserver release and the flags it was started with (see the module docstring)."""

    version: str = DEFAULT_VERSION
    runtime_config: Mapping[str, bool] = field(default_factory=dict)
    """`--runtime-config`: group version (`resource.k8s.io/v1beta2`) → served or not."""
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    """`--feature-gates`: gate (`DRADeviceTaintRules`) → on or off."""

    def __post_init__(self) -> None:
        if self.version not in VERSIONS:
            raise ValueError(f"kubernetes_version: {self.version!r} is not modelled; valid: {', '.join(VERSIONS)}")
        for name, table, flag in (
            ("runtime_config", GROUP_VERSION_DEFAULTS, self.runtime_config),
            ("feature_gates", GATE_DEFAULTS, self.feature_gates),
        ):
            for key, value in flag.items():
                if key not in table:
                    raise ValueError(f"{name}: {key!r} is not modelled; valid: {', '.join(table)}")
                if not isinstance(value, bool):
                    raise ValueError(f"{name}[{key!r}]: {value!r} is not true or false")
        object.__setattr__(self, "runtime_config", _frozen(self.runtime_config))
        object.__setattr__(self, "feature_gates", _frozen(self.feature_gates))

    def gate(self, name: str) -> bool:
        """Whether a feature gate is on (its setting, else the release's default)."""
        return self.feature_gates.get(name, GATE_DEFAULTS[name][self.version])

    def serves(self, group_version: str) -> bool:
        """Whether a group version is served (its runtime-config, else the release's default)."""
        return self.runtime_config.get(group_version, GROUP_VERSION_DEFAULTS[group_version][self.version])

    @property
    def minor(self) -> int:
        return int(self.version.split(".")[1])

    def server_version(self) -> dict[str, str]:
        """What `/version` answers."""
        major, minor = self.version.split(".")
        return {
            "major": major,
            "minor": minor,
            "gitVersion": f"v{PATCH_VERSIONS[self.version]}",
            "platform": "linux/amd64",
        }


RECORDED = Release(
    "1.36", runtime_config={"resource.k8s.io/v1beta2": True}, feature_gates={"DRADeviceTaintRules": True}
)
"""The recorded server's release and flags (../shared/fidelity/kubernetes/README.md)."""
