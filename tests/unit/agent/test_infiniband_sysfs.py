"""The InfiniBand reader against a sysfs-shaped tree under tmp_path, in the Linux kernel's formats
(drivers/infiniband/core/sysfs.c): `4: ACTIVE`, `5: LinkUp`, `400 Gb/sec (4X NDR)`, counters as
decimal numbers or `N/A (no PMA)`."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelpool_agent.backends.cpu import CpuBackend
from accelpool_agent.backends.infiniband import SysfsFormatError, SysfsInfiniband, parse_numbered, parse_rate

ACTIVE = {"state": "4: ACTIVE\n", "phys_state": "5: LinkUp\n", "rate": "400 Gb/sec (4X NDR)\n"}


def make_port(
    root: Path, device: str, port: int, files: dict[str, str], counters: dict[str, str] | None = None
) -> None:
    directory = root / "class" / "infiniband" / device / "ports" / str(port)
    (directory / "counters").mkdir(parents=True)
    (directory / "link_layer").write_text(files.pop("link_layer", "InfiniBand\n"))
    for name, text in files.items():
        (directory / name).write_text(text)
    for name, text in (counters or {}).items():
        (directory / "counters" / name).write_text(text)


def test_ports_states_rates_and_counters(tmp_path: Path) -> None:
    make_port(tmp_path, "mlx5_0", 1, dict(ACTIVE), {"symbol_error": "12\n", "link_downed": "3\n"})
    make_port(tmp_path, "mlx5_1", 1, {"state": "1: DOWN\n", "phys_state": "2: Polling\n", "rate": "10 Gb/sec (4X)\n"})
    make_port(
        tmp_path,
        "mlx5_2",
        1,
        {**ACTIVE, "link_layer": "Ethernet\n", "rate": "2.5 Gb/sec (1X)\n"},
        {"symbol_error": "N/A (no PMA)\n"},
    )
    first, second, roce = SysfsInfiniband(tmp_path).ports()
    assert (first.name, first.state, first.state_name, first.phys_state_name, first.up) == (
        "mlx5_0/1",
        4,
        "ACTIVE",
        "LinkUp",
        True,
    )
    assert first.rate_gbps == 400.0
    assert dict(first.counters) == {"symbol_error": 12, "link_downed": 3}
    assert (second.state_name, second.phys_state, second.up) == ("DOWN", 2, False)
    assert (roce.link_layer, roce.rate_gbps, dict(roce.counters)) == ("Ethernet", 2.5, {})  # no PMA: no data


def test_no_infiniband_directory_is_no_ports(tmp_path: Path) -> None:
    assert SysfsInfiniband(tmp_path).ports() == []
    assert CpuBackend(sysfs_root=tmp_path).infiniband() == []


def test_a_port_without_a_readable_state_is_skipped(tmp_path: Path) -> None:
    make_port(tmp_path, "mlx5_0", 1, {"phys_state": "5: LinkUp\n"})
    make_port(tmp_path, "mlx5_1", 1, {"state": "garbage\n", "phys_state": "5: LinkUp\n"})
    make_port(tmp_path, "mlx5_2", 1, dict(ACTIVE))
    assert [p.name for p in SysfsInfiniband(tmp_path).ports()] == ["mlx5_2/1"]


def test_formats() -> None:
    assert parse_numbered("7: Phy Test\n", "phys_state") == (7, "Phy Test")
    with pytest.raises(SysfsFormatError, match=r"state: expected '<number>: <name>'.*got 'ACTIVE'"):
        parse_numbered("ACTIVE", "state")
    assert parse_rate("100 Gb/sec (4X EDR)") == 100.0
    assert parse_rate("unknown") is None
