"""How the agent is installed: its image carries the `cuda` extra and never torch; the gpu test
tier installs the same extra plus torch (the root pyproject.toml's `gpu` dependency group)."""

from __future__ import annotations

import tomllib

from tests.support.environment import ROOT


def test_the_gpu_group_is_the_agents_cuda_extra_plus_torch() -> None:
    agent = tomllib.loads((ROOT / "device-agent" / "pyproject.toml").read_text())["project"]
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]
    cuda = set(agent["optional-dependencies"]["cuda"])
    gpu = set(groups["gpu"])
    assert cuda <= gpu, f"the gpu group lacks part of the cuda extra: {sorted(cuda - gpu)}"
    assert {r.split(">")[0].split("=")[0] for r in gpu - cuda} == {"torch"}


def test_the_agent_image_installs_the_cuda_extra_and_no_torch() -> None:
    """The image installs requirements-agent.lock, locked from the agent with its cuda extra."""
    dockerfile = (ROOT / "device-agent" / "Dockerfile").read_text()
    lock = (ROOT / "requirements-agent.lock").read_text()
    assert "-r requirements-agent.lock" in dockerfile
    assert "\ncupy-cuda12x==" in lock and "\nml-dtypes==" in lock
    assert "\ntorch==" not in lock and "\nkopf==" not in lock
