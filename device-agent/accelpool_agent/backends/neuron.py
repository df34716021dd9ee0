"""The AWS Neuron backend (Trainium, Trainium2, Inferentia2): `neuron-monitor`'s JSON report stream.

The agent runs `neuron-monitor -c <config.json>` (AWS Neuron tools; "Neuron Monitor User Guide",
aws-neuron-sdk tools/neuron-sys-tools/neuron-monitor-user-guide.rst) as a child process. The
config (`monitor_config`) asks, at one period, for the NeuronCore counters, memory used, vCPU
usage and execution stats of every Neuron application (`tag_filter` `.*`) and for the hardware
ECC counters (`neuron_hw_counters`); `instance_info` and `neuron_hardware_info` are always in the
report. neuron-monitor writes one complete JSON report per line; a reader thread
(`MonitorReader`) reads them so the agent never blocks on the pipe, keeps what they say
(`neuron_state.MonitorState`), and:

- logs and skips a line that is not a report (stderr is merged into the stream, so a message of
  neuron-monitor's own is logged the same way), and a line that is not UTF-8 is decoded with
  replacement characters rather than stopping the reader; a group the report marks with an `error`
  (or that is not in the documented shape) is logged once per distinct problem and skipped;
- when neuron-monitor exits (or cannot start: binary missing), sets `error`, forgets the latest
  report (so the node reads Unknown / BackendUnavailable, never GpuMissing) and starts it again
  after a backoff that doubles up to `max_backoff_seconds`, back to the minimum after a report;
- a report with no Neuron application running still carries the hardware counters: devices are
  inventoried and judged on them, idle (0% utilization, no device memory used).

One period for every metric group: the guide says `error_summary` counts the errors "for the
captured period" and is silent on whether a report repeats a group not collected again, so with
one period every report carries each group once, and the errors are summed over reports.

Each Neuron device is one device of the inventory (model from `neuron_device_type`, else the
instance type, against the catalog). A device seen once and missing from a later report is lost
(`Telemetry.lost`). No compute checks (`compute_job` is None): they would need a Neuron framework
(torch-neuronx, JAX on Neuron) and a compiled model in the agent's image; the Neuron health signals
are the counters, judged by `rules.neuron`. Neuron has no XIDs: `drain_xid_events` is empty, the
runtime's execution errors arrive in `Telemetry.execution_errors`. The driver's version is read
from sysfs (`/sys/module/neuron/version`), neuron-monitor does not report it.
"""

from __future__ import annotations

import json
import logging
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelpool_agent.backends import Detector, Need, Registration, probes
from accelpool_agent.backends.infiniband import SysfsInfiniband
from accelpool_agent.backends.neuron_report import ReportError, parse_report
from accelpool_agent.backends.neuron_state import MonitorState
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask
from accelpool_agent.model import DeviceInfo, DriverVersions, IbPort, Telemetry, XidEvent

log = logging.getLogger(__name__)

DEFAULT_BINARY = "neuron-monitor"
RUNTIME_METRICS = ("neuroncore_counters", "memory_used", "neuron_runtime_vcpu_usage", "execution_stats")
SYSTEM_METRICS = ("neuron_hw_counters",)


def monitor_config(period_seconds: float) -> dict[str, Any]:
    """neuron-monitor's configuration file (the guide's "Configuration file example", one period)."""
    if period_seconds <= 0:
        raise ValueError(f"neuron-monitor period: {period_seconds!r} s; valid: a positive number of seconds")
    return {
        "period": f"{period_seconds:g}s",
        "neuron_runtimes": [{"tag_filter": ".*", "metrics": [{"type": name} for name in RUNTIME_METRICS]}],
        "system_metrics": [{"type": name} for name in SYSTEM_METRICS],
    }


