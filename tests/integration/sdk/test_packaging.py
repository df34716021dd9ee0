"""How the Python API is packaged: `import accelpool_sdk` loads neither kopf nor the operator's shell nor the
device agent, and without the agent (its `agent` extra) everything but instance_info() works and that one
says what to install. Each check runs in a fresh interpreter, as a user's program imports the package."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_the_sdk_imports_no_kopf_no_operator_shell_and_no_agent() -> None:
    loaded = run(
        "import sys, accelpool_sdk as ap; ap.ComputePool('p', ap.Accelerator.NVIDIA.H100(8)).pod_spec_fragment(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kopf', 'accelpool_agent', 'accelpool_demo') "
        "or m in ('accelpool.runtime.handlers', 'accelpool.runtime.controller', 'accelpool.cli')))"
    )
    assert loaded == "[]"


def test_without_the_agent_extra_instance_info_names_it_and_the_rest_works() -> None:
    hidden = (
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'accelpool_agent' not in repr(f)]; "
        "sys.path[:] = [p for p in sys.path if 'device-agent' not in p]; "
        "import accelpool_sdk as ap; print(ap.ComputePool('p', 'H100:8').pod_spec_fragment().limits); "
    )
    assert run(hidden + "print(__import__('importlib.util').util.find_spec('accelpool_agent'))").splitlines() == [
        "{'nvidia.com/gpu': 8}",
        "None",
    ]
    error = run(hidden + "\ntry:\n    ap.instance_info()\nexcept ModuleNotFoundError as error:\n    print(error)")
    assert error.splitlines()[-1] == (
        "instance_info() reads the devices through accelpool's device agent: pip install 'accelpool-sdk[agent]'"
    )


def test_the_agent_is_an_extra_and_the_distribution_is_part_of_the_dev_install() -> None:
    project = tomllib.loads((ROOT / "sdk" / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"] == {"agent": ["accelpool-agent==0.1.0"]}
    assert not any(r.startswith(("kopf", "accelpool-agent")) for r in project["dependencies"])
    assert " sdk" in next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("PACKAGES"))
