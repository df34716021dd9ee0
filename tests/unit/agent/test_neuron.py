"""The AWS Neuron backend: neuron-monitor's recorded reports parsed, and the real subprocess path.

The recorded documents (tests/fixtures/agent/neuron/) follow AWS's neuron-monitor user guide;
`fake-neuron-monitor` prints them as neuron-monitor streams them, so the backend starts, reads,
restarts and stops a real child process here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accelpool_agent.agent import Agent
from accelpool_agent.backends.neuron import NeuronBackend, monitor_config
from accelpool_agent.backends.neuron_report import DeviceCounters, Report, ReportError, parse_report
from accelpool_agent.backends.neuron_state import MonitorState, model_for
from accelpool_agent.clock import ManualClock
from accelpool_agent.compute import ComputeSizes, ComputeTask
from accelpool_agent.compute.runner import InlineRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.model import Check, CheckStatus, EccCounts
from accelpool_agent.rules import gpu_count_rule
from accelpool_core.protocol import AgentConfig, HealthStatus

FIXTURES = Path(__file__).parents[2] / "fixtures" / "agent" / "neuron"
FAKE_MONITOR = FIXTURES / "fake-neuron-monitor"
GIB = 1 << 30


def reports(name: str) -> list[Report]:
    return [parse_report(line) for line in (FIXTURES / name).read_text().splitlines()]


def state_of(name: str) -> MonitorState:
    state = MonitorState()
    for report in reports(name):
        state = state.with_report(report)
    return state


SAFETY_SECONDS = 300
"""How long `wait_for` waits before failing: a guard against waiting forever, not a timing (a loaded
machine may take seconds to start the fake neuron-monitor)."""


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll until `condition` holds (a child process needs a moment); fail naming `what` after `SAFETY_SECONDS`."""
    deadline = time.monotonic() + SAFETY_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


# ------------------------------------------------------------------------------ the reports


def test_healthy_trn2_has_sixteen_trainium2_devices() -> None:
    state = state_of("trn2_healthy.jsonl")
    devices = state.inventory()
    assert [d.index for d in devices] == list(range(16))
    assert {d.model for d in devices} == {"Trainium2"}
    assert devices[0].name == "AWS trainium2"
    assert devices[0].memory_total_bytes == 96 * GIB


def test_per_neuroncore_utilization_and_memory_of_the_devices_in_use() -> None:
    telemetry = {t.index: t for t in state_of("trn2_healthy.jsonl").telemetry()}
    # the training job runs on NeuronCores 0-7: devices 0 and 1 (4 NeuronCores each) at 87.5%
    assert telemetry[0].core_utilization_ratios == (0.875,) * 4
    assert telemetry[0].utilization_ratio == 0.875
    assert telemetry[0].memory_used_bytes == 4 * (4294967296 + 176285056 + 33554432 + 12884901888)
    assert telemetry[0].compute_processes == 1
    # the evaluation job uses NeuronCores 60 and 61, the first two of device 15 (60-63), at 35%
    assert telemetry[15].core_utilization_ratios == (0.35, 0.35, 0.0, 0.0)
    assert telemetry[15].utilization_ratio == 0.175
    assert telemetry[7].utilization_ratio == 0.0
    assert telemetry[7].memory_used_bytes == 0
    assert telemetry[5].ecc is not None and telemetry[5].ecc.volatile_single == 2


def test_without_a_running_application_the_hardware_counters_still_count() -> None:
    telemetry = state_of("trn2_idle.jsonl").telemetry()
    assert len(telemetry) == 16
    assert all(t.utilization_ratio == 0.0 and t.memory_used_bytes == 0 for t in telemetry)
    assert all(t.ecc is not None and t.sram_ecc is not None for t in telemetry)
    assert all(t.execution_errors == dict.fromkeys(t.execution_errors or {}, 0) for t in telemetry)


def test_inferentia2_from_the_device_type() -> None:
    state = state_of("inf2_healthy.jsonl")
    assert [(d.index, d.model) for d in state.inventory()][-1] == (11, "Inferentia2")
    assert state.telemetry()[0].core_utilization_ratios == (0.0, 0.0)


def test_the_model_falls_back_to_the_instance_type() -> None:
    report = Report(device_type=None, instance_type="trn1.32xlarge")
    accelerator = model_for(report)
    assert accelerator is not None and accelerator.name == "Trainium"
    assert model_for(Report(instance_type="m7i.large")) is None


