"""`accelpool demo` as a script runs it: `--until-ready` stops it as soon as every pool is Ready (exit 0) or at
`--for` (exit 1), and with its output in a pipe it prints plain tables, each one only when it changed."""

from __future__ import annotations

import asyncio
import itertools
import sys
from pathlib import Path

import pytest

from tests.integration.operator.conftest import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[3]
NEVER_READY = """\
apiVersion: accelpool.io/v1alpha1
kind: ComputePool
metadata: {name: too-big}
spec: {accelerator: "H100:8", nodes: 9}
"""


async def demo(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(BIN / "accelpool"),
        "demo",
        "--port",
        str(free_port()),
        "--metrics-port",
        str(free_port()),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def tables(output: str) -> list[str]:
    """The tables printed while it ran (each after its `Ns` line) and the final one."""
    blocks = output.split("\nPOOL ")[1:]
    return ["POOL " + block.split("\n\n")[0] for block in blocks]


async def test_until_ready_stops_once_every_pool_is_ready_and_prints_plain_tables_when_they_change() -> None:
    pools = ROOT / "examples" / "l4-inference-timesliced.yaml"
    code, out, err = await demo("--examples", str(pools), "--until-ready", "--for", "10m")
    assert code == 0, err
    assert "\x1b" not in out, "no terminal control codes into a pipe"
    printed = tables(out)
    assert len(printed) >= 2, out
    live = printed[:-1]  # the last is the final table, printed when it stops
    assert all(before != after for before, after in itertools.pairwise(live)), "each printed when it changed"
    assert printed[-1].splitlines()[1].split()[0] == "l4-inference" and " Ready " in printed[-1]
    assert "MEMBERS in the pool/asked for" in out


async def test_until_ready_exits_1_when_a_pool_is_not_ready_by_the_end_of_for(tmp_path: Path) -> None:
    never = tmp_path / "too-big.yaml"
    never.write_text(NEVER_READY)
    code, out, err = await demo("--examples", str(never), "--until-ready", "--for", "15s", "--no-tui")
    assert code == 1, err
    assert "too-big" in out.splitlines()[-1]
