"""A script that uses the Python API ends cleanly: no aiohttp "Unclosed client session" (nor any other
ResourceWarning) when it never calls `Cluster.close()`, when it ends with an exception, or when its cluster
is the environment's default. Each script runs as a user runs it, in a process of its own (ResourceWarnings
shown), against the emulated API server served by the test's loop.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from accelpool_demo.apiserver import RunningApiServer, serving
from accelpool_sdk.cluster import POOLS

APPLY = """
import accelpool_sdk as ap
pool = ap.ComputePool("train", "H100:8", nodes=2)
pool.apply()
print("status:", pool.status())
"""


async def run_script(code: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run `code` in a fresh interpreter with ResourceWarnings shown; its exit status and stdout+stderr."""
    script = await asyncio.create_subprocess_exec(
        sys.executable,
        "-W",
        "always::ResourceWarning",
        "-c",
        code,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    output, _ = await asyncio.wait_for(script.communicate(), 120)
    assert script.returncode is not None
    return script.returncode, output.decode()


@pytest.fixture
async def emulator() -> AsyncIterator[RunningApiServer]:
    async with serving() as running:
        yield running


def clean(output: str) -> None:
    assert "Unclosed" not in output, output
    assert "ResourceWarning" not in output, output


async def test_a_script_that_never_closes_its_cluster_ends_without_unclosed_session_warnings(
    emulator: RunningApiServer,
) -> None:
    connect = f"import accelpool_sdk as ap\nap.Cluster.connect(server={emulator.url!r})\n"
    returncode, output = await run_script(connect + APPLY)
    assert returncode == 0, output
    assert "status: None" in output
    assert emulator.get(f"{POOLS}/train") is not None
    clean(output)


async def test_a_script_that_ends_with_an_exception_ends_without_unclosed_session_warnings(
    emulator: RunningApiServer,
) -> None:
    connect = f"import accelpool_sdk as ap\nap.Cluster.connect(server={emulator.url!r})\n"
    code = connect + APPLY + "pool.wait_until_ready(timeout=1, progress=False)\n"
    returncode, output = await run_script(code)
    assert returncode == 1, output
    assert "PoolNotReadyError: ComputePool train not Ready after 1s: no status yet" in output
    clean(output)


async def test_the_environments_default_cluster_is_closed_too(emulator: RunningApiServer, tmp_path: Path) -> None:
    kubeconfig = {
        "current-context": "demo",
        "contexts": [{"name": "demo", "context": {"cluster": "demo", "user": "demo"}}],
        "clusters": [{"name": "demo", "cluster": {"server": emulator.url}}],
        "users": [{"name": "demo", "user": {}}],
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    environment = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    environment["KUBECONFIG"] = str(tmp_path / "kubeconfig")
    returncode, output = await run_script(APPLY, env=environment)
    assert returncode == 0, output
    assert emulator.get(f"{POOLS}/train") is not None
    clean(output)


async def test_a_closed_cluster_says_so_and_closing_twice_is_harmless(emulator: RunningApiServer) -> None:
    code = f"""
import accelpool_sdk as ap
with ap.Cluster.connect(server={emulator.url!r}) as cluster:
    ap.ComputePool("train", "H100:8").apply()
cluster.close()
try:
    ap.ComputePool("train", "H100:8").apply()
except RuntimeError as error:
    print(error)
"""
    returncode, output = await run_script(code)
    assert returncode == 0, output
    assert f"Cluster('{emulator.url}', closed) is closed: ap.Cluster.connect() again" in output
    clean(output)
