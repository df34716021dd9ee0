"""`accelpool demo` stops on Ctrl-C (SIGINT) and on SIGTERM: it exits, the operator and every agent
process it started are gone with it, and so is its temporary directory. It runs from a directory
that is not the repository's: it finds its fleet and the example pools wherever it is started."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from accelpool_core.credentials import Credentials
from accelpool_core.kube import ApiError, KubeClient
from accelpool_demo.run import POOLS_PATH, all_ready
from tests.integration.operator.conftest import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
BIN = Path(sys.executable).parent
LONG_RUN_REQUESTS = 3000


def _children(pid: int) -> dict[int, str]:
    """The live child processes of PID, with their command lines."""
    found: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found[int(stat.parent.name)] = command
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent has not collected it yet


async def _pools(client: KubeClient) -> list[dict[str, Any]]:
    with contextlib.suppress(OSError, ApiError):  # the API server is starting
        return await client.list(POOLS_PATH)
    return []


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_a_signal_stops_the_demo_and_every_process_it_started(stop: signal.Signals, tmp_path: Path) -> None:
    port = free_port()
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    demo = await asyncio.create_subprocess_exec(
        str(BIN / "accelpool"),
        "demo",
        "--no-tui",
        "--port",
        str(port),
        "--metrics-port",
        str(free_port()),
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(temporary)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    started: dict[int, str] = {}
    try:
        async with KubeClient(Credentials(server=f"http://127.0.0.1:{port}"), timeout=10) as client:
            while not all_ready(await _pools(client)):  # every example pool, as a user would wait
                assert demo.returncode is None, "the demo exited before it was stopped"
                await asyncio.sleep(1)
            # About seven minutes' worth of the demo's own traffic (its kubelet and MIG manager
            # poll twice a second): kmock once slowed with every request it had served.
            for _ in range(LONG_RUN_REQUESTS // 50):
                await asyncio.gather(*(client.list("/api/v1/nodes") for _ in range(50)))
        started = _children(demo.pid)
        assert any("accelpool-agent" in command for command in started.values()), "agents run"
        assert any(" run --server " in command for command in started.values()), "the operator runs"

        demo.send_signal(stop)
        code = await demo.wait()
    finally:
        if demo.returncode is None:  # a failure above: take its processes down with it
            started.update(_children(demo.pid))
            demo.kill()
            await demo.wait()
        left = {pid: command for pid, command in started.items() if _alive(pid)}
        for pid in left:  # leave nothing running on the machine, whatever the outcome
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    assert code in (0, 130)
    assert not left, f"still running after the demo exited: {left}"
    assert entries(temporary) == []


def entries(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())