def test_uncorrected_hbm_ecc_and_hardware_errors_reach_the_devices_of_the_job() -> None:
    telemetry = {t.index: t for t in state_of("trn2_hbm_uncorrected.jsonl").telemetry()}
    assert telemetry[1].ecc is not None and telemetry[1].ecc.volatile_double == 2
    assert telemetry[1].ecc.volatile_single == 41
    # the job on devices 0-1 failed an execution with a hardware error; device 2 ran nothing
    assert (telemetry[0].execution_errors or {})["hardware"] == 1
    assert (telemetry[2].execution_errors or {})["hardware"] == 0


def test_execution_errors_add_up_over_the_reports() -> None:
    state = state_of("trn2_hardware_errors.jsonl")
    state = state.with_report(reports("trn2_hardware_errors.jsonl")[0])
    assert state.errors[0]["hardware"] == 6
    assert state.errors[1]["numerical"] == 2


def test_errors_of_an_application_without_known_cores_reach_every_device() -> None:
    # the guide's field list spells the class `numeric` (its example `numerical`): both are read
    line = json.dumps(
        {
            "neuron_hardware_info": {"neuron_device_count": 2, "neuroncore_per_device_count": 2, "error": ""},
            "neuron_runtime_data": [{"pid": 1, "report": {"execution_stats": {"error_summary": {"numeric": 2}}}}],
        }
    )
    report = parse_report(line)
    assert {device: errors["numerical"] for device, errors in report.execution_errors.items()} == {0: 2, 1: 2}
    assert report.device_runtimes == {}


def test_applications_are_counted_per_device() -> None:
    telemetry = {t.index: t for t in state_of("trn2_healthy.jsonl").telemetry()}
    assert [telemetry[i].compute_processes for i in (0, 1, 2, 15)] == [1, 1, 0, 1]


def test_a_device_missing_from_a_later_report_is_lost() -> None:
    state = state_of("trn2_device_disappears.jsonl")
    assert len(state.inventory()) == 16
    telemetry = {t.index: t for t in state.telemetry()}
    assert telemetry[7].lost and "Neuron device 7 is missing" in (telemetry[7].error or "")
    assert not telemetry[6].lost and not telemetry[8].lost


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"neuron_runtime_data": [', "not JSON"),
        ("[1, 2]", "report: expected a JSON object, got list"),
    ],
)
def test_a_line_that_is_no_report_names_what_it_is(line: str, message: str) -> None:
    with pytest.raises(ReportError, match="^" + message.replace("[", r"\[").replace("]", r"\]")):
        parse_report(line)


@pytest.mark.parametrize(
    ("group", "problem"),
    [
        (
            '"system_data": {"neuron_hw_counters": {"neuron_devices": [{"neuron_device_index": 0, '
            '"mem_ecc_uncorrected": "two"}], "error": ""}}',
            "neuron_hw_counters.neuron_devices[0].mem_ecc_uncorrected: expected a non-negative number, got 'two'",
        ),
        (
            '"neuron_runtime_data": [{"error": "", "report": {"neuroncore_counters": '
            '{"neuroncores_in_use": {"nc0": {}}, "error": ""}}}]',
            "neuron_runtime_data[0].report.neuroncore_counters.neuroncores_in_use: "
            "expected a NeuronCore index, got key 'nc0'",
        ),
    ],
)
def test_a_group_in_no_documented_shape_is_skipped_and_named_the_rest_read(group: str, problem: str) -> None:
    hardware = '"neuron_hardware_info": {"neuron_device_type": "trainium2", "neuron_device_count": 2, "error": ""}'
    report = parse_report("{" + hardware + ", " + group + "}")
    assert report.problems == (problem,)
    assert (report.device_type, report.device_indexes) == ("trainium2", (0, 1))


def test_groups_and_applications_with_an_error_are_skipped_as_aws_own_exporter_skips_them() -> None:
    """neuron-monitor-prometheus.py reads no group whose `error` is set, nor an application whose is."""
    (report,) = reports("trn2_group_errors.jsonl")
    assert report.counters is None  # neuron_hw_counters failed: the devices come from neuron_device_count
    assert report.device_indexes == tuple(range(16))
    assert report.core_utilization == {4: 0.5, 5: 0.5}  # the second application's; the first one failed
    assert report.execution_errors == {}  # its execution_stats group failed
    assert len(report.problems) == 3 and any("failed to read the hardware counters" in p for p in report.problems)
    telemetry = {t.index: t for t in state_of("trn2_group_errors.jsonl").telemetry()}
    assert len(telemetry) == 16 and not any(t.lost for t in telemetry.values())
    assert telemetry[1].core_utilization_ratios == (0.5, 0.5, 0.0, 0.0) and telemetry[0].ecc is None


