"""examples/python_api.py against the emulated API server with the real operator: the script creates a pool
from Python, waits for it (printing its progress) and prints the pod-spec fragment, and ends without aiohttp's
"Unclosed client session" warnings.

The script runs as a user runs it, in a process of its own; the test plays what the cluster would do
meanwhile (NVIDIA's components and the agents on the members, `settle_members`), so the operator takes
the pool to Ready and the script's wait returns.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import yaml

from accelpool_api import conventions
from tests.support.builders import node_body
from tests.support.cases import defaulted

from .conftest import Cluster, Operator, seed

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "python_api.py"


async def test_the_example_creates_a_pool_waits_for_it_and_prints_its_pod_spec_fragment(
    cluster: Cluster, operator: Operator
) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 4)))
    await operator.start()
    script = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "--server",
        cluster.server,
        "--timeout",
        "60",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    communicating = asyncio.ensure_future(script.communicate())

    await cluster.wait_for(lambda: len(cluster.members("llm-finetune")) == 2 or communicating.done())
    assert not communicating.done(), (await communicating)[0].decode()
    sent = {
        "accelerator": {"name": "H100", "count": 8},
        "nodes": 2,
        "mig": {"profile": "3g.40gb"},
        "health": {"remediation": "taint"},
    }
    assert (cluster.pool("llm-finetune") or {})["spec"] == defaulted(sent), "stored as sent, with the CRD's defaults"
    await cluster.settle_members("llm-finetune")
    output, _ = await asyncio.wait_for(communicating, 90)
    text = output.decode()

    assert script.returncode == 0, text
    assert "Unclosed" not in text, "the cluster the script connected (and never closed) closes itself at exit"
    assert "H100-80GB x8 (MIG 3g.40gb, 3g.40gb): 80 GB, 989 bf16 TFLOPS, 3350 GB/s" in text
    assert (
        "refused: Accelerator.NVIDIA.H100(count=8, mig='1g.5gb'): spec.mig.profile: Invalid value: \"1g.5gb\"" in text
    )
    progress = [line for line in text.splitlines() if line.startswith("ComputePool llm-finetune: ")]
    assert len(progress) >= 2, text  # at least one line on the way, and Ready
    assert progress[-1].startswith("ComputePool llm-finetune: Ready, nodes 2/2 (2 ready), 16 devices serving"), text
    assert "llm-finetune is Ready: 2 nodes, {'nvidia.com/gpu': 32}" in text
    fragment = yaml.safe_load(text.split("pod-spec fragment:\n", 1)[1])
    assert fragment == {
        "nodeSelector": {conventions.POOL_LABEL: "llm-finetune"},
        "tolerations": [
            {"key": conventions.POOL_TAINT_KEY, "operator": "Equal", "value": "llm-finetune", "effect": "NoSchedule"}
        ],
        "containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}],
    }
    assert fragment["nodeSelector"] == cluster.status("llm-finetune")["scheduling"]["nodeSelector"]
