"""The fake backend simulates each vendor's devices as that vendor's tools show them."""

from __future__ import annotations

from accelpool_agent.backends.fake import FakeBackend, parse_fake_gpus
from accelpool_agent.faults import faults_by_gpu, parse_fault_spec


def fake(spec: str, faults: str = "") -> FakeBackend:
    accelerator, count = parse_fake_gpus(spec)
    specs = [parse_fault_spec(f"0:{faults}")] if faults else []
    return FakeBackend(accelerator, count, faults=faults_by_gpu(specs, count))


def test_mi300x_devices_are_named_as_amd_smi_names_them_with_xgmi_links() -> None:
    backend = fake("MI300X:8")
    device = backend.inventory()[0]
    assert (device.name, device.memory_total_bytes, device.compute_capability) == (
        "AMD Instinct MI300X",
        192 * 2**30,
        None,
    )
    assert not device.uuid.startswith("GPU-")
    reading = backend.telemetry()[0]
    assert reading.nvlinks is not None and len(reading.nvlinks) == 7
    assert reading.fabric is None
    assert backend.versions().cuda is None


def test_trainium2_and_tpu_devices_have_no_links_and_their_catalog_memory() -> None:
    for spec, name, memory_gb in (("Trainium2:16", "Trainium2", 96), ("TPU-v5p:4", "TPU v5p", 95)):
        backend = fake(spec)
        device = backend.inventory()[0]
        assert (device.name, device.memory_total_bytes) == (name, memory_gb * 2**30)
        reading = backend.telemetry()[0]
        assert reading.nvlinks is None and reading.fabric is None
        assert backend.infiniband() == []


def test_every_vendor_loses_a_device_and_reports_its_old_driver() -> None:
    for spec in ("MI300X:8", "Trainium2:16", "TPU-v5p:4"):
        assert fake(spec, "lost").telemetry()[0].lost
        assert fake(spec, "old-driver").versions() != fake(spec).versions()
