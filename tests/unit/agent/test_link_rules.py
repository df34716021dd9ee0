"""The rules of the links, power and clocks, and of the node (GPU count, InfiniBand): each
threshold, each "no data" case, and the rates of error counters over their window."""

from __future__ import annotations

import pytest

from accelpool_agent import rules
from accelpool_agent.model import CheckResult, CheckStatus, FabricInfo, IbPort, NvLink, PcieLink, Telemetry


def t(**kw: object) -> Telemetry:
    return Telemetry(index=0, **kw)  # type: ignore[arg-type]


def links(count: int, down: tuple[int, ...] = ()) -> tuple[NvLink, ...]:
    return tuple(NvLink(link=i, active=i not in down, errors={"replay": 0}) for i in range(count))


def port(name: str = "mlx5_0", state: int = 4, phys: int = 5, layer: str = "InfiniBand") -> IbPort:
    names = {1: "DOWN", 4: "ACTIVE"}
    phys_names = {2: "Polling", 3: "Disabled", 5: "LinkUp"}
    return IbPort(name, 1, state, names.get(state, "INIT"), phys, phys_names.get(phys, "Sleep"), link_layer=layer)


def test_pcie_width_below_max_warns_always_generation_only_under_load() -> None:
    narrow = rules.pcie_rule(t(pcie=PcieLink(5, 8, 5, 16), utilization_ratio=0.0))
    assert (narrow.status, narrow.reason) == (CheckStatus.WARN, "PcieLinkDegraded")
    idle = rules.pcie_rule(t(pcie=PcieLink(1, 16, 5, 16), utilization_ratio=0.0))
    assert (idle.status, idle.reason) == (CheckStatus.PASS, "LinkAtFullWidth")
    assert "idle GPUs lower the link generation" in idle.message
    loaded = rules.pcie_rule(t(pcie=PcieLink(3, 16, 5, 16), utilization_ratio=0.95))
    assert (loaded.status, loaded.reason) == (CheckStatus.WARN, "PcieGenDegraded")
    assert rules.pcie_rule(t(pcie=PcieLink(5, 16, 5, 16), utilization_ratio=0.95)).status is CheckStatus.PASS
    assert rules.pcie_rule(t()).status is CheckStatus.SKIP


def test_nvlink_one_link_down_fails_all_down_is_a_note_none_skips() -> None:
    down = rules.nvlink_rule(t(nvlinks=links(18, down=(3,))), {})
    assert (down.status, down.reason, down.summary) == (CheckStatus.FAIL, "NvlinkDown", "NVLink 3 down")
    inactive = rules.nvlink_rule(t(nvlinks=links(12, down=tuple(range(12)))), {})
    assert (inactive.status, inactive.reason, inactive.noteworthy) == (CheckStatus.PASS, "NvlinkInactive", True)
    assert rules.severity(inactive).value == "INFO"
    skipped = rules.nvlink_rule(t(nvlinks=None), {})
    assert (skipped.status, skipped.reason) == (CheckStatus.SKIP, "NoNvlink")


@pytest.mark.parametrize(
    ("rates", "status"),
    [
        ({"0:replay": 0.5, "0:crc_flit": 0.9}, CheckStatus.PASS),
        ({"0:replay": 1.0}, CheckStatus.WARN),
        ({"4:recovery": 8.0}, CheckStatus.FAIL),
        ({"2:crc_data": 5999.0}, CheckStatus.WARN),
        ({"2:crc_data": 6000.0}, CheckStatus.FAIL),
    ],
)
def test_nvlink_error_rates_against_the_limits(rates: dict[str, float], status: CheckStatus) -> None:
    result = rules.nvlink_rule(t(nvlinks=links(18)), rates)
    assert result.status is status
    if status is not CheckStatus.PASS:
        assert result.reason == "NvlinkErrorRate"
        assert result.value == max(rates.values())


def test_fabric_states() -> None:
    def fabric(**kw: object) -> CheckResult:
        return rules.fabric_rule(t(fabric=FabricInfo(**kw)))  # type: ignore[arg-type]

    assert fabric(state="not_supported").status is CheckStatus.SKIP
    assert rules.fabric_rule(t()).status is CheckStatus.SKIP
    assert (fabric(state="not_started").status, fabric(state="not_started").reason) == (
        CheckStatus.FAIL,
        "FabricNotStarted",
    )
    assert fabric(state="in_progress").status is CheckStatus.WARN
    assert fabric(state="completed", status=999).reason == "FabricRegistrationFailed"
    assert fabric(state="completed", degraded_bandwidth=True).reason == "FabricDegraded"
    assert fabric(state="completed", degraded_bandwidth=False).reason == "FabricRegistered"


