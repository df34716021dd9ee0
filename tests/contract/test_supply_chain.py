"""The images' supply chain: base images pinned by digest (Makefile and Dockerfiles agree), every
Python package installed from a lock with hashes, each image's lock holding what its code imports
(the agents' no kopf), each vendor's agent image carrying that vendor's libraries at pinned versions
and built by a make target under the name the operator and the chart run, and `make install`
taking the dev lock."""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from accelpool.decide import agent_access
from accelpool_api import VENDOR_BACKENDS
from tests.contract.chart import (
    CHART,
)

pytestmark = pytest.mark.contract


# ---- Supply chain: the images' base by digest, every Python package from a lock with hashes.
# (No Docker engine runs these tests: the Dockerfiles are read, not built.)

ROOT = CHART.parents[1]
DOCKERFILES = {
    "operator": ROOT / "operator" / "Dockerfile",
    "agent": ROOT / "device-agent" / "Dockerfile",
    "agent-rocm": ROOT / "device-agent" / "Dockerfile.rocm",
    "agent-neuron": ROOT / "device-agent" / "Dockerfile.neuron",
    "agent-tpu": ROOT / "device-agent" / "Dockerfile.tpu",
}
IMAGE_LOCKS = {image: f"requirements-{image}.lock" for image in DOCKERFILES}
AGENT_IMAGES = sorted(image for image in DOCKERFILES if image.startswith("agent"))
PINNED_IMAGE = re.compile(r"^[a-z0-9][a-z0-9./_-]*:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$")
LOCK_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)(?: ; (.+?))? \\$")


def _instructions(path: Path) -> list[tuple[str, str]]:
    """A Dockerfile's (INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
    text = re.sub(r"\\\n", " ", "\n".join(lines))
    found = [line.strip().split(None, 1) for line in text.splitlines() if line.strip()]
    return [(words[0].upper(), words[1] if len(words) > 1 else "") for words in found]


def _base_images(path: Path) -> list[str]:
    """Each FROM's image with the ARG defaults substituted; a FROM naming an earlier stage is skipped."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    images: list[str] = []
    for instruction, rest in _instructions(path):
        if instruction == "ARG" and "=" in rest and not stages and not images:
            name, value = rest.split("=", 1)
            args[name.strip()] = value.strip().strip('"')
        elif instruction == "FROM":
            words = [w for w in rest.split() if not w.startswith("--platform")]
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m[1], m[0]), words[0])
            if words[0] not in stages:
                images.append(image)
            if len(words) == 3 and words[1].upper() == "AS":
                stages.add(words[2])
    return images


