"""Placements on the catalog, their ranking and speed basis, and the fit against pools' units.

The expectations are what a practitioner sizes by hand: 70B bf16 weights (~141 GB) need two
80 GB GPUs; 405B bf16 (~812 GB) outgrows a node of 8 x H100 80GB (640 GB) and needs FP8 there or
two nodes (Meta, "Introducing Llama 3.1", ai.meta.com/blog/meta-llama-3-1: the 405B model was
quantised to FP8 "allowing the model to run within a single server node"), while a node of
8 x H200 141GB (1,128 GB) holds it in bf16; a 1B model fits the smallest MIG slices.
"""

from __future__ import annotations

import pytest

import accelpool_api as api
from accelpool.cli.recommend import Kind, Placement, Reason, Request, Workload, estimate, known_model, placements
from accelpool.cli.recommend.fit import DEFAULT_MFU, device_counts, mig_memory_bytes, time_sliced, whole_devices
from accelpool.cli.recommend.memory import PRECISIONS, Estimate, GiB
from accelpool.cli.recommend.pools import fit_pool, planned_resources, pool_units
from accelpool_core import catalog


def sized(name: str, dtype: str = "bf16", workload: Workload = Workload.INFERENCE, context: int = 8192) -> Estimate:
    shape = known_model(name)
    assert shape is not None
    return estimate(Request(shape, PRECISIONS[dtype], workload, context=context, batch=1))


def on(name: str, result: Estimate) -> Placement | None:
    return whole_devices(result, catalog.lookup(name), DEFAULT_MFU)


def test_70b_bf16_inference_needs_two_h100s_and_one_b200() -> None:
    result = sized("llama-3.1-70b")
    h100 = on("H100", result)
    assert h100 is not None and (h100.devices, h100.nodes) == (2, 1)
    b200 = on("B200", result)
    assert b200 is not None and b200.devices == 1
    assert (p := on("A100-40GB", result)) is not None and p.devices == 4


def test_405b_bf16_needs_fp8_or_two_nodes_on_h100_and_fits_one_h200_node() -> None:
    bf16 = sized("llama-3.1-405b")
    h100 = on("H100", bf16)
    assert h100 is not None and (h100.devices, h100.nodes) == (16, 2)
    h200 = on("H200", bf16)
    assert h200 is not None and (h200.devices, h200.nodes) == (8, 1)
    fp8 = on("H100", sized("llama-3.1-405b", "fp8"))
    assert fp8 is not None and (fp8.devices, fp8.nodes) == (8, 1)


