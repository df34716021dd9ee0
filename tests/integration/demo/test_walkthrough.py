"""The demo's walkthrough (docs/tutorial/demo.md), its commands run in the order it gives them, as a user
runs them (the real kubectl, `accelpool`, `python examples/python_api.py`), against the demo as `accelpool
demo` starts it: its fleet, its workloads, the example pools with the demo's hold-down. Between commands,
the test waits for what the page says happens next (on conditions, never on time).

Each command is checked to be on the page, in this order: a change to the page or to the fleet that breaks
a step fails here."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from accelpool_demo.run import (
    POOLS_PATH,
    SimulatedCluster,
    all_ready,
    demo_pools,
    load_fleet,
    load_workloads,
    simulated_cluster,
)
from tests.support.environment import require_tool
from tests.support.waiting import HANG_GUARD, SAFETY_SECONDS, eventually

pytestmark = [pytest.mark.integration, HANG_GUARD]
ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "tutorial" / "demo.md"
DEMO_SERVER = "http://127.0.0.1:18080"
DEVICE_TAINT_RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
BIN = Path(sys.executable).parent


class Walkthrough:
    """The page's commands, run one after the other against a running demo."""

    def __init__(self, demo: SimulatedCluster) -> None:
        self.demo = demo
        self.page = PAGE.read_text()
        self.at = 0

    async def run(self, command: str, *, expect: int = 0) -> str:
        """Run COMMAND as the page writes it (after the last one run: the page's order), against this demo."""
        found = self.page.find(command, self.at)
        assert found >= 0, f"not on {PAGE.name} after the previous step: {command}"
        self.at = found + len(command)
        argv = shlex.split(command.replace(DEMO_SERVER, self.demo.server), comments=True)
        tools = {
            ".tools/bin/kubectl": require_tool("kubectl"),
            ".venv/bin/accelpool": str(BIN / "accelpool"),
            ".venv/bin/python": sys.executable,
        }
        argv[0] = tools[argv[0]]
        if argv[1:3] == ["demo", "inject"]:
            argv += ["--server", self.demo.server]  # the page's demo listens on 18080, the default
        done = await asyncio.to_thread(
            subprocess.run, argv, cwd=ROOT, capture_output=True, text=True, timeout=SAFETY_SECONDS, check=False
        )
        assert done.returncode == expect, f"{command}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr

    async def pool(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = await self.demo.client.get(f"{POOLS_PATH}/{name}")
        return found

    async def taints(self, node: str) -> dict[str, str]:
        found = await self.demo.client.get(f"/api/v1/nodes/{node}")
        return {t["key"]: t.get("value", "") for t in found.get("spec", {}).get("taints") or []}

    async def members(self, pool: str) -> set[str]:
        nodes = await self.demo.client.list("/api/v1/nodes", label_selector=f"accelpool.io/pool={pool}")
        return {n["metadata"]["name"] for n in nodes}

    async def events(self, reason: str) -> list[str]:
        found = await self.demo.client.list("/api/v1/namespaces/default/events")
        return [e["message"] for e in found if e.get("reason") == reason]

    async def condition(self, pool: str, kind: str) -> dict[str, Any]:
        conditions = ((await self.pool(pool)).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == kind), {})

    async def phase(self, pool: str) -> str:
        return str(((await self.pool(pool)).get("status") or {}).get("phase"))