def test_nulls_and_the_trn2_per_physical_core_shares_are_read_as_aws_documents_them() -> None:
    """`latency_stats` null (no model ran), a null counter (read as no event), `v3d` shares beside a core's
    utilization, `system_data` null in a report that has only the hardware info."""
    first, second = reports("trn2_nulls.jsonl")
    assert first.core_utilization == {0: 0.25} and first.counters is not None
    assert first.counters[0] == DeviceCounters(0)
    assert (second.counters, second.device_indexes) == (None, tuple(range(16)))


def test_hardware_counters_are_per_period_and_summed_over_the_reports() -> None:
    """AWS's exporter adds each report's counts to its counters: an uncorrected error reported in one period
    stays counted after it, and corrected events add up."""
    state = state_of("trn2_hbm_uncorrected_once.jsonl")
    telemetry = {t.index: t for t in state.telemetry()}
    assert telemetry[1].ecc == EccCounts(volatile_single=7, volatile_double=1)
    assert state.counters[1].mem_ecc_uncorrected == 1


# ------------------------------------------------------------------------------ the subprocess


@pytest.fixture
def backend_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[..., NeuronBackend]]:
    """A backend running the fake neuron-monitor on a recorded file (exiting with `exit_status` if given)."""
    opened: list[NeuronBackend] = []

    def start(
        name: str, *, exit_status: int | None = None, binary: str = str(FAKE_MONITOR), backoff: float = 0.05
    ) -> NeuronBackend:
        monkeypatch.setenv("FAKE_NEURON_MONITOR_REPORTS", str(FIXTURES / name))
        monkeypatch.setenv("FAKE_NEURON_MONITOR_CONFIG", str(tmp_path / "config.json"))
        if exit_status is not None:
            monkeypatch.setenv("FAKE_NEURON_MONITOR_EXIT", str(exit_status))
        backend = NeuronBackend(
            binary=binary, period_seconds=2, min_backoff_seconds=backoff, max_backoff_seconds=backoff * 4
        )
        backend.open()
        opened.append(backend)
        return backend

    yield start
    for backend in opened:
        backend.close()


def test_the_backend_reads_the_monitor_and_asks_for_the_metric_groups(
    backend_on: Callable[..., NeuronBackend], tmp_path: Path
) -> None:
    backend = backend_on("trn2_healthy.jsonl")
    wait_for(lambda: backend.reader is not None and backend.reader.state.reports == 2, "two reports")
    assert backend.error is None
    assert len(backend.inventory()) == 16
    assert backend.telemetry()[15].utilization_ratio == 0.175
    config = json.loads((tmp_path / "config.json").read_text())
    assert config == monitor_config(2)
    assert config["period"] == "2s"
    assert [m["type"] for m in config["neuron_runtimes"][0]["metrics"]] == [
        "neuroncore_counters",
        "memory_used",
        "neuron_runtime_vcpu_usage",
        "execution_stats",
    ]
    assert config["system_metrics"] == [{"type": "neuron_hw_counters"}]


def test_a_missing_binary_is_a_backend_error_not_missing_devices(
    backend_on: Callable[..., NeuronBackend], tmp_path: Path
) -> None:
    backend = backend_on("trn2_healthy.jsonl", binary=str(tmp_path / "no-such-neuron-monitor"))
    wait_for(lambda: "cannot run" in (backend.error or ""), "the start to fail")
    assert "no-such-neuron-monitor" in (backend.error or "")
    assert backend.inventory() == [] and backend.telemetry() == []
    count = gpu_count_rule(len(backend.inventory()), 16, backend.error)
    assert (count.status, count.reason) == (CheckStatus.SKIP, "BackendUnavailable")


def test_while_the_monitor_is_down_the_backend_reports_an_error_and_no_devices(
    backend_on: Callable[..., NeuronBackend],
) -> None:
    backend = backend_on("trn2_idle.jsonl", exit_status=3, backoff=600)
    wait_for(lambda: "exited with status 3" in (backend.error or ""), "the exit")
    assert backend.inventory() == [] and backend.telemetry() == []
    assert backend.reader is not None and backend.reader.starts == 1


