"""How a config reaches the plugin: the kubelet's ConfigMap projection (`Projection`, a sync delay)
and the device plugin's config-manager sidecar (`ConfigManager`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from accelpool.model import nvidia as nvidia_configs
from accelpool_demo.nvidia.devices import NAMED_FALLBACK, Installation


@dataclass
class Projection:
    """A ConfigMap's data as mounted in pods: an update shows `delay` seconds after it was observed."""

    delay: float = 0.0
    parse: Callable[[Mapping[str, str]], Any] = dict
    _history: list[tuple[float, int, Any]] = field(default_factory=list)
    _last: Mapping[str, str] | None = None
    _versions: int = 0

    def observe(self, data: Mapping[str, str] | None, now: float) -> None:
        """The ConfigMap's data in the API now (None while it does not exist: the pods keep what they have)."""
        if data is None or data == self._last:
            return
        self._last = dict(data)
        self._versions += 1
        self._history.append((now, self._versions, self.parse(self._last)))

    def mounted(self, now: float) -> tuple[int, Any]:
        """(version, parsed data) the pods see now; (0, None) before anything reached them."""
        visible = [i for i, (t, _, _) in enumerate(self._history) if t <= now - self.delay]
        if not visible:
            return 0, None
        del self._history[: visible[-1]]  # older versions can no longer be seen
        _, version, parsed = self._history[0]
        return version, parsed


def mig_configs(data: Mapping[str, str]) -> dict[str, Any]:
    """The `mig-configs` entries of a mig-parted ConfigMap's documents."""
    configs: dict[str, Any] = {}
    for text in data.values():
        document = nvidia_configs.load(text)
        if isinstance(document, dict) and isinstance(document.get("mig-configs"), dict):
            configs.update(document["mig-configs"])
    return configs


# ---------------------------------------------------------------- the config-manager sidecar


@dataclass(frozen=True)
class ConfigManager:
    """The device plugin's (and GFD's) config-manager sidecar, and the config the plugin runs with."""

    started: bool = False
    label: str = ""
    selected: str | None = None
    """The key the plugin's config symlink points to ("" = the empty config); None before the first."""
    document: str | None = None
    """The config text the plugin and GFD loaded (None: the empty config)."""
    error: str = ""
    restart_at: float = 0.0

    def step(
        self, label: str | None, mounted: Mapping[str, str] | None, now: float, installation: Installation
    ) -> tuple[ConfigManager, tuple[str, ...]]:
        if mounted is None:  # the ConfigMap has not reached the node: the pod is not running yet
            return self, ()
        value = label or ""
        if not self.started:
            return replace(self, started=True, label=value)._select(value, mounted, now, installation)
        if self.error:  # exited: the kubelet restarts it after a back-off; it reads the label afresh
            if now < self.restart_at:
                return self, ()
            return replace(self, label=value)._select(value, mounted, now, installation)
        if value != self.label:
            return replace(self, label=value)._select(value, mounted, now, installation)
        return self, ()

    def _select(
        self, value: str, mounted: Mapping[str, str], now: float, installation: Installation
    ) -> tuple[ConfigManager, tuple[str, ...]]:
        key: str | None = value
        if not value and installation.default_config:  # `updateConfigName`: DEFAULT_CONFIG before any fallback
            key = installation.default_config
        elif not value:
            named = NAMED_FALLBACK if NAMED_FALLBACK in mounted else None
            key = "" if installation.fallback == "empty" else named
        if key is None or (key and key not in mounted):
            error = (
                f"specified config {key} does not exist"
                if key
                else "no config was set, no default was provided, and all fallbacks failed"
            )
            failed = replace(self, error=error, restart_at=now + installation.restart_seconds)
            return failed, (f"config-manager exited: {error}; the device plugin keeps its current config",)
        if key == self.selected:  # "Already configured. Skipping update..." (no signal)
            return replace(self, error=""), ()
        loaded = replace(self, selected=key, document=mounted[key] if key else None, error="")
        return loaded, (f"device plugin and GFD reloaded with config {key or '(empty)'}",)

    def reloaded(self, mounted: Mapping[str, str] | None) -> ConfigManager:
        """The plugin and GFD restarted: they read the selected key's mounted content again."""
        if not self.selected or mounted is None or self.selected not in mounted:
            return self
        return replace(self, document=mounted[self.selected])


# ---------------------------------------------------------------- the MIG manager
