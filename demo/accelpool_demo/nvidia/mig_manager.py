"""NVIDIA's MIG manager (`MigManager`): reacting to `nvidia.com/mig.config`, applying a mig-parted
entry to the GPUs (`apply_entry`), and the states it writes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from accelpool_core import catalog
from accelpool_demo.nvidia.devices import Gpu, Installation


def apply_entry(entry: Any, gpus: tuple[Gpu, ...], *, broken: bool = False) -> tuple[Gpu, ...]:
    """mig-parted `apply`: each GPU takes the first device spec that selects it (`devices: all` or its index).

    A profile the GPU does not offer makes the whole GPU's layout empty (mig-parted's `Flatten` returns
    nothing); `broken` (a demo fault) creates nothing at all.
    GPUs that are not MIG-capable are left alone.
    """
    specs = entry if isinstance(entry, list) else []
    result = []
    for index, gpu in enumerate(gpus):
        spec = next(
            (
                s
                for s in specs
                if isinstance(s, dict)
                and (s.get("devices") == "all" or (isinstance(s.get("devices"), list) and index in s["devices"]))
            ),
            None,
        )
        model = catalog.BY_NAME[gpu.model]
        if spec is None or not model.mig_capable:
            result.append(gpu)
            continue
        if not spec.get("mig-enabled"):
            result.append(replace(gpu, mig_enabled=False, mig_devices=()))
            continue
        wanted = spec.get("mig-devices") if isinstance(spec.get("mig-devices"), dict) else {}
        # A profile the GPU does not offer: mig-parted's layout flattens to nothing and the GPU gets no MIG
        # device at all, while the apply still succeeds (recorded: ../shared/fidelity/nvidia/mig-parted.yaml).
        offered = all(model.mig_profile(str(profile)) is not None for profile in (wanted or {}))
        devices = tuple(
            str(profile) for profile, count in (wanted or {}).items() if offered for _ in range(int(count or 0))
        )
        result.append(replace(gpu, mig_enabled=True, mig_devices=() if broken else devices))
    return tuple(result)


@dataclass(frozen=True)
class MigStep:
    """One MIG manager step: its new state and GPUs, the states it wrote, whether it restarted the plugin and GFD."""

    manager: MigManager
    gpus: tuple[Gpu, ...]
    states: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    restarted_clients: bool = False


@dataclass(frozen=True)
class MigManager:
    """NVIDIA's MIG manager on one node: `SyncableMigConfig` fed by the node informer, and the reconfigure loop."""

    started: bool = False
    label: str = ""
    """The informer's last value of `nvidia.com/mig.config` ("" when absent)."""
    current: str = ""
    last_read: str = ""
    waiting: bool = False
    """Blocked in `Get()` until a broadcast (only a non-empty `Set` broadcasts)."""
    woken: bool = False
    running: str | None = None
    phase: str = ""
    due: float = 0.0

    def _set(self, value: str) -> MigManager:
        return replace(self, current=value, woken=self.woken or (self.waiting and value != ""))

    def step(
        self,
        label: str | None,
        configs: Mapping[str, Any] | None,
        gpus: tuple[Gpu, ...],
        now: float,
        installation: Installation,
        *,
        broken: bool = False,
    ) -> MigStep:
        if configs is None:  # the ConfigMap has not reached the node: the pod is not running yet
            return MigStep(self, gpus)
        value = label or ""
        manager = self
        if not manager.started:  # the informer's AddFunc
            manager = replace(manager, started=True, label=value)._set(value)
        elif value != manager.label:  # UpdateFunc: only a changed value
            manager = replace(manager, label=value)._set(value)
        states: list[str] = []
        events: list[str] = []
        restarted = False
        for _ in range(16):  # bounded: every pass either blocks or finishes a run
            if manager.running is None:
                if manager.waiting:
                    if not manager.woken:
                        break
                    manager = replace(manager, waiting=False, woken=False)
                elif manager.last_read == manager.current:
                    manager = replace(manager, waiting=True, woken=False)
                    break
                selected = manager.current
                manager = replace(manager, last_read=selected)
                if selected not in configs:
                    states.append("failed")
                    events.append(f"mig-manager: config {selected!r} is not in the mounted mig-parted file: failed")
                    continue
                target = apply_entry(configs[selected], gpus, broken=broken)
                if target == gpus:
                    states.append("success")
                    continue
                states.append("pending")
                manager = replace(manager, running=selected, phase="pending", due=now + installation.apply_seconds)
            if now < manager.due:
                break
            running = manager.running or ""
            if running not in configs:  # the file changed under the run: mig-parted apply fails
                states.append("failed")
                events.append(f"mig-manager: config {running!r} left the mounted mig-parted file: failed")
                manager = replace(manager, running=None, phase="", due=0.0)
                continue
            target = apply_entry(configs[running], gpus, broken=broken)
            mode_change = any(g.mig_enabled != t.mig_enabled for g, t in zip(gpus, target, strict=True))
            if manager.phase == "pending" and installation.with_reboot and mode_change:
                states.append("rebooting")
                gpus = tuple(replace(g, mig_enabled=t.mig_enabled) for g, t in zip(gpus, target, strict=True))
                manager = replace(manager, phase="rebooting", due=now + installation.reboot_seconds)
                continue
            if manager.phase == "rebooting":  # back from the reboot: a new MIG manager reads the label afresh
                events.append("mig-manager: node rebooted")
                manager = replace(MigManager(), started=True, label=manager.label)._set(manager.label)
                continue
            gpus = target
            states.append("success")
            events.append(f"mig-manager: applied {running}")
            restarted = True
            manager = replace(manager, running=None, phase="", due=0.0)
        return MigStep(manager, gpus, tuple(states), tuple(events), restarted)


# ---------------------------------------------------------------- one node
