"""`accelpool demo inject` as a user types it: a fault the agent would refuse, a GPU the node lacks, or a
node the cluster lacks is a usage error (exit 2) that says what is valid, with no traceback and nothing
written; a valid fault reaches the node. The command runs as a process against the demo's API server."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from accelpool_agent.faults import FaultKind, parse_fault_spec
from accelpool_core.kube import KubeClient
from accelpool_demo import command
from accelpool_demo.apiserver import serving
from accelpool_demo.injection import InjectionError, InjectionKind, agent_fault_argument, parse_injection
from accelpool_demo.run import load_fleet
from accelpool_demo.simulators import FAULT_ANNOTATION

ACCELPOOL = Path(sys.executable).parent / "accelpool"


@pytest.mark.parametrize("kind", list(FaultKind))
def test_every_fault_the_agent_takes_is_injectable(kind: FaultKind) -> None:
    fault = f"{kind.value}=79" if kind is FaultKind.XID else kind.value
    injection = parse_injection(fault)
    assert injection.kind is InjectionKind.AGENT
    assert injection.value == f"0:{fault}" == agent_fault_argument(fault)
    assert parse_fault_spec(injection.value).faults[0].kind is kind


@pytest.mark.parametrize(
    ("fault", "why"),
    [
        ("xid=abc", "xid needs a positive integer"),
        ("frobnicate", "unknown fault 'frobnicate'"),
        ("hang=3", "hang takes no value"),
        ("2-1:lost", "GPU range '2-1' is empty"),
        ("strategy-override=none", "the strategy is single, mixed or off"),
    ],
)
def test_a_fault_the_agent_would_refuse_is_refused_with_the_valid_ones(fault: str, why: str) -> None:
    with pytest.raises(InjectionError) as refused:
        parse_injection(fault)
    message = str(refused.value)
    assert why in message
    for valid in ("xid=<n>", "ecc-dbe", "mig-broken", "no-runtime-class", "strategy-override=single|mixed|off"):
        assert valid in message


@dataclass
class DemoApi:
    server: str
    client: KubeClient

    async def state(self) -> list[dict[str, Any]]:
        """Every object an injection may write."""
        return [
            *await self.client.list("/api/v1/nodes"),
            *await self.client.list("/api/v1/namespaces/accelpool-system/configmaps"),
            *await self.client.list("/apis/node.k8s.io/v1/runtimeclasses"),
        ]

    async def inject(self, *args: str) -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            str(ACCELPOOL), "demo", "inject", *args, "--server", self.server,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await process.communicate()
        assert process.returncode is not None
        return process.returncode, out.decode(), err.decode()


@pytest.fixture
async def demo_api() -> AsyncIterator[DemoApi]:
    """The demo's API server with its fleet: what `accelpool demo inject` talks to."""
    async with serving() as api:
        api.put("/api/v1/namespaces", {"metadata": {"name": "accelpool-system"}})
        async with api.client() as client:
            for node in load_fleet():
                await client.create("/api/v1/nodes", node)
            yield DemoApi(api.url, client)


@pytest.mark.timeout(60)
async def test_an_invalid_fault_is_a_usage_error_listing_the_valid_ones(demo_api: DemoApi) -> None:
    before = await demo_api.state()
    for fault in ("xid=abc", "frobnicate"):
        code, out, err = await demo_api.inject("h100-1", fault)
        assert code == 2
        assert f"invalid fault {fault!r}" in err and "valid faults:" in err and "slow-matmul" in err
        assert "Traceback" not in err and out == ""
    assert await demo_api.state() == before


@pytest.mark.timeout(60)
async def test_an_unknown_node_is_named_with_some_that_exist(demo_api: DemoApi) -> None:
    before = await demo_api.state()
    code, out, err = await demo_api.inject("h100-9", "xid=79")
    assert (code, out) == (2, "")
    assert err.strip() == (
        "accelpool demo inject: no node 'h100-9' in the demo cluster; "
        "its nodes: a100-1, a100-2, cpu-1, cpu-2, h100-1, h100-2, ... (20 in all)"
    )
    code, _, err = await demo_api.inject("l4-1", "3:xid=79")  # an L4 node has one GPU
    assert code == 2
    assert "GPU 3 does not exist; valid GPU indexes: 0-0" in err and "Traceback" not in err
    assert await demo_api.state() == before


@pytest.mark.timeout(60)
async def test_a_valid_fault_reaches_the_node(demo_api: DemoApi) -> None:
    code, out, _ = await demo_api.inject("h100-2", "7:slow-matmul=3")
    assert code == 0 and "h100-2" in out
    node = await demo_api.client.get("/api/v1/nodes/h100-2")
    assert node["metadata"]["annotations"][FAULT_ANNOTATION] == "7:slow-matmul=3"
    code, out, _ = await demo_api.inject("-", "strategy-override=single")  # cluster-wide: no node
    assert code == 0 and "strategy single" in out


@pytest.mark.parametrize(
    ("argv", "server"),
    [
        (["demo", "inject", "h100-1", "xid=79"], "http://127.0.0.1:18080"),
        (["demo", "--port", "18099", "inject", "h100-1", "xid=79"], "http://127.0.0.1:18099"),
        (["demo", "--port", "18099", "inject", "h100-1", "xid=79", "--server", "http://a:1"], "http://a:1"),
    ],
)
def test_inject_reaches_the_demo_on_its_own_port(argv: list[str], server: str) -> None:
    """`accelpool demo --port P inject ...` sends the fault to the demo serving on P, not to 18080."""
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    assert command.demo_server(parser.parse_args(argv)) == server
