"""NVIDIA's MIG manager (`MigManager`): reacting to `nvidia.com/mig.config`, applying a mig-parted
entry to the GPUs (`apply_entry`), and the states it writes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from accelpool_core import catalog
from accelpool_demo.nvidia.devices import NVIDIA_VENDOR_ID, Gpu, Installation


def apply_entry(entry: Any, gpus: tuple[Gpu, ...], *, broken: bool = False) -> tuple[Gpu, ...]:
    """mig-parted `apply`: each device spec of the entry, in order, applied to every GPU it selects.

    A spec selects a GPU when its `device-filter` (absent, one ID or a list) names the GPU's PCI device ID
    and its `devices` are `all` or hold the GPU's index (NVIDIA/mig-parted `cmd/nvidia-mig-parted/assert/
    assert.go` `WalkSelectedMigConfigForEachGPU`, `api/spec/v1/helpers.go` `MatchesDeviceFilter` and
    `MatchesDevices`): NVIDIA's default entries hold one spec per group of boards, and a GPU takes only
    its own. A profile the GPU does not offer makes the whole GPU's layout empty (mig-parted's `Flatten`
    returns nothing); `broken` (a demo fault) creates nothing at all. GPUs that are not MIG-capable are
    left alone.
    """
    specs = [s for s in entry if isinstance(s, dict)] if isinstance(entry, list) else []
    result = list(gpus)
    for spec in specs:
        for index, gpu in enumerate(result):
            if not (_selects_board(spec.get("device-filter"), gpu) and _selects_index(spec.get("devices"), index)):
                continue
            model = catalog.BY_NAME[gpu.model]
            if not model.mig_capable:
                continue
            if not spec.get("mig-enabled"):
                result[index] = replace(gpu, mig_enabled=False, mig_devices=())
                continue
            wanted = spec.get("mig-devices") if isinstance(spec.get("mig-devices"), dict) else {}
            # A profile the GPU does not offer: mig-parted's layout flattens to nothing and the GPU gets no MIG
            # device at all, while the apply still succeeds (recorded: ../shared/fidelity/nvidia/mig-parted.yaml).
            offered = all(model.mig_profile(str(profile)) is not None for profile in (wanted or {}))
            devices = tuple(
                str(profile) for profile, count in (wanted or {}).items() if offered for _ in range(int(count or 0))
            )
            result[index] = replace(gpu, mig_enabled=True, mig_devices=() if broken else devices)
    return tuple(result)


def _selects_board(device_filter: Any, gpu: Gpu) -> bool:
    """`MatchesDeviceFilter`: no filter selects every GPU; else one of its IDs (`0x20B010DE`: device, then vendor,
    parsed as Go's `strconv.ParseUint(s, 0, 32)`) must be the GPU's. An ID that does not parse matches nothing;
    one with a subsystem (`...:0x...`) matches nothing here (simulated GPUs carry no subsystem ID)."""
    filters = [device_filter] if isinstance(device_filter, str) and device_filter else device_filter
    if not filters or not isinstance(filters, list):
        return True
    board = gpu.device_id
    for text in filters:
        try:
            raw = int(str(text), 0)
        except ValueError:
            continue
        if ":" not in str(text) and board is not None and raw == (board << 16 | NVIDIA_VENDOR_ID):
            return True
    return False


def _selects_index(devices: Any, index: int) -> bool:
    """`MatchesDevices`: `all`, or a list of indexes holding this GPU's."""
    return devices == "all" or (isinstance(devices, list) and index in devices)


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
    """NVIDIA's MIG manager on one node: `SyncableMigConfig` fed by the node informer, and the reconfigure loop.

    NVIDIA/mig-parted `cmd/nvidia-mig-manager/main.go`: `ContinuouslySyncMigConfigChanges` calls `Set` from
    AddFunc, and from UpdateFunc whenever an event's value differs from the previous object's; client-go hands
    every watch event to the handler, oldest first (kubernetes/client-go `tools/cache/controller.go`
    `processDeltas`; `delta_fifo.go` `dedupDeltas` merges only deletions). `Set` broadcasts any non-empty value;
    `Get` waits only while `lastRead == current`, and a single `if` (no loop) returns after any broadcast: a
    value set away and back between two runs wakes it, and it runs the same config again."""

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
        seen: Sequence[str | None] = (),
    ) -> MigStep:
        """One step at `now`; `label` is the node's value now, `seen` the values its watch events carried since the
        last step (oldest first): the informer hands every event to UpdateFunc, so a value that came and went
        between two steps still wakes the manager."""
        if configs is None:  # the ConfigMap has not reached the node: the pod is not running yet
            return MigStep(self, gpus)
        manager = self
        if not manager.started:  # the informer's AddFunc: its first list shows only the value now
            value = label or ""
            manager = replace(manager, started=True, label=value)._set(value)
        for event in (*seen, label) if self.started else ():
            value = event or ""
            if value != manager.label:  # UpdateFunc: only a changed value
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
