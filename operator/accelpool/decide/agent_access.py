"""How each vendor's agent reaches its node's devices, and which image carries its backend's libraries.

The agent never requests the devices it watches (it would take them from the workloads), so it
needs another way to open them, the one each vendor's own node DaemonSets use:

- NVIDIA (`nvml`, `cuda`): the NVIDIA container runtime (`runtimeClassName`, with
  `NVIDIA_VISIBLE_DEVICES=all`) injects the driver's device nodes and NVML into an unprivileged
  container; `render.daemonset` renders it, as before this module.
- AMD (`amdsmi`): privileged, with the host's /dev mounted: amdsmi and HIP open /dev/kfd and
  /dev/dri/renderD<n>. AMD's own health-checking device plugin DaemonSet does exactly this
  (ROCm/k8s-device-plugin `k8s-ds-amdgpu-dp-health.yaml`: `privileged: true #Needed for /dev`,
  hostPath `/dev`; its README: "the device plugin container requires privileged security context
  to access /dev/kfd"). Those nodes are `root:render` 0660 on the host (amdgpu's udev rules), and
  the render group's id differs between hosts, so the agent runs as root there, as AMD's
  container does.
- AWS (`neuron`): privileged, with the host's /dev mounted: `neuron-monitor` opens /dev/neuron<n>.
  AWS's neuron-monitor DaemonSet (aws-neuron-sdk `src/k8/k8s-neuron-monitor-daemonset.yml`) runs
  its container `privileged: true` (as root, the image's user).
- Google (`tpu`): privileged, with the host's /dev mounted: the chips are /dev/vfio/<n> (v5e, v5p,
  v6e) or /dev/accel<n> (older), which tpu-info lists (cloud.google.com/tpu/docs/tpu-info-cli).
  No Google DaemonSet that monitors TPUs without requesting them was found to compare with.
- `fake`, `cpu`: no device is opened; the default (NVIDIA) image carries both, so a simulated
  cluster (kind, the demo) needs only that one image whatever its pools' vendors.

Mounting /dev (rather than relying on the runtime adding every host device to a privileged
container) also covers containerd's `privileged_without_host_devices = true`. Privileged pods need
the agents' namespace at Pod Security level `privileged`. Pure data and lookups: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_AGENT_IMAGE = "ghcr.io/accelpool/accelpool-agent:0.1.0"
"""The NVIDIA image (device-agent/Dockerfile): NVML and CuPy's CUDA build, and the simulated backends."""
DEFAULT_VENDOR_IMAGES: Mapping[str, str] = {
    "amd": "ghcr.io/accelpool/accelpool-agent-rocm:0.1.0",
    "aws": "ghcr.io/accelpool/accelpool-agent-neuron:0.1.0",
    "google": "ghcr.io/accelpool/accelpool-agent-tpu:0.1.0",
}
"""Each non-NVIDIA catalog vendor's image (device-agent/Dockerfile.rocm, .neuron, .tpu)."""
SIMULATED_BACKENDS = frozenset({"fake", "cpu"})
"""Backends that open no device: they run in the default image, with no device access."""


@dataclass(frozen=True)
class HostDevices:
    """A backend that opens the host's device files directly: privileged, as root, /dev mounted."""

    devices: tuple[str, ...]
    """The device files the backend opens (documentation; the whole /dev is mounted)."""
    source: str
    """The vendor's own DaemonSet (or document) this access follows."""


HOST_DEVICE_BACKENDS: Mapping[str, HostDevices] = {
    "amdsmi": HostDevices(("/dev/kfd", "/dev/dri/renderD*"), "ROCm/k8s-device-plugin k8s-ds-amdgpu-dp-health.yaml"),
    "neuron": HostDevices(("/dev/neuron*",), "aws-neuron-sdk src/k8/k8s-neuron-monitor-daemonset.yml"),
    "tpu": HostDevices(("/dev/vfio/*", "/dev/accel*"), "cloud.google.com/tpu/docs/tpu-info-cli"),
}


def host_devices(backend: str) -> HostDevices | None:
    """The host device access a backend needs; None when the NVIDIA runtime (or nothing) gives it."""
    return HOST_DEVICE_BACKENDS.get(backend)


def image_for(vendor: str, backend: str, default: str, images: Mapping[str, str]) -> str:
    """The image that carries `backend`'s libraries for a `vendor` pool: the vendor's entry in
    `images`, else `default`; a simulated backend (`fake`, `cpu`) always runs `default`."""
    if backend in SIMULATED_BACKENDS:
        return default
    return images.get(vendor) or default
