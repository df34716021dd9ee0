"""The host's InfiniBand and RoCE ports, read from sysfs (`<root>/class/infiniband`).

The formats are the Linux kernel's (drivers/infiniband/core/sysfs.c): per port,
`ports/<n>/state` is `"%d: %s"` (`4: ACTIVE`; DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER),
`phys_state` is `"%d: %s"` (`5: LinkUp`; Sleep, Polling, Disabled, PortConfigurationTraining,
LinkUp, LinkErrorRecovery, Phy Test), `rate` is `"%d%s Gb/sec (%dX%s)"` (`400 Gb/sec (4X NDR)`,
`2.5 Gb/sec (1X)`), `link_layer` is `InfiniBand`, `Ethernet` or `Unknown`, and each file under
`counters/` is a decimal number, or `N/A (no PMA)` when the device has no performance-management
agent (no data). The counters are the PMA's and narrow (4 to 16 bits): they stop at their
maximum rather than wrap.

No `class/infiniband` directory (no RDMA device, or sysfs not mounted) reads as no ports. A
port that vanishes or cannot be read between two files is skipped for this reading. The root is
configurable (`--sysfs-root`, `$ACCELPOOL_AGENT_SYSFS_ROOT`) so tests can point it at a fake tree.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path

from accelpool_agent.model import IbPort

log = logging.getLogger(__name__)

COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_xmit_discards",
)
"""The error counters read from each port's `counters/` directory."""

_NUMBERED = re.compile(r"^\s*(\d+):\s*(.*?)\s*$")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


class SysfsFormatError(ValueError):
    """A sysfs file whose text is not in the kernel's format; the message names the file and the text."""


def parse_numbered(text: str, path: str) -> tuple[int, str]:
    """`4: ACTIVE` → (4, "ACTIVE")."""
    match = _NUMBERED.match(text)
    if not match:
        raise SysfsFormatError(f"{path}: expected '<number>: <name>' (e.g. '4: ACTIVE'), got {text.strip()!r}")
    return int(match.group(1)), match.group(2)


def parse_rate(text: str) -> float | None:
    """`400 Gb/sec (4X NDR)` → 400.0; None for text in another format."""
    match = _RATE.match(text)
    return float(match.group(1)) if match else None


def parse_counter(text: str) -> int | None:
    """`12` → 12; `N/A (no PMA)` (and anything not a number) → None."""
    value = text.strip()
    return int(value) if value.isdigit() else None


def parse_port(device: str, port: int, files: Mapping[str, str], where: str) -> IbPort:
    """One port from the text of its files (`state`, `phys_state`, `rate`, `link_layer`, `counters/<name>`)."""
    state, state_name = parse_numbered(files["state"], f"{where}/state")
    phys, phys_name = parse_numbered(files["phys_state"], f"{where}/phys_state")
    counters = {
        name: value for name in COUNTERS if (value := parse_counter(files.get(f"counters/{name}", ""))) is not None
    }
    return IbPort(
        device=device,
        port=port,
        state=state,
        state_name=state_name,
        phys_state=phys,
        phys_state_name=phys_name,
        link_layer=files.get("link_layer", "").strip() or "Unknown",
        rate_gbps=parse_rate(files.get("rate", "")),
        counters=counters,
    )


class SysfsInfiniband:
    """Reads every port of every RDMA device under `<root>/class/infiniband`."""

    def __init__(self, root: Path = Path("/sys")) -> None:
        self.base = root / "class" / "infiniband"

    def ports(self) -> list[IbPort]:
        if not self.base.is_dir():
            return []
        found: list[IbPort] = []
        for device in sorted(self.base.iterdir()):
            ports = device / "ports"
            if not ports.is_dir():
                continue
            for port_dir in sorted(ports.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 0):
                if not port_dir.name.isdigit():
                    continue
                port = self._port(device.name, port_dir)
                if port is not None:
                    found.append(port)
        return found

    def _port(self, device: str, directory: Path) -> IbPort | None:
        files: dict[str, str] = {}
        for name in ("state", "phys_state", "rate", "link_layer", *(f"counters/{c}" for c in COUNTERS)):
            try:
                files[name] = (directory / name).read_text()
            except OSError:
                continue  # a missing counter is no data; a missing state is caught below
        try:
            return parse_port(device, int(directory.name), files, str(directory))
        except (KeyError, SysfsFormatError) as error:
            log.debug("skipping RDMA port %s: %s", directory, error)
            return None
