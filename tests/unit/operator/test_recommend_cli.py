"""`accelpool recommend` end to end: the table, the JSON document, bad input, and the fit against pools
planned on the shared node snapshot, read from a file, and read from the emulated API server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import accelpool_api as api
from accelpool import cli
from accelpool_demo.apiserver import serving

from .conftest import LOCAL_FIXTURE, ROOT, member, pool, run
from .test_burn_in import XID79, healthy

POOLS = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"


def recommend(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["recommend", *args])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = recommend(capsys, *args, "-o", "json")
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def first(document: dict[str, Any], accelerator: str, kind: str = "devices") -> dict[str, Any]:
    return next(p for p in document["placements"] if p["accelerator"] == accelerator and p["kind"] == kind)


def test_the_table_shows_every_term_and_the_ranked_placements(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = recommend(capsys, "70B")
    assert code == 0
    for term in ("weights", "kv_cache", "overhead"):
        assert f"\n{term} " in out
    assert "2 x 80 layers x 8x128 x 2 B x 8192 tokens x 1" in out
    row = next(line for line in out.splitlines() if line.split()[1:2] == ["H100-80GB"])
    assert "2 (TP=2)" in row and "GB/s" in row
    assert "(+" in out and "-o json)" in out, "the rows past --top are counted"


@pytest.mark.parametrize(
    ("args", "accelerator", "devices", "nodes"),
    [
        (("1B", "--dtype", "fp16"), "A100-80GB", 1, 1),
        (("8B",), "L4", 1, 1),
        (("8B", "--dtype", "int4"), "T4", 1, 1),
        (("70B", "--dtype", "bf16"), "H100-80GB", 2, 1),
        (("70B", "--dtype", "4bit"), "L40S", 1, 1),
        (("405B", "--dtype", "bf16"), "H100-80GB", 16, 2),
        (("405B", "--dtype", "bf16"), "H200-141GB", 8, 1),
        (("405B", "--dtype", "fp8"), "H100-80GB", 8, 1),
        (("8B", "--workload", "full"), "H100-80GB", 2, 1),
        (("8B", "--workload", "qlora"), "L4", 1, 1),
        (("70B", "--workload", "lora", "--dtype", "int4"), "A100-80GB", 1, 1),
        (("70B", "--workload", "full"), "H100-80GB", 16, 2),
        (("405B", "--workload", "pretrain"), "H100-80GB", 128, 16),
    ],
)
def test_sizes_a_practitioner_would_accept(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], accelerator: str, devices: int, nodes: int
) -> None:
    placement = first(as_json(capsys, *args), accelerator)
    assert (placement["devices"], placement["nodes"]) == (devices, nodes)


def test_small_models_get_mig_slices_and_tiny_ones_time_sliced_shares(capsys: pytest.CaptureFixture[str]) -> None:
    small = as_json(capsys, "1B", "--dtype", "fp16")
    assert small["placements"][0]["kind"] == "mig"
    assert first(small, "H100-80GB", "mig")["migProfile"] == "1g.10gb"
    tiny = as_json(capsys, "1B", "--dtype", "int4", "--context", "2048")
    shared = first(tiny, "L4", "time-sliced")
    assert shared["shares"] == 8 and shared["unitGiB"] == 3.0


def test_the_json_document_is_the_documented_schema(capsys: pytest.CaptureFixture[str]) -> None:
    document = as_json(capsys, "llama-3.1-8b", "--workload", "lora", "--dtype", "int4", "--context", "2048")
    assert set(document) == {"model", "request", "memory", "placements", "leftOut", "doesNotFit"}
    assert set(document["model"]) == {
        "name", "params", "activeParams", "layers", "hidden", "heads", "kvHeads", "headDim", "intermediate",
        "vocab", "tiedEmbeddings", "maxPositions", "experts", "latentAttention", "source",
    }  # fmt: skip
    assert (document["model"]["vocab"], document["model"]["experts"]) == (128256, None)
    assert document["model"]["source"] == "huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"
    assert document["request"] == {
        "workload": "lora",
        "dtype": "int4",
        "context": 2048,
        "batch": 1,
        "kvBytesPerValue": None,
        "loraRank": 16,
        "checkpointing": True,
        "trainableParams": 41_943_040,
        "flopsPerToken": 4 * 8_030_261_248,
    }
    terms = [t["name"] for t in document["memory"]["terms"]]
    assert terms == ["weights", "gradients", "optimizer", "activations", "overhead"]
    assert sum(t["bytes"] for t in document["memory"]["terms"]) == document["memory"]["totalBytes"]
    placement = document["placements"][0]
    assert set(placement) == {
        "rank", "accelerator", "kind", "devices", "nodes", "migProfile", "shares", "unitGiB",
        "needGiBPerUnit", "allocatedGiB", "tokensPerSecond", "basis",
    }  # fmt: skip
    assert placement["rank"] == 1


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("8B", "--dtype", "fp12"), "error: --dtype 'fp12': one of fp32, fp16, bf16, fp8, int8, int4"),
        (("8B", "--context", "-5"), "error: --context -5: a whole number of at least 1"),
        (("8B", "--batch", "0"), "error: --batch 0: a whole number of at least 1"),
        (("eight",), "error: MODEL 'eight': a size like 8B, 70B, 1.5e9 or 405000M, or a known model: llama-3.2-1b"),
        (("8X",), "error: MODEL '8X'"),
        (("0.0001",), "error: MODEL '0.0001': between 1M and 100T parameters"),
        (("8B", "--workload", "qlora", "--dtype", "bf16"), "error: --dtype 'bf16': QLoRA is LoRA over a 4-bit base"),
        (("8B", "--workload", "sft"), "error: --workload 'sft': one of inference, lora, qlora, full, pretrain"),
        (("8B", "--workload", "full", "--dtype", "int4"), "error: --dtype 'int4': full trains every weight"),
        (("8B", "--kv-dtype", "int2"), "error: --kv-dtype 'int2': one of fp32, fp16, bf16, fp8, int8"),
        (("8B", "--workload", "full", "--kv-dtype", "fp8"), "error: --kv-dtype 'fp8': only for --workload inference"),
        (("8B", "--kv-heads", "64"), "error: --kv-heads 64: at most --heads"),
        (("8B", "--mfu", "2"), "error: --mfu 2.0: a fraction above 0 and at most 1"),
        (("8B", "--nodes", "nodes.yaml"), "error: --nodes needs -f POOLS"),
        (("8B", "-f", "pools.yaml"), "error: -f POOLS goes with --nodes FILE"),
    ],
)
def test_bad_input_names_the_flag_the_value_and_what_is_valid(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], named: str
) -> None:
    code, out, err = recommend(capsys, *args)
    assert (code, out) == (2, "")
    assert err.startswith(named), err


def test_the_table_says_which_accelerators_were_left_out_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = recommend(capsys, "70B", "--workload", "full")
    assert code == 0
    (line,) = [line for line in out.splitlines() if line.startswith("Left out: ")]
    assert "T4, V100-16GB, V100-32GB (no bf16 mode; computes in fp32, fp16)" in line
    assert "Inferentia2 (inference only: no full (training) workloads)" in line
    document = as_json(capsys, "8B", "--dtype", "fp8")
    assert {u["accelerator"] for u in document["leftOut"]} >= {"A100-40GB", "A10G", "A30", "T4", "V100-16GB", "MI250X"}
    assert not {p["accelerator"] for p in document["placements"]} & {u["accelerator"] for u in document["leftOut"]}


def test_shape_flags_override_the_derived_shape(capsys: pytest.CaptureFixture[str]) -> None:
    document = as_json(capsys, "13B", "--layers", "40", "--hidden", "5120", "--heads", "40", "--kv-heads", "40")
    model = document["model"]
    assert (model["layers"], model["headDim"], model["kvHeads"]) == (40, 128, 40)
    assert "overridden: --layers, --hidden, --heads, --kv-heads" in model["source"]
    kv = next(t for t in document["memory"]["terms"] if t["name"] == "kv_cache")
    assert kv["bytes"] == 2 * 40 * 40 * 128 * 2 * 8192  # Llama 2 13B: 800 KiB a token


def test_pools_planned_on_the_node_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--nodes", str(LOCAL_FIXTURE), "-f", str(ROOT / "examples"))
    pools = {p["name"]: p for p in as_json(capsys, "70B", *args)["pools"]}
    training = pools["llm-training"]
    assert (training["fits"], training["available"], training["unitsPerReplica"], training["replicas"]) == (
        True, 16, 2, 8,
    )  # fmt: skip
    assert training["capacity"] == "planned"
    assert not pools["a100-slices"]["fits"] and "MIG 1g.5gb" in pools["a100-slices"]["why"]
    l4 = {p["name"]: p for p in as_json(capsys, "1B", "--dtype", "int4", "--context", "2048", *args)["pools"]}
    assert (l4["l4-inference"]["fits"], l4["l4-inference"]["available"]) == (True, 8)  # 2 nodes x 1 L4 x 4 shares
    code, out, _ = recommend(capsys, "8B", *args)
    assert code == 0 and "PLANNED UNITS" in out and "h100-mixed" in out


def pool_with_status() -> dict[str, Any]:
    """A ComputePool as the operator leaves it: two of three 8 x H100 members serve, one is quarantined."""
    spec = {"accelerator": "H100:8", "nodes": 3}
    nodes = [member("m1", "train", health=healthy()), member("m2", "train", health=healthy())]
    nodes.append(member("m3", "train", health=XID79))
    planned = run([pool("train", spec)], nodes).pool("train")
    assert planned is not None and planned.status is not None
    status = planned.status.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert status["capacity"]["quarantinedGPUs"] == 8
    return {"apiVersion": f"{api.GROUP}/{api.VERSION}", "kind": api.KIND, "metadata": {"name": "train"}, "spec": spec,
            "status": status}  # fmt: skip


async def test_pools_of_the_cluster_by_their_healthy_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    async with serving() as emulator:
        emulator.put(POOLS, pool_with_status())
        code = await asyncio.to_thread(cli.main, ["recommend", "70B", "--server", emulator.url, "-o", "json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        (train,) = json.loads(out)["pools"]
        assert (train["available"], train["unitsPerReplica"], train["replicas"]) == (16, 2, 8)
        assert train["capacity"] == "healthy"
        code = await asyncio.to_thread(cli.main, ["recommend", "405B", "--server", emulator.url])
        out, _ = capsys.readouterr()
        row = next(line for line in out.splitlines() if line.startswith("train "))
        assert row.split()[3:7] == ["yes", "1", "16", "16"], "two serving nodes of 8: one replica across both"
        code = await asyncio.to_thread(cli.main, ["recommend", "405B", "--dtype", "fp32", "--server", emulator.url])
        out, _ = capsys.readouterr()
        row = next(line for line in out.splitlines() if line.startswith("train "))
        assert row.split()[3:5] == ["yes", "0"]
        assert row.endswith("a replica takes 32 devices (4 nodes x 8); 16 offered")


def test_pools_from_a_file_with_status(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [pool_with_status()]}))
    (train,) = as_json(capsys, "8B", "--pools", str(path))["pools"]
    assert (train["unitsPerReplica"], train["replicas"]) == (1, 16)


def test_an_unreachable_cluster_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = recommend(capsys, "8B", "--server", "http://127.0.0.1:9")
    assert code == 2 and out == "" and err.startswith("error: cannot read the cluster:")


def test_the_docs_example_is_what_the_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "docs" / "tasks" / "recommend.md").read_text()
    shown = readme.split("$ accelpool recommend 70B --top 6 --nodes nodes.yaml -f examples/\n", 1)[1].split("```", 1)[0]
    code, out, _ = recommend(capsys, "70B", "--top", "6", "--nodes", str(LOCAL_FIXTURE), "-f", str(ROOT / "examples"))
    assert code == 0 and out == shown