def test_power_above_limit_and_pstate_stuck_under_load() -> None:
    def power(**kw: object) -> CheckResult:
        return rules.power_rule(t(**kw), power_margin=0.1, busy_utilization=0.8)

    assert power(power_watts=780.0, power_limit_watts=700.0).reason == "PowerAboveLimit"
    assert power(power_watts=760.0, power_limit_watts=700.0).reason == "PowerNormal"  # within 10%
    assert power(performance_state=8, utilization_ratio=0.95, power_watts=100.0).reason == "PowerStateStuck"
    assert power(performance_state=8, utilization_ratio=0.0, power_watts=70.0).reason == "PowerNormal"
    assert power(performance_state=2, utilization_ratio=0.95, power_watts=500.0).reason == "PowerNormal"
    assert power().status is CheckStatus.SKIP


def test_clocks_stuck_low_only_when_loaded_and_unexplained() -> None:
    def clocks(**kw: object) -> CheckResult:
        base: dict[str, object] = {"sm_clock_max_hertz": 1980e6, "throttle_reasons": frozenset()}
        return rules.clocks_rule(t(**(base | kw)), clocks_low_ratio=0.5, busy_utilization=0.8)

    assert clocks(sm_clock_hertz=600e6, utilization_ratio=0.95).reason == "ClocksStuckLow"
    assert clocks(sm_clock_hertz=345e6, utilization_ratio=0.0).reason == "Idle"
    explained = clocks(sm_clock_hertz=600e6, utilization_ratio=0.95, throttle_reasons=frozenset({"sw_power_cap"}))
    assert (explained.status, explained.reason) == (CheckStatus.PASS, "ClocksNormal")
    assert "held back: sw_power_cap" in explained.message
    assert clocks(sm_clock_hertz=1900e6, utilization_ratio=0.95).reason == "ClocksNormal"
    assert rules.clocks_rule(t(), clocks_low_ratio=0.5, busy_utilization=0.8).status is CheckStatus.SKIP


def test_gpu_count() -> None:
    assert rules.gpu_count_rule(7, 8, None).reason == "GpuMissing"
    assert rules.gpu_count_rule(8, 8, None).status is CheckStatus.PASS
    assert rules.gpu_count_rule(0, 8, "NVML initialisation failed").status is CheckStatus.SKIP
    assert rules.gpu_count_rule(3, None, None).status is CheckStatus.SKIP


def test_infiniband_port_state_flaps_and_error_rates() -> None:
    assert rules.infiniband_rule([], {}).status is CheckStatus.SKIP
    assert rules.infiniband_rule([port(phys=3, state=1)], {}).status is CheckStatus.SKIP  # disabled: not in use
    down = rules.infiniband_rule([port("mlx5_0"), port("mlx5_1", state=1, phys=2)], {})
    assert (down.status, down.reason, down.summary) == (CheckStatus.FAIL, "IbPortDown", "RDMA port mlx5_1/1 down")
    roce_down = rules.infiniband_rule([port(state=1, phys=2, layer="Ethernet")], {})
    assert roce_down.reason == "IbPortDown"
    flap = rules.infiniband_rule([port()], {"mlx5_0/1:link_downed": 0.2})
    assert (flap.status, flap.reason) == (CheckStatus.WARN, "IbLinkFlapping")
    errors = rules.infiniband_rule([port()], {"mlx5_0/1:symbol_error": 1.5})
    assert (errors.status, errors.reason) == (CheckStatus.WARN, "IbErrorRate")
    assert rules.infiniband_rule([port()], {"mlx5_0/1:port_xmit_discards": 9.0}).status is CheckStatus.PASS
    roce = rules.infiniband_rule([port(layer="Ethernet")], {"mlx5_0/1:symbol_error": 100.0})
    assert (roce.status, roce.reason) == (CheckStatus.PASS, "IbPortsActive")  # RoCE: state only


def test_counter_rates_over_the_window() -> None:
    window = rules.CounterWindow().add(0.0, {"a": 10, "b": 5}, 600)
    assert window.per_minute() == {}  # one reading: no rate yet
    window = window.add(2.0, {"a": 11, "b": 5}, 600)
    assert window.per_minute() == {"a": 1.0, "b": 0.0}  # at least one minute: 1 error in 2 s is 1/min
    window = window.add(300.0, {"a": 61, "b": 5}, 600)
    assert window.per_minute()["a"] == pytest.approx(51 / 5)
    window = window.add(900.0, {"a": 61, "b": 5}, 600)
    assert window.per_minute()["a"] == pytest.approx(0.0)  # the burst left the window
    reset = rules.CounterWindow().add(0.0, {"a": 500}, 600).add(120.0, {"a": 4}, 600)
    assert reset.per_minute()["a"] == pytest.approx(2.0)  # the driver reloaded: counted from zero
