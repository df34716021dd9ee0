"""The Makefile's targets fetch only the tools they use: `make demo` needs kubectl, not Prometheus (whose
fetch needs apt, so Debian) nor helm. Read with `make -n` (nothing runs) on an empty tools directory."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.environment import require_tool

ROOT = Path(__file__).resolve().parents[2]


def dry_run(target: str, tools: Path) -> str:
    """What `make -n TARGET` would run, as from a shell: not as a sub-make of `make test` (whose MAKEFLAGS
    and MAKELEVEL would add "Entering directory" lines)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        [require_tool("make"), "--no-print-directory", "-n", target, f"TOOLS={tools}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_make_demo_fetches_kubectl_and_nothing_else(tmp_path: Path) -> None:
    commands = dry_run("demo", tmp_path / "tools")
    assert f"{tmp_path}/tools/bin/kubectl" in commands, "kubectl: the demo's hints and walkthrough run it"
    assert "prometheus" not in commands and "apt-get" not in commands
    assert "accelpool demo" in commands.splitlines()[-1]
