"""The demo's parts that need no cluster: the fleet description, the pool table, the hints it prints, and
where it finds its fleet and example pools."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from accelpool.cli import build_parser, main
from accelpool_core.textio import format_table
from accelpool_demo import cluster
from accelpool_demo.run import SOURCE_EXAMPLES, SOURCE_TREE, banner, example_pools, inject, load_fleet, pool_rows


def test_demo_fleet_is_labelled_like_real_nodes() -> None:
    nodes = {n["metadata"]["name"]: n for n in cluster.nodes(cluster.parse(cluster.DEFAULT_FLEET.read_text()))}
    assert nodes["h100-1"]["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert nodes["h100-1"]["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert nodes["l4-1"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert nodes["mi300x-1"]["metadata"]["labels"]["amd.com/gpu.product-name"] == "Instinct_MI300X"
    assert nodes["trn2-1"]["metadata"]["labels"]["karpenter.k8s.aws/instance-accelerator-name"] == "trainium2"
    assert nodes["tpu-v5p-1"]["status"]["capacity"]["google.com/tpu"] == "4"
    assert "nvidia.com/gpu" not in nodes["cpu-1"]["status"]["capacity"]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("kind: Other\n", "expected kind DemoCluster"),
        ("kind: DemoCluster\ngroups: [{prefix: x, labels: gpu-operator}]\n", "groups[0].labels: 'gpu-operator' is not"),
        (
            "kind: DemoCluster\ngroups: [{prefix: x, accelerator: H1000}]\n",
            "groups[0].accelerator: unknown accelerator",
        ),
    ],
)
def test_bad_descriptions_name_the_field(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]")):
        cluster.parse(text)


def test_pool_table() -> None:
    pools: list[dict[str, Any]] = [
        {
            "metadata": {"name": "b"},
            "status": {
                "accelerator": "L4",
                "phase": "Ready",
                "nodes": {"members": 2, "desired": 2, "ready": 2, "quarantined": 0},
                "capacity": {"gpus": 2, "measuredTFLOPS": 195.0},
            },
        },
        {"metadata": {"name": "a"}},
        {
            "metadata": {"name": "c"},
            "status": {
                "accelerator": "H100-80GB x8",
                "phase": "Degraded",
                "nodes": {"members": 2, "desired": 2, "ready": 0, "quarantined": 0},
                "conditions": [
                    {"type": "Valid", "status": "True", "reason": "Valid"},
                    {"type": "AgentReady", "status": "False", "reason": "RuntimeClassNotFound"},
                    {"type": "Ready", "status": "False", "reason": "Degraded"},
                ],
            },
        },
    ]
    lines = format_table(pool_rows(pools)).splitlines()
    assert lines[0].split() == [
        "POOL", "ACCELERATOR", "MEMBERS", "READY", "QUAR", "GPUS", "TFLOPS", "PHASE", "WHY"
    ]  # fmt: skip
    assert lines[1].split() == ["a", "-", "0/?", "0", "0", "0", "-", "Pending", "-"]
    assert lines[2].split() == ["b", "L4", "2/2", "2", "0", "2", "195", "Ready", "-"]
    assert lines[3].split()[-2:] == ["Degraded", "AgentReady=False/RuntimeClassNotFound"]


async def test_inject_refuses_an_unknown_strategy_before_calling_the_api() -> None:
    with pytest.raises(ValueError, match="single, mixed or off"):
        await inject("http://127.0.0.1:9", "h100-1", "strategy-override=none")


def test_the_hints_are_the_readmes_commands() -> None:
    assert SOURCE_TREE is not None, "the tests run from a source tree"
    readme = (SOURCE_TREE / "README.md").read_text()
    hints = banner("http://127.0.0.1:18080", 18081, Path("/tmp/accelpool-demo-x"), cwd=SOURCE_TREE)
    kubectl = next(line for line in hints.splitlines() if line.lstrip().startswith("kubectl"))
    assert kubectl.split()[1] == ".tools/bin/kubectl"
    for command in (".tools/bin/kubectl --server http://127.0.0.1:18080 get cpool", ".venv/bin/accelpool demo inject"):
        assert command in hints and command in readme
    elsewhere = banner("http://127.0.0.1:18080", 18081, Path("/tmp/accelpool-demo-x"), cwd=Path("/"))
    assert f"{SOURCE_TREE}/.tools/bin/kubectl --server" in elsewhere


def test_the_fleet_and_the_example_pools_are_found_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["demo"])
    assert (args.cluster, args.examples) == (None, None)  # the command takes these two:
    assert cluster.DEFAULT_FLEET.is_absolute() and len(load_fleet(cluster.DEFAULT_FLEET)) == 20
    assert SOURCE_EXAMPLES is not None and SOURCE_EXAMPLES.is_absolute()
    assert {p["metadata"]["name"] for p in example_pools((SOURCE_EXAMPLES,))} >= {"llm-training", "l4-inference"}


@pytest.mark.parametrize(("given", "expected"), [("2m", 120.0), ("90s", 90.0), ("1h30m", 5400.0), ("25", 25.0)])
def test_demo_for_takes_the_duration_syntax_of_every_duration_flag(given: str, expected: float) -> None:
    assert build_parser().parse_args(["demo", "--for", given]).duration == expected
    assert build_parser().parse_args(["check", "h100-1", "--timeout", given]).timeout == given  # checked by check


@pytest.mark.parametrize("given", ["2 minutes", "0", "0s", "m"])
def test_a_bad_demo_duration_is_a_usage_error_naming_the_flag(given: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["demo", "--for", given])
    assert exited.value.code == 2
    assert f"argument --for: invalid value {given!r}: a positive duration such as 90s, 15m" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--port", "--metrics-port"])
def test_a_second_demo_says_in_one_line_which_port_is_taken(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["demo", flag, str(port)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [
        f"accelpool demo: 127.0.0.1:{port} is in use (another demo running?): stop it, or pass {flag} with a free port"
    ]
