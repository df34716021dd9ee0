"""The fake backend: N simulated devices of any catalog model and vendor, with injectable faults.

Telemetry is derived from the catalog entry (memory, TDP-based power, temperatures, clocks, PCIe
generation) and the vendor's tools (names as amd-smi, neuron-ls and tpu-info print them, driver versions;
AMD MI300X's 7 XGMI links in place of NVLinks; no links on Trainium and TPU) with a small noise that is a
pure function of (seed, GPU, tick), so a run is reproducible. As on real GPUs, an idle GPU's PCIe link
drops to gen1 and comes back to its maximum under load. SXM models (HGX baseboards) have NVLinks (6 on
V100, 12 on A100, 18 from Hopper on); Hopper and later SXM GPUs register with the NVSwitch fabric; and
the node has one InfiniBand HCA per GPU (`mlx5_<gpu>`, port 1), as rail-optimised HGX nodes do. PCIe
cards have none of these. Faults (`accelpool_agent.faults`) change what telemetry, XID events, the
InfiniBand ports and the compute children report; error counters grow at the fault's rate per minute of
the backend's clock. Used by the unit tests, `accelpool-agent check --backend fake`, and the demo
cluster.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from accelpool_agent import faults as fault_kinds
from accelpool_agent.backends import BackendError, Registration
from accelpool_agent.backends.fake_vendors import fatal_event, vendor_reading
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask, FakeProfile
from accelpool_agent.faults import Fault, FaultKind
from accelpool_agent.model import (
    DTYPES,
    DeviceInfo,
    DriverVersions,
    EccCounts,
    FabricInfo,
    IbPort,
    NvLink,
    PcieLink,
    RetiredPages,
    RowRemap,
    Telemetry,
    XidEvent,
)
from accelpool_core import catalog
from accelpool_core.protocol import VENDOR_BACKENDS

MAX_FAKE_GPUS = 64


@dataclass(frozen=True)
class _Traits:
    """What the catalog does not say about a model: compute capability, clocks (MHz), PCIe generation,
    NVLinks per GPU and InfiniBand rate (SXM boards), NVSwitch fabric registration (Hopper on)."""

    compute_capability: str | None
    sm_clock_max_mhz: int
    memory_clock_mhz: int
    pcie_generation: int
    slowdown_celsius: float = 87.0
    nvlinks: int = 0
    ib_gbps: float = 400.0
    fabric: bool = False


_TRAITS: dict[str, _Traits] = {
    "T4": _Traits("7.5", 1590, 5001, 3, 94.0),
    "L4": _Traits("8.9", 2040, 6251, 4, 92.0),
    "L40S": _Traits("8.9", 2520, 9001, 4, 92.0),
    "A10G": _Traits("8.6", 1710, 6251, 4, 92.0),
    "V100": _Traits("7.0", 1530, 877, 3, nvlinks=6, ib_gbps=100.0),
    "A100": _Traits("8.0", 1410, 1593, 4, nvlinks=12, ib_gbps=200.0),
    "H100": _Traits("9.0", 1980, 2619, 5, nvlinks=18, fabric=True),
    "H200": _Traits("9.0", 1980, 3201, 5, nvlinks=18, fabric=True),
    "GH200": _Traits("9.0", 1980, 2619, 5),
    "B200": _Traits("10.0", 1965, 3996, 5, nvlinks=18, fabric=True),
    # AMD OAM boards: each GPU's XGMI (Infinity Fabric) links to its 7 peers (MI300X) are reported as the
    # device's links; MI250X's 8 links join its two dies and the other cards. Hot spot limit 105 °C (amd-smi).
    "MI300X": _Traits(None, 2100, 1300, 5, 105.0, nvlinks=7),
    "MI250X": _Traits(None, 1700, 1600, 4, 105.0, nvlinks=8, ib_gbps=200.0),
    # Trainium / Inferentia and TPUs: no NVLink-like links in the device model (NeuronLink and ICI are not
    # read by their monitors), no per-device HCA; the Neuron and TPU hosts' EFA / DCN NICs are not sysfs IB.
    "Trainium2": _Traits(None, 2800, 2900, 5, 95.0),
    "Trainium": _Traits(None, 2800, 1600, 4, 95.0),
    "Inferentia2": _Traits(None, 2800, 1600, 4, 95.0),
    "TPU-v5e": _Traits(None, 1500, 1600, 4, 95.0),
    "TPU-v5p": _Traits(None, 1750, 2600, 5, 95.0),
    "TPU-v6e": _Traits(None, 1750, 3200, 5, 95.0),
}
_GENERIC = _Traits(None, 1700, 1600, 4)
_BASEBOARDS = (catalog.FormFactor.SXM, catalog.FormFactor.OAM, catalog.FormFactor.ASIC)
"""Form factors on a multi-accelerator baseboard, whose links the model's traits give (HGX, OAM, ASIC trays)."""
_HGX_BUS_IDS = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
_IDLE_SM_MHZ = 345
_DRIVERS: dict[catalog.Vendor, tuple[DriverVersions, DriverVersions]] = {
    catalog.Vendor.NVIDIA: (DriverVersions(driver="550.54.15", cuda="12.4"), DriverVersions("535.104.05", "12.2")),
    catalog.Vendor.AMD: (DriverVersions(driver="6.8.5"), DriverVersions(driver="6.3.6")),  # amdgpu (ROCm 6.2 / 6.0)
    catalog.Vendor.AWS: (DriverVersions(driver="2.19.64.0"), DriverVersions(driver="2.15.9.0")),  # aws-neuronx-dkms
    catalog.Vendor.GOOGLE: (DriverVersions(driver="0.0.9"), DriverVersions(driver="0.0.3")),  # libtpu
}
"""Each vendor's (current, old) driver: the `old-driver` fault reports the old one."""
_LOADED = 0.95
"""Utilization of a GPU a fault keeps loaded (pcie-gen-low, pstate-stuck, clocks-low)."""


