"""The agent's state has one owner: it changes on the event loop only, never in a worker thread.

The interleaving tests stop the agent's backend thread at every backend call and let the event
loop write in between (report statistics, a compute cycle's flag); whatever the loop wrote must
survive the tick that was in flight. They are deterministic: the backend thread waits until the
test lets it go on. Were the tick to replace the snapshot from its thread again (a read, a pause,
a write), the loop's writes made during the pause would be lost and these tests would fail.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

from accelpool_agent.backends.fake import FakeBackend
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask
from accelpool_agent.compute.runner import InlineRunner
from accelpool_agent.model import DeviceInfo, DriverVersions, EccCounts, IbPort, Measurement, Telemetry, XidEvent
from accelpool_agent.snapshot import ReportStats
from accelpool_agent.state import AgentState, Inventory, Readings

from .conftest import make_fake_agent


class PausingBackend:
    """The fake backend, stopping at every call made off the event loop until the loop lets it go on."""

    def __init__(self, inner: FakeBackend, loop: asyncio.AbstractEventLoop) -> None:
        self.inner = inner
        self.name = inner.name
        self.compute_engine = inner.compute_engine
        self.loop = loop
        self.pausing = False
        self.paused: asyncio.Queue[threading.Event] = asyncio.Queue()
        self.threads: set[str] = set()

    def _pause(self) -> None:
        self.threads.add(threading.current_thread().name)
        if not self.pausing:
            return
        go_on = threading.Event()
        self.loop.call_soon_threadsafe(self.paused.put_nowait, go_on)
        if not go_on.wait(60):  # a hang guard, not a timing
            raise TimeoutError("the test never let the backend thread go on")

    @property
    def error(self) -> str | None:
        self._pause()
        return self.inner.error

    def open(self) -> None:
        self.inner.open()

    def close(self) -> None:
        self.inner.close()

    def inventory(self) -> list[DeviceInfo]:
        self._pause()
        return self.inner.inventory()

    def telemetry(self) -> list[Telemetry]:
        self._pause()
        return self.inner.telemetry()

    def drain_xid_events(self) -> list[XidEvent]:
        self._pause()
        return self.inner.drain_xid_events()

    def versions(self) -> DriverVersions:
        self._pause()
        return self.inner.versions()

    def infiniband(self) -> list[IbPort]:
        self._pause()
        return self.inner.infiniband()

    def compute_job(
        self, device: DeviceInfo, tasks: Sequence[ComputeTask], sizes: ComputeSizes, seed: int
    ) -> ComputeJob | None:
        return self.inner.compute_job(device, tasks, sizes, seed)


async def test_what_the_loop_writes_while_a_tick_reads_the_devices_is_kept() -> None:
    agent = make_fake_agent("H100:4", ["2:xid=79"])
    assert isinstance(agent.backend, FakeBackend)
    backend = PausingBackend(agent.backend, asyncio.get_running_loop())
    agent.backend = backend
    await agent.full_cycle()
    ticks = agent.snapshot.ticks_total

    backend.pausing = True
    tick = asyncio.create_task(agent.tick())
    pauses = 0
    while not tick.done():
        pause = asyncio.create_task(backend.paused.get())
        await asyncio.wait({tick, pause}, return_when=asyncio.FIRST_COMPLETED)
        if not pause.done():
            pause.cancel()
            continue
        pauses += 1  # the backend thread stands still: the loop writes now
        agent.record_report_stats(ReportStats(writes={"condition": pauses}, errors=pauses))
        pause.result().set()
    report = await tick

    assert pauses >= 3, "telemetry, XID events and the backend's error are read off the loop"
    assert backend.threads == {"accelpool-backend_0"}, "every backend call in the one backend thread"
    snapshot = agent.snapshot
    assert snapshot.report_stats == ReportStats(writes={"condition": pauses}, errors=pauses)
    assert snapshot.ticks_total == ticks + 1
    assert snapshot.report is report and report.reason == "XidError79"


class GatedRunner:
    """Runs compute jobs in-process once the test opens the gate; tells the loop when each one waits."""

    def __init__(self, loop: asyncio.AbstractEventLoop, gpus: int) -> None:
        self.loop = loop
        self.gate = threading.Event()
        self.waiting = 0
        self.all_waiting: asyncio.Future[None] = loop.create_future()
        self.gpus = gpus

    def run(self, job: ComputeJob, timeout_seconds: float) -> list[Measurement]:
        self.loop.call_soon_threadsafe(self._arrived)
        if not self.gate.wait(60):  # a hang guard, not a timing
            raise TimeoutError("the test never opened the gate")
        return InlineRunner().run(job, timeout_seconds)

    def _arrived(self) -> None:
        self.waiting += 1
        if self.waiting == self.gpus and not self.all_waiting.done():
            self.all_waiting.set_result(None)

    def close(self) -> None:
        self.gate.set()


async def test_ticks_during_a_compute_cycle_keep_its_flag_and_its_counts() -> None:
    agent = make_fake_agent("H100:2")
    runner = GatedRunner(asyncio.get_running_loop(), gpus=2)
    agent.runner = runner
    cycle = asyncio.create_task(agent.compute_cycle())
    await asyncio.wait_for(asyncio.shield(runner.all_waiting), 60)  # a hang guard, not a timing
    for _ in range(3):
        await agent.tick()
    assert agent.snapshot.compute_running and agent.snapshot.ticks_total == 3
    runner.gate.set()
    report = await cycle
    snapshot = agent.snapshot
    assert (snapshot.compute_running, snapshot.cycles_total, snapshot.ticks_total) == (False, 1, 3)
    assert report.complete and report.reason == "AllChecksPassed"


def test_a_step_returns_a_new_state_and_leaves_the_old_one_as_it_was() -> None:
    device = DeviceInfo(index=0, uuid="GPU-0", name="NVIDIA H100 80GB HBM3", pci_bus_id="0", memory_total_bytes=1)
    first = Readings(
        telemetry=(Telemetry(index=0, ecc=EccCounts(aggregate_double=2)),),
        xid_events=(XidEvent(index=0, xid=79, timestamp=10.0),),
        backend_error=None,
        inventory=Inventory((device,), None, taken_at=0.0),
    )
    before = AgentState()
    after = before.with_readings(first, now=10.0)
    assert before == AgentState() and before.gpus == {}
    assert after.devices == (device,) and after.gpu("GPU-0").xids.counts == {79: 1}
    later = after.with_readings(
        Readings((Telemetry(index=0, ecc=EccCounts(aggregate_double=3)),), (), backend_error=None), now=12.0
    )
    assert after.gpu("GPU-0").telemetry == first.telemetry[0]
    assert later.gpu("GPU-0").first_ecc == EccCounts(aggregate_double=2), "the baseline is the first reading"
    assert later.gpu("GPU-0").xids.counts == {79: 1}, "XIDs add up across ticks"
