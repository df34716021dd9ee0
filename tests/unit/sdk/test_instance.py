"""Inside a pod: instance_info(), current_accelerator() and the is_*() predicates, through the device agent's
backends (the fake backend simulates each vendor's node), falling back to the host CPU."""

from __future__ import annotations

import pytest

import accelpool_sdk as ap
from accelpool_agent.backends.detect import detect_backend, host_probes
from accelpool_sdk import instance


@pytest.mark.parametrize(
    ("fake_gpus", "vendor", "name", "memory_gb", "true"),
    [
        ("H100:8", "nvidia", "H100-80GB", 80.0, {"is_nvidia", "is_gpu"}),
        ("MI300X:8", "amd", "MI300X", 192.0, {"is_amd", "is_gpu"}),
        ("Trainium2:16", "aws", "Trainium2", 96.0, {"is_trainium"}),
        ("Inferentia2:1", "aws", "Inferentia2", 32.0, {"is_inferentia"}),
        ("TPU-v5p:4", "google", "TPU-v5p", 95.0, {"is_tpu"}),
    ],
)
def test_a_simulated_node_of_each_vendor(
    monkeypatch: pytest.MonkeyPatch, fake_gpus: str, vendor: str, name: str, memory_gb: float, true: set[str]
) -> None:
    info = ap.instance_info(backend="fake", fake_gpus=fake_gpus)
    count = int(fake_gpus.split(":")[1])
    assert (info.backend, info.vendor, info.accelerators, info.note) == ("fake", vendor, count, None)
    assert {d.model for d in info.devices} == {name}
    assert {d.memory_gb for d in info.devices} == {memory_gb}
    assert info.driver is not None
    assert info.accelerator is not None
    assert (info.accelerator.name, info.accelerator.count) == (name, count)

    monkeypatch.setenv(instance.BACKEND_ENV, "fake")  # what the calls without arguments read
    monkeypatch.setenv(instance.FAKE_GPUS_ENV, fake_gpus)
    from_environment = ap.instance_info()
    assert from_environment.devices == info.devices
    assert from_environment.evidence == "backend fake from $ACCELPOOL_BACKEND"
    current = ap.current_accelerator()
    assert isinstance(current, ap.Accelerator) and current.name == name and current.count == count
    predicates = {"is_nvidia", "is_amd", "is_gpu", "is_trainium", "is_inferentia", "is_tpu"}
    assert {p for p in predicates if getattr(ap, p)()} == true


def test_the_host_cpu_when_asked_for() -> None:
    info = ap.instance_info(backend="cpu")
    assert (info.backend, info.vendor, info.accelerators, info.accelerator) == ("cpu", None, 0, None)
    assert len(info.devices) == 1 and info.devices[0].memory_gb


@pytest.mark.parametrize("backend", ["amdsmi", "neuron", "tpu"])
def test_a_vendor_backend_that_sees_no_device_falls_back_to_the_cpu_and_says_why(backend: str) -> None:
    """No AMD, Neuron or TPU device on the test host: the vendor's backend opens with an error."""
    info = ap.instance_info(backend=backend)
    assert (info.backend, info.vendor, info.accelerator) == ("cpu", None, None)
    assert info.note is not None and info.note.startswith(f"the {backend} backend sees no device: ")


def test_a_fake_node_without_devices_is_the_cpu_and_a_bad_fake_model_is_refused() -> None:
    info = ap.instance_info(backend="fake", fake_gpus="H100:0")
    assert (info.backend, info.note) == ("cpu", "the fake backend sees no device: no device visible")
    with pytest.raises(ValueError, match=r"invalid --fake-gpus 'H1000:8': unknown accelerator 'H1000'; did you mean"):
        ap.instance_info(backend="fake", fake_gpus="H1000:8")
    with pytest.raises(
        ValueError, match=r"unknown backend 'nvidia'; valid: nvml, amdsmi, neuron, tpu, cuda, cpu, fake"
    ):
        ap.instance_info(backend="nvidia")


def test_without_arguments_the_backend_is_the_one_the_agent_detects_on_this_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(instance.BACKEND_ENV, raising=False)
    monkeypatch.delenv(instance.FAKE_GPUS_ENV, raising=False)
    detected = detect_backend(host_probes())
    info = ap.instance_info()
    assert info.evidence == detected.evidence
    assert info.backend == detected.backend or (info.backend == "cpu" and info.note is not None)
    assert ap.current_accelerator() == info.accelerator
    assert ap.is_gpu() == (info.vendor in ("nvidia", "amd"))
