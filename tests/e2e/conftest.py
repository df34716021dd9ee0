"""The kind e2e tier: a real cluster whose workers pretend to be 8-GPU H100 nodes, the chart
installed with helm, the images built by `make images`.

Every test here is marked `e2e`. Without Docker, kind, helm or kubectl they skip with the reason
`hack/e2e-preflight.sh` gives; under `make e2e` (ACCELPOOL_E2E=1) they fail instead. Settings:

- OPERATOR_IMAGE, AGENT_IMAGE: the images to load into kind (`make e2e` passes the ones it built;
  unset, the tier skips saying so);
- E2E_CLUSTER: the kind cluster's name (default accelpool-e2e);
- E2E_KEEP_CLUSTER=1: leave the cluster running afterwards, for a look around.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.contract.prometheus import wait_for
from tests.support.environment import ROOT, TOOLS_BIN

KIND_CONFIG = Path(__file__).resolve().parent / "kind-config.yaml"
NAMESPACE = "accelpool-system"
RELEASE = "accelpool"
T = TypeVar("T")


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{TOOLS_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


@dataclass(frozen=True)
class Cluster:
    """kubectl, helm and kind against the e2e cluster, each call bounded in time."""

    name: str
    kubeconfig: Path

    def run(self, *command: str, timeout: float = 120, check: bool = True, stdin: str | None = None) -> str:
        completed = subprocess.run(
            command, input=stdin, capture_output=True, text=True, timeout=timeout, check=False, env=self.env()
        )
        if check and completed.returncode != 0:
            raise AssertionError(f"{' '.join(command)} exited {completed.returncode}:\n{completed.stderr[-4000:]}")
        return completed.stdout

    def env(self) -> dict[str, str]:
        return {**_env(), "KUBECONFIG": str(self.kubeconfig)}

    def kubectl(self, *args: str, timeout: float = 120, check: bool = True, stdin: str | None = None) -> str:
        return self.run("kubectl", *args, timeout=timeout, check=check, stdin=stdin)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def helm(self, *args: str, timeout: float = 600) -> str:
        return self.run("helm", *args, timeout=timeout)

    def until(self, what: str, probe: Callable[[], T | None], *, timeout: float, interval: float = 2.0) -> T:
        """Poll `probe` until it returns something truthy; fail saying `what` (and the pools) after `timeout`."""
        try:
            return wait_for(what, probe, timeout=timeout, interval=interval)
        except TimeoutError as error:
            pools = self.kubectl("get", "computepools", "-o", "wide", check=False)
            raise AssertionError(f"{error}\n{pools}") from error


@pytest.fixture(scope="session")
def e2e_ready() -> None:
    """Skip (or, under `make e2e`, fail) with the preflight's reason when this machine cannot run it."""
    preflight = subprocess.run(
        [str(ROOT / "hack" / "e2e-preflight.sh")], capture_output=True, text=True, env=_env(), timeout=60, check=False
    )
    if preflight.returncode != 0:
        reason = (preflight.stderr or preflight.stdout).strip()
        if os.environ.get("ACCELPOOL_E2E") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def missing_images(environ: Mapping[str, str]) -> str | None:
    """Why the images to test are unknown (the variables not set), or None when both are named."""
    unset = [name for name in ("OPERATOR_IMAGE", "AGENT_IMAGE") if not environ.get(name)]
    if not unset:
        return None
    return f"{' and '.join(unset)} not set: `make e2e` builds the images and sets both"


@pytest.fixture(scope="session")
def images(e2e_ready: None) -> tuple[str, str]:
    """The images to load into kind; skipped (failed under `make e2e`) when they are not named."""
    why = missing_images(os.environ)
    if why is not None:
        if os.environ.get("ACCELPOOL_E2E") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return os.environ["OPERATOR_IMAGE"], os.environ["AGENT_IMAGE"]


@pytest.fixture(scope="session")
def cluster(images: tuple[str, str]) -> Iterator[Cluster]:
    name = os.environ.get("E2E_CLUSTER", "accelpool-e2e")
    with tempfile.TemporaryDirectory(prefix="accelpool-e2e-") as work:
        kind = Cluster(name, Path(work) / "kubeconfig")
        existing = kind.run("kind", "get", "clusters", timeout=60).split()
        if name in existing:
            kind.run("kind", "export", "kubeconfig", "--name", name, "--kubeconfig", str(kind.kubeconfig))
        else:
            kind.run(
                "kind", "create", "cluster", "--name", name, "--config", str(KIND_CONFIG),
                "--kubeconfig", str(kind.kubeconfig), "--wait", "180s", timeout=600,
            )  # fmt: skip
        try:
            for image in images:
                kind.run("kind", "load", "docker-image", image, "--name", name, timeout=600)
            yield kind
        finally:
            if os.environ.get("E2E_KEEP_CLUSTER") != "1":
                kind.run("kind", "delete", "cluster", "--name", name, timeout=300, check=False)
