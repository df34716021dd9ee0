"""`accelpool-agent check` on every vendor's backend, through the real command in a child process, against
stand-ins of the vendors' own interfaces: the `amdsmi` module on PYTHONPATH (tests/fixtures/agent/amdsmi,
`fake_amdsmi` behind it), `neuron-monitor` and `tpu-info` on PATH (tests/fixtures/agent/{neuron,tpu}).

Each prints the report NVML's prints: the same JSON document (keys of the node, of each device, of its
telemetry and of each check) and the same text (the verdict line, the action line, the device table).
Without `--backend`, `check` detects each vendor from its stand-in.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from accelpool_agent.cli import main

from .fake_libtpu import FakeHost
from .fake_nvml import FakeNvml

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "agent"
VERDICT = re.compile(r"^node \S+ \((?P<backend>\w+), (?P<count>\d+) devices?\): (?P<status>\w+) — (?P<reason>\w+)$")


@dataclass(frozen=True)
class Printed:
    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.out)
        return document


@dataclass
class Host:
    """A child process's environment: stand-ins on PATH and PYTHONPATH, a sysfs tree."""

    tmp: Path
    env: dict[str, str]
    sysfs: Path

    def run(self, *args: str, backend: str | None = None) -> Printed:
        chosen = ["--backend", backend] if backend else []
        done = subprocess.run(
            [sys.executable, "-m", "accelpool_agent", "check", *chosen, "--sysfs-root", str(self.sysfs), *args],
            capture_output=True,
            text=True,
            timeout=90,
            cwd=ROOT,
            env=self.env,
            check=False,
        )
        return Printed(done.returncode, done.stdout, done.stderr)

    def put_on_path(self, name: str, stand_in: Path) -> None:
        (self.tmp / "bin").mkdir(exist_ok=True)
        (self.tmp / "bin" / name).symlink_to(stand_in)

    def amdsmi(self, script: Mapping[str, Any] | None = None) -> None:
        """`import amdsmi` finds the stand-in, scripted by `script` (`FakeAmdSmi.from_script`)."""
        self.env["PYTHONPATH"] = os.pathsep.join([str(FIXTURES / "amdsmi"), str(ROOT)])
        path = self.tmp / "amdsmi.json"
        path.write_text(json.dumps(script or {}))
        self.env["FAKE_AMDSMI_SCRIPT"] = str(path)

    def libtpu(self, metrics: Mapping[str, list[str]], generation: str, chips: int) -> FakeHost:
        """`from libtpu.sdk import tpumonitoring` finds the stand-in, its metrics scripted; the host's chips."""
        self.env["PYTHONPATH"] = os.pathsep.join([str(FIXTURES / "libtpu"), str(ROOT)])
        path = self.tmp / "libtpu.json"
        path.write_text(json.dumps(metrics))
        self.env["FAKE_LIBTPU_METRICS"] = str(path)
        host = FakeHost(self.tmp / "host")
        host.add_chips(generation, chips)
        self.sysfs = host.sysfs
        return host

    def neuron_monitor(self, reports: str) -> None:
        self.put_on_path("neuron-monitor", FIXTURES / "neuron" / "fake-neuron-monitor")
        self.env["FAKE_NEURON_MONITOR_REPORTS"] = str(FIXTURES / "neuron" / reports)

    def tpu_info(self, output: str, generation: str, chips: int) -> FakeHost:
        self.put_on_path("tpu-info", FIXTURES / "tpu" / "fake-tpu-info")
        self.env["FAKE_TPU_INFO_OUTPUT"] = str(FIXTURES / "tpu" / output)
        host = FakeHost(self.tmp / "host")
        host.add_chips(generation, chips)
        self.sysfs = host.sysfs
        return host


