"""Each vendor's agent reaches its devices as the vendor's own DaemonSets do: NVIDIA's through the NVIDIA
container runtime, unprivileged; AMD's, Neuron's and TPU's privileged as root with the host's /dev; a
simulated backend (fake, cpu) with neither, in the default image."""

from __future__ import annotations

from typing import Any

import pytest

from accelpool.decide import agent_access, render
from accelpool.decide.render import AgentRendering

from .conftest import pool

RESTRICTED = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
HOST_DEVICES = {"privileged": True, "runAsUser": 0, "runAsNonRoot": False, "readOnlyRootFilesystem": True}
DEV_VOLUME = {"name": "dev", "hostPath": {"path": "/dev"}}
DEV_MOUNT = {"name": "dev", "mountPath": "/dev"}


def pod_spec(accelerator: str, settings: AgentRendering | None = None, **health: Any) -> dict[str, Any]:
    spec = pool("p", {"accelerator": accelerator, "health": health}).spec
    assert spec is not None
    found: dict[str, Any] = render.daemonset("p", "uid", spec, settings or AgentRendering())["spec"]["template"]["spec"]
    return found


@pytest.mark.parametrize(
    ("accelerator", "backend", "image"),
    [
        ("MI300X:8", "amdsmi", "ghcr.io/accelpool/accelpool-agent-rocm:0.1.0"),
        ("Trainium2:16", "neuron", "ghcr.io/accelpool/accelpool-agent-neuron:0.1.0"),
        ("TPU-v5p:4", "tpu", "ghcr.io/accelpool/accelpool-agent-tpu:0.1.0"),
    ],
)
def test_non_nvidia_agents_run_their_vendors_image_privileged_as_root_with_the_hosts_dev(
    accelerator: str, backend: str, image: str
) -> None:
    pod = pod_spec(accelerator)
    (container,) = pod["containers"]
    assert container["image"] == image
    assert container["args"][-1] == backend
    assert container["securityContext"] == HOST_DEVICES
    assert DEV_MOUNT in container["volumeMounts"] and DEV_VOLUME in pod["volumes"]
    assert "runtimeClassName" not in pod, "the NVIDIA runtime is only for NVIDIA pools"
    assert not any(e["name"].startswith("NVIDIA_") for e in container["env"])


def test_nvidia_agents_stay_unprivileged_behind_the_nvidia_runtime() -> None:
    pod = pod_spec("H100:8")
    (container,) = pod["containers"]
    assert container["image"] == agent_access.DEFAULT_AGENT_IMAGE
    assert (pod["runtimeClassName"], container["securityContext"]) == ("nvidia", RESTRICTED)
    assert DEV_VOLUME not in pod["volumes"]
    privileged = pod_spec("H100:8", AgentRendering(privileged=True))
    assert privileged["containers"][0]["securityContext"] == {"privileged": True, "readOnlyRootFilesystem": True}
    assert DEV_VOLUME in privileged["volumes"]


@pytest.mark.parametrize("accelerator", ["MI300X:8", "Trainium2:16", "TPU-v5p:4"])
def test_a_simulated_backend_opens_no_device_and_runs_the_default_image(accelerator: str) -> None:
    """kind and the demo load only the default image; `fake` and `cpu` are in every image."""
    settings = AgentRendering(image="r/agent:1", backend="fake")
    for pod in (pod_spec(accelerator, settings), pod_spec(accelerator, backend="cpu")):
        (container,) = pod["containers"]
        assert container["securityContext"] == RESTRICTED
        assert DEV_VOLUME not in pod["volumes"]
    assert pod_spec(accelerator, settings)["containers"][0]["image"] == "r/agent:1"


def test_image_for_takes_the_vendors_image_unless_the_backend_is_simulated() -> None:
    images = {"amd": "r/rocm:1"}
    assert agent_access.image_for("amd", "amdsmi", "r/agent:1", images) == "r/rocm:1"
    assert agent_access.image_for("amd", "fake", "r/agent:1", images) == "r/agent:1"
    assert agent_access.image_for("aws", "neuron", "r/agent:1", images) == "r/agent:1"
    assert agent_access.image_for("nvidia", "cuda", "r/agent:1", {"nvidia": "r/cuda:2"}) == "r/cuda:2"


def test_every_vendor_backend_but_nvidias_needs_host_devices() -> None:
    """The table covers exactly the backends of the vendors without a container runtime of their own."""
    assert set(agent_access.HOST_DEVICE_BACKENDS) == {"amdsmi", "neuron", "tpu"}
    assert set(agent_access.DEFAULT_VENDOR_IMAGES) == {"amd", "aws", "google"}
    assert agent_access.host_devices("nvml") is None and agent_access.host_devices("fake") is None