def test_a_monitor_that_exits_is_restarted(backend_on: Callable[..., NeuronBackend]) -> None:
    backend = backend_on("trn2_idle.jsonl", exit_status=3)
    reader = backend.reader
    assert reader is not None
    wait_for(lambda: reader.starts >= 3 and reader.state.reports >= 3, "two restarts, each with its report")
    assert reader.state.seen == frozenset(range(16))


def test_malformed_lines_are_skipped(backend_on: Callable[..., NeuronBackend]) -> None:
    backend = backend_on("trn2_malformed_line.jsonl")
    reader = backend.reader
    assert reader is not None
    wait_for(lambda: reader.state.reports == 2, "both good reports")
    assert reader.skipped_lines == 2
    assert backend.error is None


def test_a_line_that_is_not_utf8_is_skipped_and_the_reader_goes_on(backend_on: Callable[..., NeuronBackend]) -> None:
    """Bytes that are not UTF-8 neither stop the reader thread nor lose the report around them."""
    backend = backend_on("trn2_non_utf8.jsonl")
    reader = backend.reader
    assert reader is not None
    wait_for(lambda: reader.state.reports == 2, "both reports")
    assert reader.skipped_lines == 1 and backend.error is None
    assert len(backend.telemetry()) == 16


def test_a_device_disappearing_from_the_stream(backend_on: Callable[..., NeuronBackend]) -> None:
    backend = backend_on("trn2_device_disappears.jsonl")
    wait_for(lambda: backend.reader is not None and backend.reader.state.reports == 2, "both reports")
    lost = [t.index for t in backend.telemetry() if t.lost]
    assert lost == [7]


def test_no_neuron_driver_is_a_backend_error(backend_on: Callable[..., NeuronBackend]) -> None:
    backend = backend_on("no_driver.jsonl")
    wait_for(lambda: backend.reader is not None and backend.reader.state.reports == 1, "the report")
    assert backend.error == "Neuron driver: neuron driver is not loaded"
    assert backend.inventory() == []


def test_the_driver_version_comes_from_sysfs(tmp_path: Path) -> None:
    (tmp_path / "module" / "neuron").mkdir(parents=True)
    (tmp_path / "module" / "neuron" / "version").write_text("2.19.64.0\n")
    assert NeuronBackend(sysfs_root=tmp_path).versions().driver == "2.19.64.0"
    assert NeuronBackend(sysfs_root=tmp_path / "elsewhere").versions().driver is None


def test_no_compute_checks_and_no_xids() -> None:
    backend = NeuronBackend()
    device = state_of("trn2_idle.jsonl").inventory()[0]
    assert backend.compute_job(device, [ComputeTask(Check.SANITY)], ComputeSizes(), seed=0) is None
    assert backend.drain_xid_events() == []
    assert backend.error == "neuron-monitor not started"


def test_a_bad_period_is_refused() -> None:
    with pytest.raises(ValueError, match=r"neuron-monitor period: 0 s; valid: a positive number of seconds"):
        monitor_config(0)


async def test_a_healthy_trainium_node_is_healthy_and_an_uncorrected_hbm_error_fails_it(
    backend_on: Callable[..., NeuronBackend],
) -> None:
    """Neuron devices have no compute checks (they need a Neuron framework and a compiled model): a full
    cycle of good counters is Healthy and complete, not Unknown for want of checks."""

    def agent_on(recording: str) -> Agent:
        backend = backend_on(recording)
        recorded = len((FIXTURES / recording).read_text().splitlines())
        # Every recorded report read (the uncorrected HBM error is in the second), not only the first.
        wait_for(lambda: backend.reader is not None and backend.reader.state.reports == recorded, "every report")
        settings = AgentSettings(node_name="trn2-1", backend="neuron")
        agent = Agent(backend, AgentConfig(expected_gpus=16), settings, InlineRunner(), clock=ManualClock())
        agent.open()
        return agent

    report = await agent_on("trn2_healthy.jsonl").full_cycle()
    assert (report.status, report.reason, report.complete) == (HealthStatus.HEALTHY, "AllChecksPassed", True)
    assert not [c for gpu in report.gpus for c in gpu.checks if c.check.is_compute]
    failing = await agent_on("trn2_hbm_uncorrected.jsonl").full_cycle()
    assert failing.status is HealthStatus.UNHEALTHY
    assert "NeuronHbmUncorrectable" in {c.reason for gpu in failing.gpus for c in gpu.checks}