@pytest.fixture
def host(tmp_path: Path) -> Host:
    env = {key: value for key, value in os.environ.items() if key not in ("ACCELPOOL_AGENT_BACKEND", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join([str(tmp_path / "bin"), env.get("PATH", "")])
    env["LOG_LEVEL"] = "ERROR"
    (tmp_path / "sys").mkdir()
    return Host(tmp_path, env, tmp_path / "sys")


@pytest.fixture(scope="module")
def nvml_reports() -> tuple[dict[str, Any], str]:
    """NVML's report of two H100s (the `pynvml` stand-in), as JSON and as text: the shape to match."""
    printed = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "pynvml", FakeNvml(gpus=2))
        patch.delenv("ACCELPOOL_AGENT_BACKEND", raising=False)
        for output in (["--json"], []):
            printed.append(in_process(["check", "--backend", "nvml", "--log-level", "ERROR", *output]))
    return json.loads(printed[0]), printed[1]


def in_process(argv: list[str]) -> str:
    """What `accelpool-agent` prints in this process (the pynvml stand-in cannot cross into a child)."""
    from contextlib import redirect_stdout
    from io import StringIO

    buffer = StringIO()
    with redirect_stdout(buffer):
        main(argv)
    return buffer.getvalue()


def shape(report: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of the report, of its first device, of that device's telemetry and of every check."""
    device = report["gpus"][0]
    checks = [*report["checks"], *(check for gpu in report["gpus"] for check in gpu["checks"])]
    return {
        "report": sorted(report),
        "device": sorted(device),
        "telemetry": sorted(device["telemetry"] or {}),
        "check": sorted({key for check in checks for key in check}),
    }


def text_shape(text: str) -> tuple[tuple[str, ...], str, int]:
    """(the verdict line's fields, the device table's header, its number of device rows)."""
    lines = text.splitlines()
    verdict = VERDICT.match(lines[0])
    assert verdict is not None, lines[0]
    header = next(line for line in lines if line.lstrip().startswith("GPU  MODEL"))
    rows = [line for line in lines[lines.index(header) + 1 :] if re.match(r"^\s*\d+  ", line)]
    assert any(line.startswith("  recommended action: ") for line in lines), text
    assert len(rows) == int(verdict["count"]), text
    return tuple(sorted(verdict.groupdict())), header, len(rows)


def vendor_host(host: Host, backend: str) -> None:
    if backend == "amdsmi":
        host.amdsmi()
    elif backend == "neuron":
        host.neuron_monitor("trn2_healthy.jsonl")
    else:
        host.tpu_info("v6e-4-box.txt", "v6e", 4)


@pytest.mark.parametrize("backend", ["amdsmi", "neuron", "tpu"])
def test_each_vendor_prints_nvmls_report_shape(
    host: Host, backend: str, nvml_reports: tuple[dict[str, Any], str]
) -> None:
    nvml_json, nvml_text = nvml_reports
    vendor_host(host, backend)
    as_json = host.run("--json", backend=backend)
    report = as_json.json()
    assert report["backend"] == backend and report["gpus"], as_json.err
    assert shape(report) == shape(nvml_json)
    as_text = host.run(backend=backend)
    assert as_text.code == as_json.code
    fields, header, rows = text_shape(as_text.out)
    assert (fields, header) == text_shape(nvml_text)[:2]
    assert rows == len(report["gpus"])


@pytest.mark.parametrize("backend", ["amdsmi", "neuron", "tpu"])
def test_without_a_backend_check_detects_each_vendors_stand_in(host: Host, backend: str) -> None:
    vendor_host(host, backend)
    printed = host.run("--json", "--log-level", "INFO")
    assert printed.json()["backend"] == backend
    assert f"backend {backend} (detected: " in printed.err


def test_amdsmi_uncorrectable_ras_errors_and_a_ring_hang_fail_their_gpus(host: Host) -> None:
    host.amdsmi(
        {
            "gpus": 8,
            "gpu": {"3": {"uncorrectable": 2, "blocks": {"UMC": [0, 2], "XGMI_WAFL": [0, 0]}}},
            "events": [[5, "RING_HANG", "ring gfx_0.0.0 timeout"]],
            "errors": [["amdsmi_get_violation_status", None, 2]],  # AMDSMI_STATUS_NOT_SUPPORTED: no data
        }
    )
    printed = host.run("--json", backend="amdsmi")
    report = printed.json()
    assert printed.code == 1, printed.err
    assert (report["status"], report["bad_gpus"]) == ("Unhealthy", [3, 5])
    gpus = {gpu["index"]: gpu for gpu in report["gpus"]}
    assert gpus[3]["model"] == "MI300X" and gpus[3]["telemetry"]["ras_blocks"]["UMC"]["volatile_double"] == 2
    assert {check["reason"] for check in gpus[3]["checks"]} >= {"EccUncorrectableError"}
    assert {check["reason"] for check in gpus[5]["checks"]} >= {"AmdEventRingHang"}
    # no violation status (not supported: no data, not an error): the firmware's throttler bits stand in
    assert gpus[0]["telemetry"]["throttle_reasons"] == [] and gpus[0]["status"] == "pass"


def test_amdsmi_that_cannot_initialise_is_unknown_not_missing_gpus(host: Host) -> None:
    host.amdsmi({"init_error": 18})  # AMDSMI_STATUS_INIT_ERROR: no amdgpu driver
    printed = host.run("--json", backend="amdsmi")
    report = printed.json()
    assert (printed.code, report["status"], report["reason"], report["gpus"]) == (
        1,
        "Unknown",
        "BackendUnavailable",
        [],
    )


def test_neuron_uncorrected_hbm_errors_fail_their_device(host: Host) -> None:
    """The devices are seen on the one cycle (the backend waits for neuron-monitor's first report)."""
    host.neuron_monitor("trn2_hbm_uncorrected.jsonl")
    printed = host.run("--json", backend="neuron")
    report = printed.json()
    assert printed.code == 1, printed.err
    assert (report["status"], len(report["gpus"])) == ("Unhealthy", 16)
    assert report["gpus"][1]["model"] == "Trainium2"
    assert "NeuronHbmUncorrectable" in {c["reason"] for c in report["gpus"][1]["checks"]}


def test_tpu_readings_from_tpu_info(host: Host) -> None:
    host.tpu_info("v6e-4-box.txt", "v6e", 4)
    printed = host.run("--json", backend="tpu")
    report = printed.json()
    assert (printed.code, report["status"], len(report["gpus"])) == (0, "Healthy", 4), printed.err
    first = report["gpus"][0]
    assert first["model"] == "TPU-v6e"
    assert first["telemetry"]["memory_used_bytes"] == round(18.45 * 2**30)
    assert first["telemetry"]["utilization_ratio"] == 1.0


def test_tpu_through_libtpus_monitoring_sdk(host: Host) -> None:
    """libtpu importable: detected as a TPU host, its SDK's per-accelerator strings read per chip."""
    gib = 1 << 30
    metrics = {
        "duty_cycle_pct": ["45.00", "46.00", "47.00", "48.00"],
        "tensorcore_util": ["30.00", "31.00", "32.00", "33.00"],
        "hbm_capacity_total": [str(95 * gib)] * 4,
        "hbm_capacity_usage": [str(12 * gib)] * 4,
    }
    host.libtpu(metrics, "v5p", 4)
    printed = host.run("--json", "--log-level", "INFO")
    report = printed.json()
    assert (report["backend"], report["status"], report["driver_version"]) == ("tpu", "Healthy", "0.0.21")
    assert "the libtpu module is importable" in printed.err
    telemetry = [gpu["telemetry"] for gpu in report["gpus"]]
    assert [t["utilization_ratio"] for t in telemetry] == [0.45, 0.46, 0.47, 0.48]
    assert {(t["memory_used_bytes"], t["memory_total_bytes"]) for t in telemetry} == {(12 * gib, 95 * gib)}


def test_tpu_with_tpu_info_alone_on_path_lists_its_chips(host: Host) -> None:
    """Nothing but `tpu-info` on PATH (no Google PCI function in the sysfs root): its chips table lists them."""
    host.put_on_path("tpu-info", FIXTURES / "tpu" / "fake-tpu-info")
    host.env["FAKE_TPU_INFO_OUTPUT"] = str(FIXTURES / "tpu" / "v6e-4-markdown.txt")
    printed = host.run("--json", "--log-level", "INFO")
    report = printed.json()
    assert (report["backend"], report["status"], len(report["gpus"])) == ("tpu", "Healthy", 4), printed.err
    assert report["driver_version"] == "0.0.19.dev20250721+nightly"
    assert [gpu["model"] for gpu in report["gpus"]] == ["TPU-v6e"] * 4


def test_tpu_chip_gone_from_the_host_is_missing_against_the_pools_count(host: Host) -> None:
    host.tpu_info("v5p-4-chip-gone.txt", "v5p", 4).remove_chip(2)
    config = host.tmp / "agent.yaml"
    config.write_text("pool: tpu\naccelerator: TPU-v5p\nexpectedGpus: 4\n")
    printed = host.run("--json", "--config", str(config), backend="tpu")
    report = printed.json()
    assert (printed.code, report["status"], report["reason"]) == (1, "Unhealthy", "GpuMissing"), printed.err
    assert [gpu["telemetry"]["memory_used_bytes"] for gpu in report["gpus"]] == [round(40.0 * 2**30)] * 3