async def test_the_walkthrough_works_step_by_step_in_the_order_the_page_gives() -> None:
    async with simulated_cluster(load_fleet(), workloads=load_workloads()) as demo:
        for pool in demo_pools((ROOT / "examples",)):
            await demo.client.create(POOLS_PATH, pool)

        async def every_pool_ready() -> bool:
            return all_ready(await demo.client.list(POOLS_PATH))

        await eventually(every_pool_ready, "every example pool Ready")
        page = Walkthrough(demo)

        # 1. Look around: who holds which node, as the page says.
        assert (await page.pool("llm-training"))["spec"]["health"]["holdDown"] == "30s"
        assert await page.members("h100-mixed") == {"h100-1"}
        assert await page.members("llm-training") == {"h100-2", "h100-3"}
        await page.run(".tools/bin/kubectl --server http://127.0.0.1:18080 get cpool")
        wide = await page.run(".tools/bin/kubectl --server http://127.0.0.1:18080 get cpool -o wide")
        assert wide.splitlines()[0].split()[-3:] == ["REASON", "QUARANTINED", "TFLOPS"]
        await page.run(".tools/bin/kubectl --server http://127.0.0.1:18080 get nodes -L accelpool.io/pool")

        # 2 and 3. A spare that will fail burn-in, then a member's GPU off the bus.
        await page.run(".venv/bin/accelpool demo inject h100-4 xid=79")
        await page.run(".venv/bin/accelpool demo inject h100-2 xid=79")

        async def replaced() -> bool:
            status = (await page.pool("llm-training")).get("status") or {}
            return (
                (await page.taints("h100-2")).get("accelpool.io/quarantined") == "XidError79"
                and (await page.taints("h100-4")).get("accelpool.io/burn-in") == "failed"
                and "accelpool.io/burn-in" not in await page.taints("h100-5")
                and await page.members("llm-training") == {"h100-2", "h100-3", "h100-4", "h100-5"}
                and status.get("phase") == "Degraded"
                and (status.get("nodes") or {}).get("ready") == 2
            )

        await eventually(replaced, "h100-2 quarantined, h100-4 failed burn-in, h100-5 serving")

        async def drain_blocked() -> bool:
            return any("llm-training-0" in m and "llm-training" in m for m in await page.events("DrainBlocked"))

        await eventually(drain_blocked, "DrainBlocked on h100-2, naming the pod and its budget")
        events = await page.run(".tools/bin/kubectl --server http://127.0.0.1:18080 get events")
        assert "DrainStarted" in events and "DrainBlocked" in events and "BurnInFailed" in events
        await page.run(
            ".tools/bin/kubectl --server http://127.0.0.1:18080 patch pdb llm-training --type merge "
            """-p '{"spec":{"minAvailable":1}}'"""
        )

        async def handed_off() -> bool:
            node = await demo.client.get("/api/v1/nodes/h100-2")
            return "accelpool.io/remediation-action" in node["metadata"].get("labels", {})

        await eventually(handed_off, "h100-2 drained and handed off")
        listed = await page.run(
            ".tools/bin/kubectl --server http://127.0.0.1:18080 get nodes -l accelpool.io/remediation-action "
            "-L accelpool.io/remediation-action"
        )
        assert "h100-2" in listed
        verdicts = await page.run(
            ".venv/bin/accelpool check --server http://127.0.0.1:18080 --pool llm-training", expect=1
        )
        assert any(line.split()[:3] == ["h100-2", "Unhealthy", "XidError79"] for line in verdicts.splitlines())

        # 4. Repair: both released from quarantine; h100-4 keeps its failed burn-in until told otherwise.
        await page.run(".venv/bin/accelpool demo inject h100-2 clear")
        await page.run(".venv/bin/accelpool demo inject h100-4 clear")

        async def released() -> bool:
            taints = [await page.taints(node) for node in ("h100-2", "h100-4")]
            return all("accelpool.io/quarantined" not in found for found in taints)

        await eventually(released, "h100-2 and h100-4 released after the 30 s hold-down")
        assert (await page.taints("h100-4")).get("accelpool.io/burn-in") == "failed", "never lifted on its own"
        await page.run(
            ".tools/bin/kubectl --server http://127.0.0.1:18080 taint node h100-4 "
            "accelpool.io/burn-in=pending:NoSchedule --overwrite"
        )

        async def burnt_in_again() -> bool:
            return "accelpool.io/burn-in" not in await page.taints("h100-4") and await page.phase("llm-training") == (
                "Ready"
            )

        await eventually(burnt_in_again, "h100-4 passed burn-in again; llm-training Ready")

        # 5. A pool from Python, on the two H100 nodes left free.
        printed = await page.run(".venv/bin/python examples/python_api.py --server http://127.0.0.1:18080")
        assert "llm-finetune is Ready" in printed

        # 6. NVIDIA's side.
        await page.run(".venv/bin/accelpool demo inject a100-2 mig-broken")
        await page.run(
            ".tools/bin/kubectl --server http://127.0.0.1:18080 patch cpool a100-slices --type merge "
            """-p '{"spec":{"nodes":2}}'"""
        )

        async def not_advertised() -> bool:
            return (await page.condition("a100-slices", "MigConfigured")).get("reason") == "NotAdvertised"

        await eventually(not_advertised, "a100-slices MigConfigured=False/NotAdvertised")
        await page.run(".venv/bin/accelpool demo inject - strategy-override=single")

        async def overridden() -> bool:
            pool = await page.pool("h100-mixed")
            reasons = {c.get("reason") for c in (pool.get("status") or {}).get("conditions") or []}
            return "MigStrategyOverridden" in reasons and pool["status"].get("phase") == "Degraded"

        await eventually(overridden, "h100-mixed Degraded with MigStrategyOverridden")
        await page.run(".venv/bin/accelpool demo inject - strategy-override=off")
        await page.run(".venv/bin/accelpool demo inject a100-2 clear")

        async def mig_pools_ready() -> bool:
            return await page.phase("a100-slices") == "Ready" and await page.phase("h100-mixed") == "Ready"

        await eventually(mig_pools_ready, "a100-slices and h100-mixed Ready again")

        # 7. The agents' RuntimeClass.
        await page.run(".venv/bin/accelpool demo inject h100-1 no-runtime-class")

        async def agents_blocked() -> bool:
            return (await page.condition("h100-mixed", "AgentReady")).get("reason") == "RuntimeClassNotFound"

        await eventually(agents_blocked, "h100-mixed AgentReady=False/RuntimeClassNotFound")
        await page.run(".venv/bin/accelpool demo inject h100-1 clear")
        await eventually(lambda: _is(page.phase("h100-mixed"), "Ready"), "h100-mixed Ready again")

        # 8. Admission.
        refused = await page.run(
            ".tools/bin/kubectl --server http://127.0.0.1:18080 create -f examples/invalid/mig-on-l4.yaml", expect=1
        )
        assert "mig" in refused.lower()
        await page.run(".tools/bin/kubectl --server http://127.0.0.1:18080 scale cpool l4-inference --replicas=3")
        await page.run(
            ".tools/bin/kubectl --server http://127.0.0.1:18080 wait --for=condition=Ready cpool/l4-inference "
            "--timeout=5m"
        )
        await eventually(lambda: _members_are(page, "l4-inference", 3), "l4-inference on three nodes")
        await page.run(".tools/bin/kubectl --server http://127.0.0.1:18080 explain cpool.spec")

        # 9. DRA: one GPU out of service, its node serving the other seven, the scheduler never giving it.
        await page.run(".venv/bin/accelpool demo inject h200-1 3:xid=79")

        async def gpu_quarantined() -> bool:
            rules = await demo.client.list(DEVICE_TAINT_RULES)
            status = (await page.pool("h200-dra")).get("status") or {}
            return [r["metadata"]["name"] for r in rules] == ["accelpool-h200-1-gpu-3"] and status["capacity"][
                "gpus"
            ] == 15

        await eventually(gpu_quarantined, "one DeviceTaintRule on gpu-3 of h200-1, 15 GPUs serving")
        assert "accelpool.io/quarantined" not in await page.taints("h200-1")
        listed = await page.run(".tools/bin/kubectl --server http://127.0.0.1:18080 get devicetaintrules")
        assert "accelpool-h200-1-gpu-3" in listed
        serving = await page.run(
            ".tools/bin/kubectl --server http://127.0.0.1:18080 get cpool h200-dra -o jsonpath='{.status.capacity.gpus}"
            """ GPUs serve; out of service: {.status.dra.quarantinedDevices[*].device}{"\\n"}'"""
        )
        assert serving.strip() == "15 GPUs serve; out of service: gpu-3"
        await page.run(".tools/bin/kubectl --server http://127.0.0.1:18080 apply -f docs/tutorial/dra-seven-gpus.yaml")

        async def allocated() -> list[str]:
            claims = await demo.client.list("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims")
            allocations = [((c.get("status") or {}).get("allocation") or {}).get("devices") or {} for c in claims]
            return [r["device"] for found in allocations for r in found.get("results") or []]

        async def seven_allocated() -> bool:
            return bool(await allocated())

        await eventually(seven_allocated, "the seven-GPU claim allocated")
        devices = await allocated()
        assert sorted(devices) == [f"gpu-{i}" for i in range(8) if i != 3]
        shown = await page.run(
            ".tools/bin/kubectl --server http://127.0.0.1:18080 get resourceclaims -o jsonpath="
            """'{.items[*].status.allocation.devices.results[*].device}{"\\n"}'"""
        )
        assert "gpu-3" not in shown.split()
        await page.run(".venv/bin/accelpool demo inject h200-1 clear")

        async def gpu_back() -> bool:
            status = (await page.pool("h200-dra")).get("status") or {}
            return not await demo.client.list(DEVICE_TAINT_RULES) and status["capacity"]["gpus"] == 16

        await eventually(gpu_back, "the rule lifted after the hold-down, 16 GPUs serving")


async def _is(value: Any, expected: str) -> bool:
    return bool(await value == expected)


async def _members_are(page: Walkthrough, pool: str, count: int) -> bool:
    return len(await page.members(pool)) == count
