"""How the Python API is packaged: `pip install ./core ./api ./sdk` installs those three distributions and
neither the operator (`accelpool`) nor kopf; the SDK works there, and without the device agent everything but
instance_info() works and that one says how to install it, which then works (`pip install ./device-agent`).

The install is real: wheels built from the source tree with the build backend the images use
(requirements-build.lock, which `make install` puts in .venv), installed by pip with no index into a fresh
virtual environment. That environment sees the third-party packages of the dev environment (PyPI is not
needed) except kopf, kmock and accelpool's own distributions, so pip must find every accelpool dependency among
the wheels given, and fails if one needs the operator or kopf.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HIDDEN = ("accelpool", "__editable__", "kopf", "kmock", "pip")
"""What the fresh environment does not see of the dev environment's site-packages (name prefixes)."""


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def call(*command: str | Path) -> str:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


class FreshVenv:
    """A virtual environment with no accelpool distribution, kopf or kmock in it, and pip driven from outside
    (`pip --python`), reading the dev environment's third-party packages through a path entry."""

    def __init__(self, where: Path) -> None:
        self.where = where
        call(sys.executable, "-m", "venv", "--without-pip", where / "venv")
        self.python = where / "venv" / "bin" / "python"
        third_party = where / "third-party"
        third_party.mkdir()
        site_packages = Path(sysconfig.get_paths()["purelib"])
        for entry in site_packages.iterdir():
            if not entry.name.lower().startswith(HIDDEN) and entry.suffix != ".pth":
                (third_party / entry.name).symlink_to(entry)
        fresh_site = Path(call(self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
        (fresh_site / "third_party.pth").write_text(f"{third_party}\n")

    def pip_install(self, *arguments: str | Path) -> list[str]:
        """`pip install --no-index ...` into this environment; the names of the distributions it installed."""
        report = self.where / "report.json"
        pip = (sys.executable, "-m", "pip", "--python", self.python, "install", "--no-index", "--no-build-isolation")
        call(*pip, "-q", "--report", report, *arguments)
        return sorted(item["metadata"]["name"] for item in json.loads(report.read_text())["install"])

    def run(self, code: str) -> str:
        return call(self.python, "-c", code).strip()


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> tuple[FreshVenv, Path]:
    """A fresh environment, and a copy of the source tree's distributions (the build writes into its input)."""
    where = tmp_path_factory.mktemp("sdk-install")
    sources = where / "src"
    for directory in ("core", "api", "sdk", "device-agent"):
        shutil.copytree(ROOT / directory, sources / directory, ignore=shutil.ignore_patterns("*.egg-info", "build"))
    return FreshVenv(where), sources


def test_pip_install_core_api_sdk_installs_neither_the_operator_nor_kopf(fresh: tuple[FreshVenv, Path]) -> None:
    venv, sources = fresh
    installed = venv.pip_install(sources / "core", sources / "api", sources / "sdk")
    assert installed == ["accelpool-api", "accelpool-core", "accelpool-sdk"]
    found = venv.run(
        "import importlib.util as u, sys, accelpool_sdk as ap; "
        "pool = ap.ComputePool.from_yaml(ap.ComputePool('p', ap.Accelerator.NVIDIA.H100(8, mig='3g.40gb')).to_yaml()); "
        "print(pool.pod_spec_fragment().limits); "
        "print([m for m in ('accelpool', 'kopf', 'accelpool_agent') if u.find_spec(m)]); "
        "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith(('accelpool', 'kopf'))}))"
    )
    assert found.splitlines() == [
        "{'nvidia.com/gpu': 1}",
        "[]",
        "['accelpool_api', 'accelpool_core', 'accelpool_sdk']",
    ]

    # Without the device agent, instance_info() says how to install it; done so, it reads the devices.
    error = venv.run(
        "import accelpool_sdk as ap\ntry:\n    ap.instance_info()\nexcept ModuleNotFoundError as e:\n    print(e)"
    )
    assert error == (
        "instance_info() reads the devices through accelpool's device agent (accelpool-agent), which is not "
        "installed: from an accelpool checkout, pip install ./device-agent"
    )
    assert venv.pip_install(sources / "device-agent") == ["accelpool-agent"]
    assert venv.run("import accelpool_sdk as ap; print(ap.instance_info('fake', fake_gpus='H100:2').backend)") == "fake"


def test_importing_the_sdk_imports_no_kopf_no_operator_and_no_agent() -> None:
    loaded = run(
        "import sys, accelpool_sdk as ap; ap.ComputePool('p', ap.Accelerator.NVIDIA.H100(8)).pod_spec_fragment(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kopf', 'accelpool', 'accelpool_agent', "
        "'accelpool_demo')))"
    )
    assert loaded == "[]"


def test_the_sdk_depends_on_the_core_and_the_api_only_and_every_distribution_is_part_of_the_dev_install() -> None:
    project = tomllib.loads((ROOT / "sdk" / "pyproject.toml").read_text())["project"]
    own = [r for r in project["dependencies"] if r.startswith("accelpool")]
    assert own == ["accelpool-core==0.1.0", "accelpool-api==0.1.0"]
    assert "optional-dependencies" not in project, "an extra naming accelpool-agent cannot install: it is on no index"
    packages = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("PACKAGES"))
    assert {"core", "api", "sdk", "device-agent"} <= set(packages.split(":=")[1].split())