def parse_fake_gpus(text: str) -> tuple[catalog.Accelerator, int]:
    """`H100:8` → (the H100 entry, 8); `L4` → its usual count per node. Errors name the valid choices."""
    name, sep, raw_count = text.strip().rpartition(":") if ":" in text else (text.strip(), "", "")
    try:
        accelerator = catalog.lookup(name)
    except catalog.UnknownAcceleratorError as error:
        hint = f" did you mean {', '.join(error.suggestions)}?" if error.suggestions else ""
        raise BackendError(
            f"invalid --fake-gpus {text!r}: unknown accelerator {name!r};{hint} "
            f"valid: {', '.join(a.name for a in catalog.ACCELERATORS)} (as MODEL or MODEL:COUNT)"
        ) from None
    if not sep:
        return accelerator, accelerator.default_count
    try:
        count = int(raw_count)
    except ValueError:
        count = -1
    if not 0 <= count <= MAX_FAKE_GPUS:
        raise BackendError(
            f"invalid --fake-gpus {text!r}: count {raw_count!r} must be an integer from 0 to {MAX_FAKE_GPUS}"
        )
    return accelerator, count


def product_name(accelerator: catalog.Accelerator) -> str:
    """The name the vendor's tool reports: NVML's (GFD's label with '-' back to spaces), amd-smi's market
    name (`AMD Instinct MI300X`), neuron-ls's device type (`Trainium2`), tpu-info's chip type (`TPU v5p`)."""
    products = accelerator.detection.gfd_products
    if products:
        return products[0].replace("-", " ")
    if accelerator.vendor is catalog.Vendor.AMD:
        return f"AMD Instinct {accelerator.model}"
    if accelerator.vendor is catalog.Vendor.GOOGLE:
        return accelerator.model.replace("-", " ")
    return accelerator.model


