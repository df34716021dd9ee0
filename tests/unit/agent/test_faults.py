"""The --fault syntax: what parses, and errors that name the value and the valid choices."""

from __future__ import annotations

import pytest

from accelpool_agent.faults import (
    Fault,
    FaultKind,
    FaultSpecError,
    faults_by_gpu,
    parse_fault_spec,
    valid_faults,
)


def test_single_gpu_xid() -> None:
    spec = parse_fault_spec("3:xid=79")
    assert spec.gpus == (3,)
    assert spec.faults == (Fault(FaultKind.XID, 79.0),)


def test_all_lists_and_ranges() -> None:
    assert parse_fault_spec("all:hang").gpus is None
    assert parse_fault_spec("0,2:ecc-dbe").gpus == (0, 2)
    assert parse_fault_spec("4-6:lost").gpus == (4, 5, 6)
    assert parse_fault_spec("1-2,5:hot").gpus == (1, 2, 5)


def test_several_faults_for_one_gpu() -> None:
    spec = parse_fault_spec("1:xid=94,slow-matmul=3,wrong-results")
    assert [str(f) for f in spec.faults] == ["xid=94", "slow-matmul=3", "wrong-results"]


@pytest.mark.parametrize(("text", "factor"), [("slow-matmul", 2.0), ("slow-matmul=4", 4.0), ("slow-matmul=0.5", 2.0)])
def test_slowdown_factor_both_ways(text: str, factor: float) -> None:
    assert parse_fault_spec(f"0:{text}").faults[0].factor == factor


def test_every_kind_parses() -> None:
    for kind in FaultKind:
        text = f"0:{kind.value}=79" if kind is FaultKind.XID else f"0:{kind.value}"
        assert parse_fault_spec(text).faults[0].kind is kind


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3:xdi=79", "unknown fault 'xdi'"),
        ("xid=79", "expected GPU:FAULT"),
        ("3:", "expected GPU:FAULT"),
        ("three:lost", "GPU 'three' is not an index"),
        ("3:xid", "xid needs a number"),
        ("3:xid=abc", "xid needs a positive integer"),
        ("3:xid=-5", "xid needs a positive integer"),
        ("3:ecc-dbe=2", "ecc-dbe takes no value"),
        ("3:slow-matmul=0", "needs a positive factor"),
        ("3:slow-matmul=fast", "needs a positive factor"),
        ("5-2:lost", "empty or negative"),
    ],
)
def test_errors_name_the_value(text: str, expected: str) -> None:
    with pytest.raises(FaultSpecError) as error:
        parse_fault_spec(text)
    assert expected in str(error.value)
    assert repr(text) in str(error.value)


def test_unknown_fault_lists_the_valid_ones() -> None:
    with pytest.raises(FaultSpecError) as error:
        parse_fault_spec("0:melted")
    assert valid_faults() in str(error.value)
    for kind in ("xid=<n>", "ecc-dbe", "slow-matmul[=<factor>]", "wrong-results", "hang", "lost"):
        assert kind in str(error.value)


def test_faults_by_gpu_merges_and_checks_range() -> None:
    specs = [parse_fault_spec("all:hot"), parse_fault_spec("1:xid=79")]
    merged = faults_by_gpu(specs, 2)
    assert [f.kind for f in merged[0]] == [FaultKind.HOT]
    assert [f.kind for f in merged[1]] == [FaultKind.HOT, FaultKind.XID]
    with pytest.raises(FaultSpecError, match=r"GPU 8 does not exist; valid GPU indexes: 0-7"):
        faults_by_gpu([parse_fault_spec("8:lost")], 8)