def _makefile_value(name: str) -> str:
    match = re.search(rf"^{name} \?= (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, f"Makefile: {name} ?= ... is missing"
    return match[1]


@pytest.mark.parametrize(
    ("image", "make_variable"),
    [
        ("operator", "PYTHON_BASE_IMAGE"),
        ("agent", "CUDA_BASE_IMAGE"),
        ("agent-rocm", "UBUNTU_BASE_IMAGE"),
        ("agent-neuron", "UBUNTU_BASE_IMAGE"),
        ("agent-tpu", "PYTHON_BASE_IMAGE"),
    ],
)
def test_base_images_are_pinned_by_digest(image: str, make_variable: str) -> None:
    """Every FROM resolves to image:tag@sha256:<64 hex>, through a BASE_IMAGE build argument whose
    default is the Makefile's value, which `make images` passes on."""
    path = DOCKERFILES[image]
    bases = _base_images(path)
    assert bases, path
    for base in bases:
        assert PINNED_IMAGE.match(base), f"{path}: FROM {base} is not pinned as image:tag@sha256:<digest>"
    assert set(bases) == {_makefile_value(make_variable)}, f"{path} and the Makefile's {make_variable} differ"
    assert f"-f {path.relative_to(ROOT)} --build-arg BASE_IMAGE=$({make_variable})" in (ROOT / "Makefile").read_text()


def test_base_image_check_refuses_a_tag_alone(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("ARG BASE_IMAGE=python:3.11-slim\nFROM ${BASE_IMAGE} AS build\nFROM build\nFROM debian:12\n")
    assert [bool(PINNED_IMAGE.match(b)) for b in _base_images(dockerfile)] == [False, False]


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_images_install_python_packages_only_from_hashed_locks(image: str) -> None:
    """Each `pip install` either takes a lock with --require-hashes, or installs accelpool's own wheel
    with --no-deps (nothing resolved, nothing fetched); the wheel is built without fetching a backend.
    The locks it names are in the build context (its .dockerignore lets them through)."""
    path = DOCKERFILES[image]
    runs = " ; ".join(rest for instruction, rest in _instructions(path) if instruction == "RUN")
    commands = [c.strip() for c in re.split(r"&&|;", runs) if re.search(r"\bpip (install|wheel)\b", c)]
    used_locks: set[str] = set()
    for command in commands:
        where = f"{path}: {command}"
        words = command.split()
        if " wheel " in f" {command} ":
            assert {"--no-build-isolation", "--no-deps"} <= set(words), where
        elif "--require-hashes" in words:
            locks = [words[i + 1] for i, w in enumerate(words) if w == "-r"]
            assert len(locks) == 1 and locks[0].endswith(".lock") and "--no-deps" in words, where
            used_locks.add(Path(locks[0]).name)
        else:
            assert "--no-deps" in words and words[-1] == "/wheels/*.whl", where
    assert used_locks == {IMAGE_LOCKS[image], "requirements-build.lock"}, path
    ignore = (path.parent / f"{path.name}.dockerignore").read_text().splitlines()
    for lock in used_locks:
        assert (ROOT / lock).is_file() and f"!{lock}" in ignore, lock


def _lock(name: str) -> dict[str, list[tuple[str, str | None]]]:
    """A lock file's pins: normalized name → [(version, environment marker)], each checked for hashes."""
    lines = (ROOT / name).read_text().splitlines()
    pins: dict[str, list[tuple[str, str | None]]] = {}
    for number, line in enumerate(lines):
        if not line or line.startswith((" ", "#")):
            continue
        entry = LOCK_ENTRY.match(line)
        assert entry, f"{name}:{number + 1}: not `name==version \\`: {line}"
        assert lines[number + 1].strip().startswith("--hash=sha256:"), f"{name}:{number + 1}: {line} has no hash"
        pins.setdefault(canonicalize_name(entry[1]), []).append((entry[2], entry[3]))
    return pins


def _declared(lock: str) -> list[Requirement]:
    """What `make lock` resolves for this lock (hack/requirements.py reads the pyproject.toml files)."""
    return [Requirement(r) for r in _lock_inputs(lock)]


def _lock_inputs(lock: str) -> list[str]:
    spec = importlib.util.spec_from_file_location("lock_requirements", ROOT / "hack" / "requirements.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: list[str] = module.requirements(lock)
    return found


@pytest.mark.parametrize("lock", ["dev", "operator", *AGENT_IMAGES])
def test_locks_pin_every_declared_dependency(lock: str) -> None:
    """Every dependency the pyproject.toml files declare (for that install) is pinned == with hashes, at
    a version its specifier accepts, for CPython 3.11 and 3.12; `make lock` rewrites them after a change."""
    name_of_lock = f"requirements-{lock}.lock"
    pins = _lock(name_of_lock)
    for requirement in _declared(lock):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name_of_lock}: {requirement} is not pinned: run `make lock`"
        for python in ("3.11", "3.12"):
            environment = {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux"}
            versions = [v for v, marker in pins[name] if marker is None or Marker(marker).evaluate(environment)]
            assert len(versions) == 1, f"{name_of_lock}: {name} for Python {python}: {versions}"
            assert requirement.specifier.contains(versions[0], prereleases=True), (
                f"{name_of_lock}: {name}=={versions[0]}"
            )


def test_the_agent_images_carry_no_kopf_and_the_operator_image_no_emulator() -> None:
    """The agents' locks (their images' only source of packages) hold no kopf; the operator's no kmock,
    no NVML and no NumPy: each image carries what its own code imports."""
    operator = _lock("requirements-operator.lock")
    for image in AGENT_IMAGES:
        agent = _lock(IMAGE_LOCKS[image])
        assert "kopf" not in agent and "kmock" not in agent, image
    assert not {"kmock", "nvidia-ml-py", "numpy", "cupy-cuda12x"} & set(operator)
    for image, path in DOCKERFILES.items():
        copied = [rest.split()[0] for instruction, rest in _instructions(path) if instruction == "COPY"]
        assert not any(c.startswith("demo") for c in copied), image
        other = "device-agent" if image == "operator" else "operator"
        assert not any(c.startswith(f"{other}/") for c in copied), (image, copied)


# ---- One agent image per vendor: its libraries, its backend, its make target, its name.

VENDOR_IMAGES = {"nvidia": "agent", "amd": "agent-rocm", "aws": "agent-neuron", "google": "agent-tpu"}
"""Catalog vendor → its agent image (the key of DOCKERFILES)."""
VENDOR_PACKAGES = {
    "agent": ({"nvidia-ml-py", "cupy-cuda12x", "ml-dtypes"}, {"amdsmi", "libtpu"}),
    "agent-rocm": ({"amdsmi", "cupy-rocm-7-0", "ml-dtypes"}, {"cupy-cuda12x", "libtpu"}),
    "agent-neuron": (set(), {"cupy-cuda12x", "cupy-rocm-7-0", "amdsmi", "libtpu", "tpu-info"}),
    "agent-tpu": ({"libtpu", "tpu-info"}, {"cupy-cuda12x", "cupy-rocm-7-0", "amdsmi"}),
}
"""Each agent image's lock: (what it must carry, what belongs to another vendor's image)."""
MAKE_TARGETS = {
    "agent": "images",
    "agent-rocm": "images-amd",
    "agent-neuron": "images-aws",
    "agent-tpu": "images-google",
}


def _final_env(path: Path) -> dict[str, str]:
    """The ENV of a Dockerfile's last stage (KEY=VALUE pairs)."""
    instructions = _instructions(path)
    last = max(i for i, (instruction, _) in enumerate(instructions) if instruction == "FROM")
    pairs = " ".join(rest for instruction, rest in instructions[last:] if instruction == "ENV").split()
    return dict(pair.split("=", 1) for pair in pairs if "=" in pair)


@pytest.mark.parametrize(("vendor", "image"), sorted(VENDOR_IMAGES.items()))
def test_each_vendors_agent_image_carries_its_libraries_and_runs_its_backend(vendor: str, image: str) -> None:
    """The lock holds the vendor's Python libraries and no other vendor's; the image defaults to the
    vendor's backend (what `accelpool-agent run` takes without --backend), and its build imports them."""
    path = DOCKERFILES[image]
    pins = set(_lock(IMAGE_LOCKS[image]))
    carried, foreign = VENDOR_PACKAGES[image]
    assert carried <= pins, f"{IMAGE_LOCKS[image]} lacks {sorted(carried - pins)}"
    assert not foreign & pins, f"{IMAGE_LOCKS[image]} carries another vendor's {sorted(foreign & pins)}"
    assert _final_env(path)["ACCELPOOL_AGENT_BACKEND"] == VENDOR_BACKENDS[vendor], path
    imports = " ".join(rest for instruction, rest in _instructions(path) if instruction == "RUN")
    for module in {"amdsmi": "amdsmi", "cupy-rocm-7-0": "cupy", "libtpu": "libtpu", "tpu-info": "tpu_info"}.items():
        if module[0] in carried:
            assert re.search(rf'python -c "import [^"]*\b{module[1]}\b', imports), f"{path} never imports {module[1]}"


@pytest.mark.parametrize(("vendor", "image"), sorted(VENDOR_IMAGES.items()))
def test_each_vendors_agent_image_has_a_make_target_under_the_name_the_operator_runs(vendor: str, image: str) -> None:
    """`make <target>` builds the Dockerfile, tagged with the repository the operator and the chart
    default to for that vendor (`accelpool.decide.agent_access`, values.yaml agent.images)."""
    makefile = (ROOT / "Makefile").read_text()
    target = MAKE_TARGETS[image]
    recipe = makefile.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0].replace("\\\n", " ")
    dockerfile = f"-f {DOCKERFILES[image].relative_to(ROOT)} "
    build = next((line for line in recipe.splitlines() if "docker build" in line and dockerfile in line), "")
    tag_variable = re.search(r"-t \$\((\w+)\)", build)
    assert tag_variable, f"make {target} does not build {dockerfile} with -t $(VARIABLE): {recipe}"
    built = _makefile_value(tag_variable[1]).rsplit(":", 1)[0].rsplit("/", 1)[1]
    operator_default = agent_access.DEFAULT_VENDOR_IMAGES.get(vendor, agent_access.DEFAULT_AGENT_IMAGE)
    assert operator_default.rsplit(":", 1)[0].rsplit("/", 1)[1] == built
    values = yaml.safe_load((CHART / "values.yaml").read_text())["agent"]
    chart = values["images"].get(vendor, values["image"])["repository"]
    assert chart.rsplit("/", 1)[1] == built


def test_vendor_system_packages_come_from_a_pinned_release() -> None:
    """What a vendor's apt repository gives is pinned: ROCm by the release in the repository's path,
    neuron-monitor by aws-neuronx-tools' version (one Neuron SDK release's)."""
    rocm = DOCKERFILES["agent-rocm"].read_text()
    assert re.search(r"^ARG ROCM_VERSION=\d+\.\d+\.\d+$", rocm, re.MULTILINE)
    assert "https://repo.radeon.com/rocm/apt/${ROCM_VERSION} noble main" in rocm
    neuron = DOCKERFILES["agent-neuron"].read_text()
    assert re.search(r"^ARG NEURON_TOOLS_VERSION=\d+\.\d+\.\d+\.\d+$", neuron, re.MULTILINE)
    assert '"aws-neuronx-tools=${NEURON_TOOLS_VERSION}*"' in neuron
    assert "PATH=/opt/accelpool/bin:/opt/aws/neuron/bin:" in neuron, "neuron-monitor must be on PATH"


def test_build_lock_pins_the_build_backend() -> None:
    pins = _lock("requirements-build.lock")
    for directory in ("core", "api", "operator", "device-agent", "demo", "sdk"):
        manifest = tomllib.loads((ROOT / directory / "pyproject.toml").read_text())
        for text in manifest["build-system"]["requires"]:
            requirement = Requirement(text)
            [(version, _)] = pins[canonicalize_name(requirement.name)]
            assert requirement.specifier.contains(version), f"requirements-build.lock: {requirement.name}=={version}"


def test_lock_check_refuses_an_unhashed_or_loose_pin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "loose.lock").write_text("kopf>=1.45 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    (tmp_path / "unhashed.lock").write_text("kopf==1.45.2 \\\n    # via accelpool\n")
    for name in ("loose.lock", "unhashed.lock"):
        with pytest.raises(AssertionError):
            _lock(name)


def test_make_install_takes_the_dev_lock_with_hashes() -> None:
    """CI (.ci/run → make lint/test → make install) gets exactly the locked versions; accelpool itself
    goes on top without resolving anything."""
    recipe = (ROOT / "Makefile").read_text().split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    assert "requirements-dev.lock" in recipe.splitlines()[0], "the venv must be rebuilt when the lock changes"
    assert "requirements-build.lock" in recipe.splitlines()[0], "the venv must be rebuilt when the lock changes"
    installs = [line.strip() for line in recipe.splitlines() if "pip install" in line]
    assert installs == [
        "$(BIN)/pip install -q --require-hashes -r requirements-dev.lock",
        "$(BIN)/pip install -q --require-hashes --no-deps -r requirements-build.lock",
        "$(BIN)/pip install -q --no-deps $(foreach p,$(PACKAGES),-e ./$(p))",
    ]
