"""The installed console scripts and `python -m` entry points, each run as a process as a user or CI runs
them: `accelpool` (the operator's command) and `accelpool-agent` (whose checks spawn children)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from accelpool_api import crd
from tests.support.environment import ROOT


def test_console_scripts_run() -> None:
    bin_dir = Path(sys.executable).parent
    out = subprocess.run([bin_dir / "accelpool", "crd"], capture_output=True, text=True, check=True).stdout
    assert out == crd.render_yaml()
    detail = subprocess.run([bin_dir / "accelpool", "catalog", "l4"], capture_output=True, text=True, check=True)
    assert "L4  (nvidia L4, 24GB, PCIe)" in detail.stdout


def test_console_script_end_to_end() -> None:
    """The installed `accelpool-agent` entry point, as a user or CI runs it."""
    script = Path(sys.executable).parent / "accelpool-agent"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "accelpool_agent"]
    done = subprocess.run(
        [*command, "check", "--backend", "fake", "--fake-gpus", "H100:8", "--fault", "3:xid=79", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "LOG_LEVEL": "ERROR"},
        check=False,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert (report["healthy"], report["reason"], report["bad_gpus"]) == (False, "XidError79", [3])


def test_python_dash_m_works_with_spawned_children() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "accelpool_agent", "check", "--backend", "fake", "--fake-gpus", "L4:2", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "LOG_LEVEL": "ERROR"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["healthy"] is True


_IMPORTED = """
import contextlib, io, sys
from accelpool.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
heavy = ("kopf", "aiohttp", "accelpool.runtime", "accelpool.decide", "accelpool.cli.recommend")
print(" ".join(sorted({m.split(".")[0] if m.split(".")[0] in ("kopf", "aiohttp") else m
                       for m in sys.modules if m.startswith(heavy)})))
"""


def test_help_and_validate_import_only_what_they_use() -> None:
    """`accelpool --help` and `accelpool validate` load neither kopf, aiohttp, the operator's runtime nor the
    planner (what made every command take a second); `accelpool run` does."""

    def imported(*argv: str) -> set[str]:
        done = subprocess.run(
            [sys.executable, "-c", _IMPORTED, *argv], capture_output=True, text=True, check=True, cwd=ROOT
        )
        return set(done.stdout.split())

    assert imported("--help") == set()
    assert imported("validate", "-f", "examples/h100-training.yaml") == set()
    assert imported("catalog") == set()
    assert {"kopf", "accelpool.runtime"} <= imported("run", "--help")