class FakeBackend:
    """Simulated GPUs. Deterministic for a given seed and sequence of calls."""

    name = "fake"
    compute_engine: str | None = "fake"

    def __init__(
        self,
        accelerator: catalog.Accelerator,
        count: int,
        *,
        faults: Mapping[int, tuple[Fault, ...]] | None = None,
        seed: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        faults = dict(faults or {})
        beyond = [index for index in faults if not 0 <= index < count]
        if beyond:
            raise BackendError(f"fault for GPU {beyond[0]}, but there are {count} fake GPUs (0-{count - 1})")
        self.accelerator = accelerator
        self.count = count
        self.faults = faults
        self.seed = seed
        self.traits = _TRAITS.get(accelerator.model, _GENERIC)
        if accelerator.form_factor not in _BASEBOARDS:  # PCIe cards: no NVLink, fabric or HCA per GPU
            self.traits = replace(self.traits, nvlinks=0, fabric=False)
        self._clock = clock
        self._started = clock()
        self._tick = 0
        self._ib_readings = 0
        self._xids_sent = False
        self._devices = [self._device(index) for index in range(count)]
        nvidia = accelerator.vendor is catalog.Vendor.NVIDIA
        self.judged_as = self.name if nvidia else VENDOR_BACKENDS[accelerator.vendor.value]
        """The backend whose vendor rules judge these devices (`accelpool_agent.rules.vendor`): the vendor's
        (amdsmi, neuron, tpu), as its real devices are judged; the generic rules' (`fake`) for NVIDIA."""

    @property
    def error(self) -> str | None:
        return None

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def _faults(self, index: int, kind: FaultKind) -> list[Fault]:
        return fault_kinds.find(self.faults.get(index, ()), kind)

    def _device(self, index: int) -> DeviceInfo:
        rng = random.Random(f"{self.seed}:uuid:{index}")
        device_uuid = uuid.UUID(int=rng.getrandbits(128), version=4)
        bus = _HGX_BUS_IDS[index] if index < len(_HGX_BUS_IDS) else 0x100 + index
        return DeviceInfo(
            index=index,
            uuid=f"GPU-{device_uuid}" if self.accelerator.vendor is catalog.Vendor.NVIDIA else str(device_uuid),
            name=product_name(self.accelerator),
            pci_bus_id=f"00000000:{bus:02X}:00.0",
            memory_total_bytes=self.accelerator.memory_gb * 2**30,
            model=self.accelerator.name,
            compute_capability=self.traits.compute_capability,
            serial=f"{1650000000000 + rng.randrange(10**9)}",
        )

    def inventory(self) -> list[DeviceInfo]:
        return list(self._devices)

    def telemetry(self) -> list[Telemetry]:
        """Each device's readings as its vendor's backend reports them (`backends.fake_vendors`)."""
        self._tick += 1
        return [
            vendor_reading(self.accelerator, self._reading(index), fatal=bool(self._faults(index, FaultKind.FATAL)))
            for index in range(self.count)
        ]

    def _reading(self, index: int) -> Telemetry:
        if self._faults(index, FaultKind.LOST):
            return Telemetry(index=index, lost=True, error="GPU is lost (simulated)")
        rng = random.Random(f"{self.seed}:telemetry:{index}:{self._tick}")
        accelerator, traits = self.accelerator, self.traits
        total = accelerator.memory_gb * 2**30
        tdp = float(accelerator.tdp_watts)
        busy = bool(self._faults(index, FaultKind.BUSY))
        hot = bool(self._faults(index, FaultKind.HOT))
        throttled = bool(self._faults(index, FaultKind.THROTTLE))
        clocks_low = bool(self._faults(index, FaultKind.CLOCKS_LOW))
        gen_low = bool(self._faults(index, FaultKind.PCIE_GEN_LOW))
        pstate_stuck = bool(self._faults(index, FaultKind.PSTATE_STUCK))
        loaded = busy or clocks_low or gen_low or pstate_stuck
        utilization = rng.uniform(0.9, 1.0) if busy else (_LOADED if loaded else 0.0)
        reasons = {"gpu_idle"} if not loaded else set()
        temperature = (60.0 if loaded else 31.0) + rng.uniform(0.0, 4.0) + index * 0.5
        power = tdp * (rng.uniform(0.7, 0.9) if loaded else rng.uniform(0.09, 0.11))
        if self._faults(index, FaultKind.POWER_HIGH):
            power = tdp * 1.25
        sm_mhz = float(traits.sm_clock_max_mhz if loaded else _IDLE_SM_MHZ)
        if clocks_low:
            sm_mhz = traits.sm_clock_max_mhz * 0.3
        if hot:
            temperature = traits.slowdown_celsius + 2.0 + rng.uniform(0.0, 1.0)
            reasons |= {"sw_thermal_slowdown", "hw_thermal_slowdown"}
            sm_mhz = min(sm_mhz, traits.sm_clock_max_mhz * 0.5)
        if throttled:
            reasons |= {"hw_slowdown", "hw_power_brake_slowdown"}
            sm_mhz = min(sm_mhz, traits.sm_clock_max_mhz * 0.4)
        dbe = 1 if self._faults(index, FaultKind.ECC_DBE) else 0
        ampere_or_later = traits.compute_capability is not None and float(traits.compute_capability) >= 8.0
        remap_failure = bool(self._faults(index, FaultKind.ROW_REMAP_FAILURE))
        remap_pending = bool(self._faults(index, FaultKind.ROW_REMAP_PENDING)) or remap_failure
        width = 8 if self._faults(index, FaultKind.PCIE_DEGRADED) else 16
        generation = traits.pcie_generation if loaded else 1  # idle GPUs drop the link to gen1
        if gen_low:
            generation = max(1, traits.pcie_generation - 2)
        return Telemetry(
            index=index,
            utilization_ratio=round(utilization, 3),
            memory_utilization_ratio=round(utilization * 0.6, 3),
            memory_used_bytes=int(total * (rng.uniform(0.6, 0.8) if busy else 0.006)),
            memory_total_bytes=total,
            temperature_celsius=round(temperature, 1),
            slowdown_temperature_celsius=traits.slowdown_celsius,
            power_watts=round(power, 2),
            power_limit_watts=tdp,
            energy_joules=round(tdp * 0.1 * (3600.0 + self._tick * 2.0), 1),
            sm_clock_hertz=sm_mhz * 1e6,
            sm_clock_max_hertz=traits.sm_clock_max_mhz * 1e6,
            memory_clock_hertz=traits.memory_clock_mhz * 1e6,
            throttle_reasons=frozenset(reasons),
            ecc=EccCounts(volatile_single=0, volatile_double=dbe, aggregate_single=0, aggregate_double=dbe),
            retired_pages=RetiredPages(single_bit=0, double_bit=dbe if not ampere_or_later else 0, pending=False),
            row_remap=RowRemap(
                correctable=0,
                uncorrectable=dbe + int(remap_failure),
                pending=remap_pending,
                failure=remap_failure,
            )
            if ampere_or_later
            else None,
            pcie=PcieLink(
                generation=generation,
                width=width,
                max_generation=traits.pcie_generation,
                max_width=16,
            ),
            compute_processes=1 if busy else 0,
            performance_state=8 if pstate_stuck else 0,
            nvlinks=self._nvlinks(index),
            fabric=self._fabric(index),
            recovery_action=1 if self._faults(index, FaultKind.RESET_REQUIRED) else 0,
        )

    def _minutes(self) -> float:
        return max(0.0, self._clock() - self._started) / 60.0

    def _nvlinks(self, index: int) -> tuple[NvLink, ...] | None:
        if not self.traits.nvlinks:
            return None
        down = bool(self._faults(index, FaultKind.NVLINK_DOWN))
        replays = sum(int(f.rate(600.0) * self._minutes()) for f in self._faults(index, FaultKind.NVLINK_ERRORS))
        zero = {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}
        return tuple(
            NvLink(
                link=link,
                active=not (down and link == 0),
                errors={**zero, "replay": replays} if link == 0 else zero,
            )
            for link in range(self.traits.nvlinks)
        )

    def _fabric(self, index: int) -> FabricInfo | None:
        if not self.traits.fabric:
            return None
        if self._faults(index, FaultKind.FABRIC_UNREGISTERED):
            return FabricInfo(state="not_started")
        return FabricInfo(state="completed", degraded_bandwidth=bool(self._faults(index, FaultKind.FABRIC_DEGRADED)))

    def versions(self) -> DriverVersions:
        current, old = _DRIVERS[self.accelerator.vendor]
        return old if any(self._faults(index, FaultKind.OLD_DRIVER) for index in range(self.count)) else current

    def infiniband(self) -> list[IbPort]:
        """One InfiniBand port per GPU on HGX (SXM) nodes, `mlx5_<gpu>` port 1; none on PCIe-card nodes."""
        if not self.traits.nvlinks:
            return []
        self._ib_readings += 1
        return [self._ib_port(index) for index in range(self.count)]

    def _ib_port(self, index: int) -> IbPort:
        down = bool(self._faults(index, FaultKind.IB_DOWN))
        symbol_errors = sum(int(f.rate(60.0) * self._minutes()) for f in self._faults(index, FaultKind.IB_ERRORS))
        flaps = self._ib_readings if self._faults(index, FaultKind.IB_FLAP) else 0
        return IbPort(
            device=f"mlx5_{index}",
            port=1,
            state=1 if down else 4,
            state_name="DOWN" if down else "ACTIVE",
            phys_state=2 if down else 5,
            phys_state_name="Polling" if down else "LinkUp",
            link_layer="InfiniBand",
            rate_gbps=self.traits.ib_gbps,
            counters={
                "symbol_error": min(symbol_errors, 0xFFFF),  # PMA counters saturate (16 bits here)
                "link_error_recovery": 0,
                "link_downed": min(flaps, 0xFF),
                "port_rcv_errors": 0,
                "local_link_integrity_errors": 0,
                "excessive_buffer_overrun_errors": 0,
                "port_xmit_discards": 0,
            },
        )

    def drain_xid_events(self) -> list[XidEvent]:
        """Each `xid=<n>` fault (NVIDIA's devices only) and each `fatal` fault's driver event (NVIDIA, AMD)
        fires once, at the first drain (as the driver logs it once)."""
        if self._xids_sent:
            return []
        self._xids_sent = True
        nvidia = self.accelerator.vendor is catalog.Vendor.NVIDIA
        events = [
            XidEvent(index=index, xid=int(fault.value or 0), timestamp=0.0)
            for index in range(self.count)
            for fault in (self._faults(index, FaultKind.XID) if nvidia else ())
        ]
        fatal = (fatal_event(self.accelerator.vendor, i) for i in range(self.count) if self._faults(i, FaultKind.FATAL))
        return events + [event for event in fatal if event is not None]

    def compute_job(
        self, device: DeviceInfo, tasks: Sequence[ComputeTask], sizes: ComputeSizes, seed: int
    ) -> ComputeJob | None:
        peaks = tuple(
            (dtype, float(peak)) for dtype in DTYPES if (peak := self.accelerator.peaks.get(dtype)) is not None
        )
        profile = FakeProfile(
            index=device.index,
            peaks=peaks,
            bandwidth_gbps=self.accelerator.bandwidth_gbps,
            faults=self.faults.get(device.index, ()),
            seed=self.seed,
        )
        return ComputeJob(
            engine="fake", gpu_index=device.index, tasks=tuple(tasks), sizes=sizes, seed=seed, fake=profile
        )


def from_flags(
    *, fake_gpus: str | None = None, faults: Mapping[int, tuple[Fault, ...]] | None = None, seed: int = 0
) -> FakeBackend:
    """The fake backend of `--fake-gpus` (default `H100`, at its usual count per node), `--fault` and `--seed`."""
    accelerator, count = parse_fake_gpus(fake_gpus or "H100")
    return FakeBackend(accelerator, count, faults=faults or {}, seed=seed)


REGISTRATION = Registration(
    name="fake",
    summary="simulated devices of any vendor",
    factory=from_flags,
    takes=("fake_gpus", "faults", "seed"),
)
