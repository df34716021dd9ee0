"""Each pool's agent runs the backend and image of its accelerator's vendor, overridable per pool and by flag."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from pydantic import ValidationError

import accelpool_api as api
from accelpool.decide import render
from accelpool.decide.render import AgentRendering
from accelpool.runtime.settings import OperatorConfig, add_arguments

from .conftest import pool

VENDOR_POOLS = {"H100:8": "nvml", "MI300X:8": "amdsmi", "Trainium2:16": "neuron", "TPU-v5p:4": "tpu"}


def spec(accelerator: str, **health: Any) -> api.ComputePoolSpec:
    found = pool("p", {"accelerator": accelerator, "health": health}).spec
    assert found is not None
    return found


def container(spec_: api.ComputePoolSpec, settings: AgentRendering) -> dict[str, Any]:
    daemonset = render.daemonset("p", "uid-p", spec_, settings)
    found: dict[str, Any] = daemonset["spec"]["template"]["spec"]["containers"][0]
    return found


def backend_argument(spec_: api.ComputePoolSpec, settings: AgentRendering) -> str:
    args: list[str] = container(spec_, settings)["args"]
    return args[args.index("--backend") + 1]


def config(*argv: str) -> OperatorConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser, {})
    return OperatorConfig.from_args(parser.parse_args(argv))


def test_each_vendors_pool_gets_its_vendors_backend() -> None:
    for accelerator, backend in VENDOR_POOLS.items():
        assert backend_argument(spec(accelerator), AgentRendering()) == backend, accelerator


def test_a_pools_own_backend_wins_then_the_operators_one_backend() -> None:
    assert backend_argument(spec("MI300X:8", backend="fake"), AgentRendering(backend="cpu")) == "fake"
    assert backend_argument(spec("MI300X:8"), AgentRendering(backend="fake")) == "fake"
    assert backend_argument(spec("MI300X:8"), AgentRendering(backends={"amd": "cpu"})) == "cpu"


def test_a_pools_backend_must_be_one_the_agent_has() -> None:
    with pytest.raises(ValidationError, match="'nvml', 'amdsmi', 'neuron', 'tpu', 'cuda', 'cpu' or 'fake'"):
        api.ComputePoolSpec.model_validate({"accelerator": "MI300X", "health": {"backend": "rocm"}})


def test_each_vendors_pool_gets_its_vendors_image_else_the_default_image() -> None:
    settings = AgentRendering(image="r/agent:1", images={"amd": "r/agent-rocm:1", "google": "r/agent-tpu:1"})
    assert container(spec("MI300X:8"), settings)["image"] == "r/agent-rocm:1"
    assert container(spec("TPU-v5p:4"), settings)["image"] == "r/agent-tpu:1"
    assert container(spec("H100:8"), settings)["image"] == "r/agent:1"
    assert container(spec("Trainium2:16"), settings)["image"] == "r/agent:1"


def test_the_flags_set_backends_and_images_per_vendor() -> None:
    configured = config("--agent-backends=amd=cpu", "--agent-images=aws=r/agent-neuron:1")
    assert configured.agent.backends == {"nvidia": "nvml", "amd": "cpu", "aws": "neuron", "google": "tpu"}
    assert configured.agent.images == {
        "amd": "ghcr.io/accelpool/accelpool-agent-rocm:0.1.0",
        "aws": "r/agent-neuron:1",
        "google": "ghcr.io/accelpool/accelpool-agent-tpu:0.1.0",
    }
    assert configured.agent.backend is None
    assert config("--agent-backend=fake").agent.backend == "fake"
    assert config("--agent-backend=").agent.backend is None


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("--agent-backend=rocm", "backend 'rocm' is not one of nvml, amdsmi, neuron, tpu, cuda, cpu, fake"),
        ("--agent-backends=intel=nvml", "'intel=nvml' is not VENDOR=VALUE with VENDOR one of nvidia, amd, aws, google"),
        ("--agent-backends=amd=rocm", "backend 'rocm' for vendor amd is not one of nvml, amdsmi"),
        ("--agent-images=amd", "'amd' is not VENDOR=VALUE"),
    ],
)
def test_bad_vendor_flags_name_the_value_and_what_is_valid(
    argument: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        config(argument)
    assert message in capsys.readouterr().err


def test_a_pools_backend_must_check_its_vendors_devices() -> None:
    with pytest.raises(ValidationError, match=r"spec.health.backend: Invalid value: \"amdsmi\": the amdsmi backend "):
        api.ComputePoolSpec.model_validate({"accelerator": "H100", "health": {"backend": "amdsmi"}})
    with pytest.raises(ValidationError, match="cannot check TPU-v5p \\(vendor google\\); valid: tpu, cpu, fake"):
        api.ComputePoolSpec.model_validate({"accelerator": "TPU-v5p", "health": {"backend": "cuda"}})
    for accelerator, backend in (("H100", "cuda"), ("MI300X", "fake"), ("Trainium2", "neuron"), ("TPU-v5p", "cpu")):
        api.ComputePoolSpec.model_validate({"accelerator": accelerator, "health": {"backend": backend}})
