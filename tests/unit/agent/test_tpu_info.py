"""tpu-info's recorded outputs (tests/fixtures/agent/tpu): the parser, and the TPU backend reading them
when libtpu's SDK is not importable."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from accelpool_agent.backends.tpu import TpuBackend
from accelpool_agent.backends.tpu_info import TpuInfoFormatError, parse_tpu_info
from accelpool_agent.model import CheckStatus
from accelpool_agent.rules.tpu import tpu_checks
from tests.unit.agent.fake_libtpu import GIB, FakeHost, uninstall

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agent" / "tpu"


def recorded(name: str) -> str:
    return (FIXTURES / name).read_text()


def gib(value: float) -> int:
    return round(value * GIB)


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHost:
    uninstall(monkeypatch)  # no libtpu: the backend falls back to tpu-info
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return FakeHost(tmp_path)


def tpu_info_backend(host: FakeHost, output: str) -> TpuBackend:
    backend = TpuBackend(tpu_info=lambda: output, sysfs_root=host.sysfs, dev_root=host.dev)
    backend.open()
    return backend


# ---------------------------------------------------------------------------- the parser


@pytest.mark.parametrize("name", ["v6e-4-markdown.txt", "v6e-4-box.txt"])
def test_both_table_styles_parse_alike(name: str) -> None:
    report = parse_tpu_info(recorded(name))
    assert report.chip_files == tuple(f"/dev/vfio/{n}" for n in range(4))
    assert report.hbm_used_bytes == (gib(18.45), gib(10.40), gib(10.40), gib(10.40))
    assert report.hbm_total_bytes == (gib(31.25),) * 4
    assert report.duty_cycle_pct == (100.0,) * 4
    assert report.tensorcore_pct == (13.60, 14.81, 14.36, 13.60)
    assert not report.metrics_unavailable and not report.no_chips


def test_version_lines() -> None:
    report = parse_tpu_info(recorded("v6e-4-markdown.txt"))
    assert (report.libtpu_version, report.accelerator_type) == ("0.0.19.dev20250721+nightly", "v6e")
    assert parse_tpu_info(recorded("v6e-4-box.txt")).libtpu_version is None


def test_no_runtime() -> None:
    report = parse_tpu_info(recorded("v5p-4-no-runtime.txt"))
    assert report.metrics_unavailable
    assert report.hbm_used_bytes == (None,) * 4 and report.duty_cycle_pct == (None,) * 4
    assert report.tensorcore_pct == ()


def test_a_cell_in_no_known_format_is_no_data_and_named() -> None:
    report = parse_tpu_info(recorded("v5e-bad-cell.txt"))
    assert report.hbm_used_bytes == (None,) and report.duty_cycle_pct == (12.0,)  # the rest still reads
    (problem,) = report.problems
    assert "'TPU Runtime Utilization', HBM usage: '9.5 GB of 16 GB'" in problem


def test_a_table_without_its_column_is_an_error_naming_the_header() -> None:
    with pytest.raises(TpuInfoFormatError, match=r"'TPU Runtime Utilization': no column HBM usage in header"):
        parse_tpu_info("TPU Runtime Utilization\n| Chip | Memory |\n|---|---|\n| 0 | 1 GiB |\n")


def test_what_rich_adds_is_undone_colours_wrapped_cells_and_the_newer_chips_table() -> None:
    """tpu-info's Rich output as a narrow or colour terminal renders it, and cli_helper.py's
    ActualTpuChipsTable (header `Chip `, `N/A` and several PIDs); `unknown (...)` versions are none."""
    report = parse_tpu_info(recorded("v6e-4-wrapped-colour.txt"))
    assert report.chip_files == ("/dev/vfio/0", "/dev/vfio/1", "/dev/vfio/2", "N/A")
    assert report.hbm_used_bytes == (gib(18.45), gib(10.40), gib(10.40), None)
    assert report.hbm_total_bytes == (gib(31.25), gib(31.25), gib(31.25), None)
    assert report.duty_cycle_pct == (100.0, 99.5, 100.0, None)
    assert report.tensorcore_pct == (13.6, None, 14.36, 13.6)
    assert (report.libtpu_version, report.accelerator_type, report.problems) == (None, "v6e", ())


# ---------------------------------------------------------------------------- the backend on tpu-info


def test_v6e_readings_through_tpu_info(host: FakeHost) -> None:
    host.add_chips("v6e", 4)
    backend = tpu_info_backend(host, recorded("v6e-4-box.txt"))
    assert backend.error is None and backend.source == "tpu-info"
    readings = backend.telemetry()
    assert [t.memory_used_bytes for t in readings] == [gib(18.45), gib(10.40), gib(10.40), gib(10.40)]
    assert [t.utilization_ratio for t in readings] == [1.0] * 4
    assert [t.tensorcore_utilization_ratio for t in readings] == [0.136, 0.1481, 0.1436, 0.136]
    assert [tpu_checks(t)[0].reason for t in readings] == ["Responding"] * 4


def test_no_runtime_through_tpu_info_is_idle(host: FakeHost) -> None:
    host.add_chips("v5p", 4)
    reading = tpu_info_backend(host, recorded("v5p-4-no-runtime.txt")).telemetry()[0]
    assert reading.memory_used_bytes is None and reading.error is not None
    assert "libtpu metrics unavailable" in reading.error
    (result,) = tpu_checks(reading)
    assert (result.status, result.reason) == (CheckStatus.PASS, "RuntimeIdle")


def test_a_chip_gone_through_tpu_info(host: FakeHost) -> None:
    host.add_chips("v5p", 4)
    output = [recorded("v5p-4-no-runtime.txt")]
    backend = TpuBackend(tpu_info=lambda: output[0], sysfs_root=host.sysfs, dev_root=host.dev)
    backend.open()
    host.remove_chip(2)
    output[0] = recorded("v5p-4-chip-gone.txt")
    readings = {t.index: t for t in backend.telemetry()}
    assert readings[2].lost
    assert [readings[n].utilization_ratio for n in (0, 1, 3)] == [0.875, 0.8625, 0.88]
    assert tpu_checks(readings[2])[0].reason == "TpuChipMissing"


def test_two_devices_per_chip_sum_memory_and_take_the_chip_duty_cycle(host: FakeHost) -> None:
    host.add_chips("v3", 4)
    readings = tpu_info_backend(host, recorded("v3-8-two-devices.txt")).telemetry()
    assert [t.memory_used_bytes for t in readings] == [gib(11)] * 4
    assert [t.memory_total_bytes for t in readings] == [gib(32)] * 4
    assert [t.utilization_ratio for t in readings] == [0.5, 0.4, 0.3, 0.2]


def test_output_in_no_known_format_is_no_data_not_a_crash(host: FakeHost) -> None:
    host.add_chips("v5e", 1)
    (reading,) = tpu_info_backend(host, recorded("v5e-bad-cell.txt")).telemetry()
    assert reading.memory_used_bytes is None and reading.utilization_ratio == 0.12
    assert "'9.5 GB of 16 GB' is not '<used> GiB / <total> GiB'" in (reading.error or "")
    assert tpu_checks(reading)[0].reason == "HbmReadingUnavailable"


def test_tpu_info_output_that_is_not_utf8_is_read(host: FakeHost, tmp_path: Path) -> None:
    host.add_chips("v6e", 4)
    command = tmp_path / "bin" / "tpu-info"
    command.parent.mkdir()
    output = tmp_path / "out.txt"
    output.write_bytes(b"\xff\xfe not UTF-8\n" + (FIXTURES / "v6e-4-markdown.txt").read_bytes())
    command.write_text(f"#!/bin/sh\nexec /bin/cat '{output}'\n")
    command.chmod(command.stat().st_mode | stat.S_IXUSR)
    backend = TpuBackend(sysfs_root=host.sysfs, dev_root=host.dev)
    backend.open()
    assert backend.telemetry()[0].memory_used_bytes == gib(18.45)


def test_the_tpu_info_command_on_path_is_run(host: FakeHost, tmp_path: Path) -> None:
    host.add_chips("v6e", 4)
    command = tmp_path / "bin" / "tpu-info"
    command.parent.mkdir()
    command.write_text(f"#!/bin/sh\nexec /bin/cat '{FIXTURES / 'v6e-4-markdown.txt'}'\n")
    command.chmod(command.stat().st_mode | stat.S_IXUSR)
    assert os.access(command, os.X_OK)
    backend = TpuBackend(sysfs_root=host.sysfs, dev_root=host.dev)
    backend.open()
    assert backend.source == "tpu-info"
    assert backend.telemetry()[0].memory_used_bytes == gib(18.45)
    assert backend.versions().driver == "0.0.19.dev20250721+nightly"


def test_where_the_container_shows_no_chip_tpu_infos_table_lists_them(host: FakeHost) -> None:
    """No Google PCI function and no device file visible to the agent: the chips are tpu-info's `TPU Chips`
    rows (their Type names the generation); a chip it stops listing is lost."""
    output = recorded("v6e-4-markdown.txt")
    outputs = [output]
    backend = TpuBackend(tpu_info=lambda: outputs[-1], sysfs_root=host.sysfs, dev_root=host.dev)
    backend.open()
    assert backend.error is None
    devices = backend.inventory()
    assert [(d.index, d.model, d.memory_total_bytes) for d in devices] == [(n, "TPU-v6e", 32 << 30) for n in range(4)]
    assert [t.memory_used_bytes for t in backend.telemetry()] == [gib(18.45), gib(10.40), gib(10.40), gib(10.40)]
    chip_gone = "\n".join(line for line in output.splitlines() if "/dev/vfio/3" not in line and "| 3 " not in line)
    outputs.append(chip_gone)
    readings = backend.telemetry()
    assert [t.lost for t in readings] == [False, False, False, True]
    assert tpu_checks(readings[3])[0].reason == "TpuChipMissing"


def test_no_chip_anywhere_is_unavailable(host: FakeHost) -> None:
    backend = tpu_info_backend(host, "No TPU chips found.\n")
    assert backend.error is not None and "tpu-info lists none" in backend.error and backend.inventory() == []


def test_neither_libtpu_nor_tpu_info_is_unavailable(host: FakeHost) -> None:
    host.add_chips("v6e", 4)
    backend = TpuBackend(sysfs_root=host.sysfs, dev_root=host.dev)
    backend.open()
    assert backend.error is not None and "no tpu-info command on PATH" in backend.error
    assert backend.source is None and backend.inventory() == []
