"""`accelpool-agent check` without `--backend`: the backend is detected from fake /dev and /sys trees."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from accelpool_agent.backends import (
    BACKENDS,
    BackendError,
    create_backend,
    device_vendor,
)
from accelpool_agent.backends.detect import Probes, detect_backend
from accelpool_core.protocol import VENDOR_BACKENDS


def probes(
    root: Path, *, libraries: tuple[str, ...] = (), modules: tuple[str, ...] = (), tools: tuple[str, ...] = ()
) -> Probes:
    return Probes(
        root=root,
        library_loads=lambda name: name in libraries,
        module_importable=lambda name: name in modules,
        on_path=lambda name: name in tools,
    )


def touch(root: Path, *paths: str, text: str = "") -> None:
    for relative in paths:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_host_with_nothing_gets_the_cpu_backend(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    assert detect_backend(probes(tmp_path)).backend == "cpu"


def test_nvidia_is_found_by_its_library_or_its_control_node(tmp_path: Path) -> None:
    assert detect_backend(probes(tmp_path, libraries=("libnvidia-ml.so.1",))).evidence == "libnvidia-ml.so.1 loads"
    touch(tmp_path, "dev/nvidiactl")
    assert detect_backend(probes(tmp_path)).backend == "nvml"


def test_amd_is_found_by_kfd_or_the_amdsmi_module(tmp_path: Path) -> None:
    assert detect_backend(probes(tmp_path, modules=("amdsmi",))).backend == "amdsmi"
    touch(tmp_path, "dev/kfd")
    detection = detect_backend(probes(tmp_path))
    assert (detection.backend, detection.evidence) == ("amdsmi", "/dev/kfd exists")


def test_neuron_is_found_by_its_device_or_neuron_monitor(tmp_path: Path) -> None:
    assert detect_backend(probes(tmp_path, tools=("neuron-monitor",))).backend == "neuron"
    touch(tmp_path, "dev/neuron0")
    assert detect_backend(probes(tmp_path)).evidence == "/dev/neuron0 exists"


def test_tpu_v4_is_found_by_its_accel_nodes(tmp_path: Path) -> None:
    touch(tmp_path, "dev/accel0", "dev/accel1")
    assert detect_backend(probes(tmp_path)).evidence == "/dev/accel0 exists"


def test_tpu_v5_is_found_by_vfio_groups_and_a_google_pci_device(tmp_path: Path) -> None:
    touch(tmp_path, "dev/vfio/vfio", "dev/vfio/0")
    assert detect_backend(probes(tmp_path)).backend == "cpu"  # vfio alone: any passthrough device
    touch(tmp_path, "sys/bus/pci/devices/0000:00:04.0/vendor", text="0x10de\n")
    assert detect_backend(probes(tmp_path)).backend == "cpu"  # an NVIDIA card passed through
    touch(tmp_path, "sys/bus/pci/devices/0000:00:05.0/vendor", text="0x1ae0\n")
    detection = detect_backend(probes(tmp_path))
    assert detection.backend == "tpu"
    assert "0000:00:05.0" in detection.evidence


def test_tpu_is_found_by_libtpu_or_tpu_info(tmp_path: Path) -> None:
    assert detect_backend(probes(tmp_path, tools=("tpu-info",))).evidence == "tpu-info is on PATH"
    assert detect_backend(probes(tmp_path, modules=("libtpu",))).evidence == "the libtpu module is importable"


def test_nvidia_wins_over_a_vendor_tool_that_happens_to_be_installed(tmp_path: Path) -> None:
    touch(tmp_path, "dev/nvidiactl")
    assert detect_backend(probes(tmp_path, modules=("amdsmi",), tools=("neuron-monitor",))).backend == "nvml"


def test_every_vendor_has_a_registered_backend() -> None:
    assert set(VENDOR_BACKENDS.values()) <= set(BACKENDS)


def test_a_vendor_backend_missing_from_the_build_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "accelpool_agent.backends.tpu", None)  # what importing a missing module does
    with pytest.raises(BackendError, match="'tpu' is not part of this agent build"):
        create_backend("tpu")


def test_a_devices_vendor_comes_from_its_catalog_model_else_its_backend() -> None:
    assert device_vendor("MI300X", "fake") == "amd"
    assert device_vendor(None, "neuron") == "aws"
    assert device_vendor(None, "cuda") == "nvidia"
    assert device_vendor(None, "cpu") == ""