class MonitorReader:
    """Runs a neuron-monitor command in a thread, restarting it with backoff; `state` is the latest."""

    def __init__(
        self, command: Sequence[str], *, min_backoff_seconds: float = 1.0, max_backoff_seconds: float = 60.0
    ) -> None:
        self._command = list(command)
        self._min_backoff = min_backoff_seconds
        self._max_backoff = max_backoff_seconds
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._process: subprocess.Popen[str] | None = None
        self._state = MonitorState()
        self._error: str | None = "neuron-monitor has not reported yet"
        self._first_outcome = threading.Event()
        """Set at the first report, or the first failure (a command that cannot run, or exits)."""
        self.starts = 0
        """How many times the command was started (restarts included)."""
        self.skipped_lines = 0
        self._noted: set[str] = set()

    @property
    def state(self) -> MonitorState:
        with self._lock:
            return self._state

    @property
    def error(self) -> str | None:
        with self._lock:
            return self._error

    def wait_for_first(self, timeout_seconds: float) -> bool:
        """Wait until the command has reported once or failed; False when neither happened in time."""
        return self._first_outcome.wait(timeout_seconds)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="neuron-monitor", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        backoff = self._min_backoff
        while not self._stopping.is_set():
            if self._read_once():
                backoff = self._min_backoff
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, self._max_backoff)

    def _read_once(self) -> bool:
        """Run the command until it exits; True when it gave at least one report."""
        try:
            process = subprocess.Popen(
                self._command,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                bufsize=1,
            )
        except OSError as exc:
            self._fail(f"cannot run {self._command[0]}: {exc.strerror or exc}")
            return False
        self._process = process
        self.starts += 1
        reported = False
        last_message = ""
        assert process.stdout is not None
        for line in process.stdout:
            if not line.strip():
                continue
            try:
                report = parse_report(line)
            except ReportError as exc:
                self.skipped_lines += 1
                last_message = line.strip()[:200]
                log.warning("neuron-monitor: skipped a line that is not a report: %s", exc)
                continue
            reported = True
            self._note(report.problems)
            with self._lock:
                self._state = self._state.with_report(report)
                self._error = f"Neuron driver: {report.hardware_error}" if report.hardware_error else None
            self._first_outcome.set()
        status = process.wait()
        if not self._stopping.is_set():
            said = f": {last_message}" if last_message else ""
            self._fail(f"{self._command[0]} exited with status {status}{said}; restarting it")
        return reported

    def _fail(self, why: str) -> None:
        log.warning("neuron-monitor: %s", why)
        with self._lock:
            self._error = why
            self._state = self._state.without_report()
        self._first_outcome.set()

    def _note(self, problems: Sequence[str]) -> None:
        """Log the groups a report skipped, each distinct problem once (they repeat every period)."""
        for problem in problems:
            if problem not in self._noted:
                self._noted.add(problem)
                log.warning("neuron-monitor: skipped %s", problem)


class NeuronBackend:
    """AWS Trainium / Inferentia devices through `neuron-monitor` (see the module's docstring)."""

    name = "neuron"
    compute_engine: str | None = None

    def __init__(
        self,
        *,
        binary: str = DEFAULT_BINARY,
        period_seconds: float = 5.0,
        min_backoff_seconds: float = 1.0,
        max_backoff_seconds: float = 60.0,
        sysfs_root: Path = Path("/sys"),
    ) -> None:
        self._config = monitor_config(period_seconds)
        self._config_dir: tempfile.TemporaryDirectory[str] | None = None
        self._binary = binary
        self._backoff = (min_backoff_seconds, max_backoff_seconds)
        self._reader: MonitorReader | None = None
        self._sysfs_root = sysfs_root
        self._infiniband = SysfsInfiniband(sysfs_root)
        self._first_report_seconds = 2 * period_seconds + 5
        """How long `open` waits for neuron-monitor's first report: two periods and its start-up."""

    @property
    def error(self) -> str | None:
        return self._reader.error if self._reader is not None else "neuron-monitor not started"

    @property
    def reader(self) -> MonitorReader | None:
        return self._reader

    def open(self) -> None:
        if self._reader is not None:
            return
        self._config_dir = tempfile.TemporaryDirectory(prefix="accelpool-neuron-")
        config = Path(self._config_dir.name) / "neuron-monitor.json"
        config.write_text(json.dumps(self._config, indent=2))
        self._reader = MonitorReader(
            [self._binary, "-c", str(config)],
            min_backoff_seconds=self._backoff[0],
            max_backoff_seconds=self._backoff[1],
        )
        self._reader.start()
        # neuron-monitor reports once per period: wait for its first report (or its failure), so that a
        # first check (`accelpool-agent check`) sees the devices rather than "has not reported yet".
        self._reader.wait_for_first(self._first_report_seconds)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.stop()
            self._reader = None
        if self._config_dir is not None:
            self._config_dir.cleanup()
            self._config_dir = None

    def _state(self) -> MonitorState:
        return self._reader.state if self._reader is not None else MonitorState()

    def inventory(self) -> list[DeviceInfo]:
        return self._state().inventory()

    def telemetry(self) -> list[Telemetry]:
        return self._state().telemetry()

    def drain_xid_events(self) -> list[XidEvent]:
        return []

    def versions(self) -> DriverVersions:
        try:
            driver = (self._sysfs_root / "module" / "neuron" / "version").read_text().strip() or None
        except OSError:
            driver = None
        return DriverVersions(driver=driver)

    def infiniband(self) -> list[IbPort]:
        return self._infiniband.ports()

    def compute_job(
        self, device: DeviceInfo, tasks: Sequence[ComputeTask], sizes: ComputeSizes, seed: int
    ) -> ComputeJob | None:
        return None


REGISTRATION = Registration(
    name="neuron",
    summary="AWS Trainium/Inferentia (neuron-monitor)",
    factory=NeuronBackend,
    needs=(Need(f"{DEFAULT_BINARY} on PATH", commands=(DEFAULT_BINARY,)),),
    detector=Detector("Neuron", probes.neuron),
)
