"""The backend registry: every backend registers itself in its module, and choosing, building, detecting and
listing backends all go through it; help and errors say which backends cannot run on a host, and why."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from accelpool_agent import cli
from accelpool_agent.backends import (
    BACKENDS,
    BackendError,
    backend_choices,
    backend_help,
    create_backend,
    registration,
    registrations,
)
from accelpool_agent.backends.probes import NVML_LIBRARY, Probes
from accelpool_core.protocol import AGENT_BACKENDS


def host(*, libraries: tuple[str, ...] = (), modules: tuple[str, ...] = (), tools: tuple[str, ...] = ()) -> Probes:
    return Probes(
        root=Path("/nonexistent"),
        library_loads=lambda name: name in libraries,
        module_importable=lambda name: name in modules,
        on_path=lambda name: name in tools,
    )


def test_every_protocol_backend_registers_itself_under_its_name_in_order() -> None:
    assert BACKENDS == AGENT_BACKENDS
    assert [r.name for r in registrations()] == list(AGENT_BACKENDS)


@pytest.mark.parametrize("name", [name for name in AGENT_BACKENDS if name != "fake"])
def test_each_host_backend_is_built_by_its_registration(name: str, tmp_path: Path) -> None:
    backend = create_backend(name, sysfs_root=tmp_path)
    assert backend.name == name
    assert backend.infiniband() == [], "its InfiniBand ports are read under the given sysfs root"


def test_only_the_fake_takes_the_simulation_options() -> None:
    assert [r.name for r in registrations() if "fake_gpus" in r.takes] == ["fake"]
    fake = create_backend("fake", fake_gpus="MI300X:2", seed=3)
    assert [d.model for d in fake.inventory()] == ["MI300X", "MI300X"]


def test_only_the_vendor_backends_are_detected_in_registry_order() -> None:
    detected = [(r.name, r.detector.devices) for r in registrations() if r.detector is not None]
    assert detected == [("nvml", "NVIDIA"), ("amdsmi", "AMD"), ("neuron", "Neuron"), ("tpu", "TPU")]


def test_a_backend_is_unavailable_while_what_it_needs_is_missing() -> None:
    assert registration("amdsmi").unavailable(host()) == "needs the amdsmi module"
    assert registration("amdsmi").unavailable(host(modules=("amdsmi",))) is None
    nvml = registration("nvml")
    assert nvml.unavailable(host(modules=("pynvml",))) == f"needs {NVML_LIBRARY} (NVIDIA's driver)"
    assert nvml.unavailable(host(modules=("pynvml",), libraries=(NVML_LIBRARY,))) is None
    tpu = registration("tpu")
    assert tpu.unavailable(host(tools=("tpu-info",))) is None, "either libtpu or tpu-info will do"
    assert registration("cpu").unavailable(host()) is None and registration("fake").unavailable(host()) is None


def test_errors_list_every_backend_and_why_those_that_cannot_run_here_cannot() -> None:
    everything = host(
        libraries=(NVML_LIBRARY,), modules=("pynvml", "amdsmi", "libtpu", "cupy"), tools=("neuron-monitor",)
    )
    assert backend_choices(everything) == "valid: nvml, amdsmi, neuron, tpu, cuda, cpu, fake"
    lacking = backend_choices(host(modules=("pynvml", "amdsmi", "libtpu", "cupy")))
    assert lacking == (
        "valid: nvml, amdsmi, neuron, tpu, cuda, cpu, fake (unavailable here: "
        f"nvml: needs {NVML_LIBRARY} (NVIDIA's driver); neuron: needs neuron-monitor on PATH)"
    )


def test_a_backend_missing_from_the_build_is_still_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "accelpool_agent.backends.neuron", None)
    assert "neuron" not in [r.name for r in registrations()]
    text = backend_help(host(modules=("amdsmi",)))
    assert "neuron [unavailable here: not part of this agent build (no module accelpool_agent.backends.neuron)]" in text
    assert "amdsmi: AMD Instinct (amdsmi + CuPy ROCm); " in text, "what it needs is there: not marked"
    with pytest.raises(BackendError, match="backend 'neuron' is not part of this agent build"):
        create_backend("neuron")


def test_backend_help_and_errors_mark_the_backends_this_host_cannot_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "host_probes", lambda: host(modules=("pynvml",), libraries=(NVML_LIBRARY,)))
    with pytest.raises(SystemExit):
        cli.main(["check", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for name in AGENT_BACKENDS:
        assert f"{name}: " in help_text
    assert (
        "nvml: NVIDIA (NVML + CuPy); "
        "amdsmi: AMD Instinct (amdsmi + CuPy ROCm) [unavailable here: needs the amdsmi module]" in help_text
    )
    with pytest.raises(SystemExit) as exit_:
        cli.main(["check", "--backend", "rocm"])
    assert exit_.value.code == 2
    assert (
        "invalid choice: 'rocm'; valid: nvml, amdsmi, neuron, tpu, cuda, cpu, fake (unavailable here: amdsmi: needs"
        in (capsys.readouterr().err)
    )