def test_405b_full_training_spans_many_nodes() -> None:
    result = sized("llama-3.1-405b", workload=Workload.PRETRAIN, context=4096)
    h100 = on("H100", result)
    assert h100 is not None and h100.nodes >= 8 and h100.parallelism == "FSDP"
    assert result.bytes_per_device(h100.devices) <= 0.9 * 80 * GiB < result.bytes_per_device(h100.devices // 2)


def test_8b_full_fine_tune_takes_one_h200_or_two_h100s() -> None:
    result = sized("llama-3.1-8b", workload=Workload.FULL, context=4096)
    assert (p := on("H200", result)) is not None and p.devices == 1
    assert (p := on("H100", result)) is not None and p.devices == 2


def test_a_1b_model_fits_the_smallest_mig_slices() -> None:
    found, _ = placements(sized("llama-3.2-1b", "fp16"))
    mig = {(p.accelerator.name, p.mig_profile) for p in found if p.kind is Kind.MIG}
    assert ("H100-80GB", "1g.10gb") in mig and ("A100-40GB", "1g.5gb") in mig
    assert found[0].kind is Kind.MIG


def test_time_slicing_for_tiny_workloads_only_where_no_mig_slice_holds_them() -> None:
    tiny = sized("llama-3.2-1b", "int4", context=2048)
    l4 = time_sliced(tiny, catalog.lookup("L4"), DEFAULT_MFU)
    assert l4 is not None and l4.shares == 8 and l4.need_bytes * 8 <= 0.9 * 24 * GiB
    found, _ = placements(tiny)
    kinds = {(p.accelerator.name, p.kind) for p in found}
    assert ("H100-80GB", Kind.SHARED) not in kinds and ("H100-80GB", Kind.MIG) in kinds
    assert ("MI300X", Kind.SHARED) not in kinds  # only NVIDIA's device plugin time-slices
    assert time_sliced(sized("llama-3.1-8b"), catalog.lookup("L4"), DEFAULT_MFU) is None


def test_ranking_one_node_first_isolated_before_shared_then_tightest_fit_then_speed() -> None:
    found, _ = placements(sized("llama-3.1-405b"))
    nodes = [p.nodes for p in found]
    assert nodes == sorted(nodes)
    single = [p for p in found if p.nodes == 1 and p.kind is not Kind.SHARED]
    assert [p.allocated_bytes for p in single] == sorted(p.allocated_bytes for p in single)
    tied = [p for p in found if p.allocated_bytes == 160 * GiB and p.nodes == 1]
    speeds = [p.tokens_per_second for p in tied]
    assert speeds == sorted(speeds, reverse=True)


def test_inference_speed_is_bandwidth_over_bytes_per_step() -> None:
    result = sized("llama-3.1-70b")
    h100 = on("H100", result)
    assert h100 is not None
    assert h100.tokens_per_second == pytest.approx(2 * 3350e9 / result.bytes_per_step)
    assert "GB/s" in h100.basis


def test_training_speed_is_peak_times_mfu_over_6n() -> None:
    result = sized("llama-3.1-8b", workload=Workload.FULL, context=4096)
    h200 = on("H200", result)
    assert h200 is not None
    assert h200.tokens_per_second == pytest.approx(989e12 * 0.4 / (6 * result.request.model.params))
    assert "TFLOPS bf16" in h200.basis


def left_out(result: Estimate) -> dict[str, str]:
    _, unfit = placements(result)
    return {u.accelerator.name: u.why for u in unfit if u.reason is Reason.UNSUPPORTED}


def offered(result: Estimate) -> set[str]:
    found, _ = placements(result)
    return {p.accelerator.name for p in found}


def test_a_dtype_the_part_has_no_mode_for_leaves_it_out() -> None:
    """The issue's lists: no bf16 on T4 and V100; no fp8 on A100, A10G, A30, T4, V100 and MI250X."""
    bf16 = sized("llama-3.2-1b")
    assert set(left_out(bf16)) == {"T4", "V100-16GB", "V100-32GB"}
    assert left_out(bf16)["T4"] == "no bf16 mode; computes in fp32, fp16"
    assert not offered(bf16) & {"T4", "V100-16GB", "V100-32GB"}
    fp8 = sized("llama-3.2-1b", "fp8")
    no_fp8 = {"A100-40GB", "A100-80GB", "A100-80GB-PCIE", "A10G", "A30", "T4", "V100-16GB", "V100-32GB", "MI250X"}
    assert no_fp8 <= set(left_out(fp8)) and not offered(fp8) & no_fp8
    assert {"H100-80GB", "L4", "L40S", "MI300X", "Trainium2"} <= offered(fp8)
    assert {"TPU-v5e", "TPU-v5p", "TPU-v6e"} <= set(left_out(sized("llama-3.2-1b", "fp16"))), "TPUs: bf16, no fp16"


def test_weight_only_quantisation_dequantises_to_fp16_where_bf16_is_missing() -> None:
    qlora = sized("llama-3.2-1b", "int4", Workload.LORA, context=1024)
    assert "T4" not in left_out(qlora)
    t4 = on("T4", qlora)
    assert t4 is not None and "TFLOPS fp16" in t4.basis
    h100 = on("H100", qlora)
    assert h100 is not None and "TFLOPS bf16" in h100.basis
    fp16 = on("T4", sized("llama-3.2-1b", "fp16", Workload.FULL, context=1024))
    assert fp16 is not None and "65 TFLOPS fp16" in fp16.basis


def test_training_leaves_out_inference_only_parts() -> None:
    """AWS Neuron docs: Inferentia2 is an inference accelerator; training runs on Trainium."""
    full = sized("llama-3.1-70b", workload=Workload.FULL, context=4096)
    assert left_out(full)["Inferentia2"] == "inference only: no full (training) workloads"
    assert "Inferentia2" not in offered(full) and "Trainium2" in offered(full)
    assert "Inferentia2" in left_out(sized("llama-3.1-8b", workload=Workload.LORA, context=4096))
    assert "Inferentia2" in offered(sized("llama-3.1-8b"))


def test_an_mi250x_unit_is_one_gcd() -> None:
    """amd.com/gpu is one GCD, 64 GB: 70B bf16 (~141 GB of weights) takes 4 of them, not 2 packages' worth."""
    result = sized("llama-3.1-70b")
    mi250x = on("MI250X", result)
    assert mi250x is not None and mi250x.devices == 4 and mi250x.unit_bytes == 64 * GiB
    assert mi250x.tokens_per_second == pytest.approx(4 * 1638.4e9 / result.bytes_per_step)


def test_nothing_fits_is_said_per_accelerator() -> None:
    _, unfit = placements(sized("llama-3.1-405b", "fp32", Workload.PRETRAIN, context=8192))
    assert any(u.accelerator.name == "T4" and "GiB per device" in u.why for u in unfit)


def test_helpers() -> None:
    assert mig_memory_bytes("3g.40gb") == 40 * GiB
    assert mig_memory_bytes("1g.10gb+me") == 10 * GiB
    assert device_counts(8)[:5] == [(1, 1), (2, 1), (4, 1), (8, 1), (16, 2)]


def spec(body: dict[str, object]) -> api.ComputePoolSpec:
    return api.ComputePoolSpec.model_validate(body)


def test_a_whole_gpu_pool_holds_replicas_per_serving_node() -> None:
    pool = spec({"accelerator": "H100:8", "nodes": 3})
    units = pool_units("train", pool, {"nvidia.com/gpu": 16}, 8)  # one of 3 nodes quarantined
    fit = fit_pool(sized("llama-3.1-70b"), units)
    assert fit is not None and fit.fits and (fit.units_per_replica, fit.replicas) == (2, 8)
    fit = fit_pool(sized("llama-3.1-405b"), units)
    assert fit is not None and (fit.units_per_replica, fit.replicas) == (16, 1)


def test_a_mixed_mig_pool_offers_its_best_profile() -> None:
    pool = spec(
        {
            "accelerator": "H100:8",
            "nodes": 1,
            "mig": {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"], "strategy": "mixed"},
        }
    )
    resources = planned_resources(pool, 8)
    assert resources == {"nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-1g.10gb": 16}
    units = pool_units("slices", pool, resources, 8)
    small = fit_pool(sized("llama-3.2-1b", "fp16"), units)
    assert small is not None and (small.resource, small.replicas) == ("nvidia.com/mig-1g.10gb", 16)
    big = fit_pool(sized("llama-3.1-8b"), units)
    assert big is not None and (big.resource, big.replicas) == ("nvidia.com/mig-3g.40gb", 8)
    none = fit_pool(sized("llama-3.1-70b"), units)
    assert none is not None and not none.fits and "MIG 3g.40gb holds 36.0" in none.why


def test_a_time_sliced_pool_counts_memory_per_share() -> None:
    pool = spec({"accelerator": "L4", "nodes": 2, "sharing": {"timeSlicing": {"replicas": 4}}})
    units = pool_units("l4", pool, {"nvidia.com/gpu": 8}, 1)
    fit = fit_pool(sized("llama-3.2-1b", "int4", context=2048), units)
    assert fit is not None and fit.fits and fit.replicas == 8
    fit = fit_pool(sized("llama-3.1-8b"), units)
    assert fit is not None and not fit.fits and "1/4 share of L4" in fit.why


def test_a_pool_of_parts_without_the_dtype_holds_nothing() -> None:
    pool = spec({"accelerator": "T4", "nodes": 2})
    units = pool_units("t4", pool, {"nvidia.com/gpu": 2}, 1)
    fit = fit_pool(sized("llama-3.2-1b"), units)
    assert fit is not None and not fit.fits and fit.why == "T4: no bf16 mode; computes in fp32, fp16"
    fit = fit_pool(sized("llama-3.2-1b", "fp16"), units)
    assert fit is not None and fit.fits and fit.replicas == 2


def test_an_mi250x_pool_counts_gcds() -> None:
    """Four MI250X packages per node advertise amd.com/gpu: 8; 70B bf16 takes 4 of them: two replicas a node."""
    pool = spec({"accelerator": "MI250X:8", "nodes": 1})
    units = pool_units("amd", pool, {"amd.com/gpu": 8}, 8)
    fit = fit_pool(sized("llama-3.1-70b"), units)
    assert fit is not None and fit.fits and (fit.units_per_replica, fit.replicas) == (4, 2)
    assert fit.unit_bytes == 64 * GiB
