"""`make release`'s chart, with the real helm: hack/release.py reads each image's digest from an OCI image
layout (built here, blob by blob, as `docker buildx --output type=oci` writes one: no Docker needed), writes
it into the packaged chart's values, and the packaged chart then runs every image by that digest. Also the
Makefile: `make images` tags the chart's appVersion, and `make release` without a Docker engine says so."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.contract.chart import CHART, NAMESPACE, RELEASE, Objects, find, one, run_helm

pytestmark = pytest.mark.contract

ROOT = CHART.parents[1]
SCRIPT = ROOT / "hack" / "release.py"
APP_VERSION = str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])
INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
NAMES = (
    "accelpool-operator",
    "accelpool-agent",
    "accelpool-agent-rocm",
    "accelpool-agent-neuron",
    "accelpool-agent-tpu",
)


def oci_layout(root: Path, name: str, platforms: tuple[str, ...] = ("amd64", "arm64")) -> str:
    """An OCI image layout (image-spec image-layout.md) of a multi-platform image: a manifest per platform
    (config, one layer), their image index, and index.json naming that index. Returns the index's digest."""
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes, media_type: str) -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    manifests = []
    for arch in platforms:
        layer = put(f"{name} {arch} layer".encode(), "application/vnd.oci.image.layer.v1.tar+gzip")
        config = put(
            json.dumps({"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode(),
            "application/vnd.oci.image.config.v1+json",
        )
        manifest = {"schemaVersion": 2, "mediaType": MANIFEST, "config": config, "layers": [layer]}
        entry = put(json.dumps(manifest).encode(), MANIFEST)
        manifests.append({**entry, "platform": {"architecture": arch, "os": "linux"}})
    index = put(json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": manifests}).encode(), INDEX)
    (root / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    tagged = {**index, "annotations": {"org.opencontainers.image.ref.name": APP_VERSION}}
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": [tagged]}))
    return str(index["digest"])


def archive(layout: Path, dest: Path) -> Path:
    """The layout as one tar archive (what `--output type=oci,dest=<file>` writes)."""
    with tarfile.open(dest, "w") as tar:
        for path in sorted(layout.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(layout)), recursive=False)
    return dest


def release(helm: str, images: Path, output: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(SCRIPT), "--chart", str(CHART), "--images", str(images), "--output", str(output)]
    return subprocess.run([*command, "--helm", helm, *extra], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Every image of a release as `<name>.oci.tar` in one directory, and their digests."""
    images = tmp_path / "images"
    images.mkdir()
    digests = {}
    for name in NAMES:
        digests[name] = oci_layout(tmp_path / "layouts" / name, name)
        archive(tmp_path / "layouts" / name, images / f"{name}.oci.tar")
    return images, digests


def template(helm: str, packaged: Path) -> Objects:
    text = run_helm(helm, "template", RELEASE, str(packaged), "--namespace", NAMESPACE)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def operator_args(objects: Objects) -> dict[str, str]:
    container = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return dict(arg.removeprefix("--").split("=", 1) for arg in container["args"] if "=" in arg)


def test_the_packaged_chart_runs_every_image_by_its_digest(
    helm: str, built: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    images, digests = built
    done = release(helm, images, tmp_path / "dist")
    assert done.returncode == 0, done.stderr
    packaged = tmp_path / "dist" / f"accelpool-{APP_VERSION}.tgz"
    assert done.stdout.splitlines()[0] == str(packaged)
    assert f"  image: accelpool-operator@{digests['accelpool-operator']}" in done.stdout

    objects = template(helm, packaged)
    operator = f"ghcr.io/accelpool/accelpool-operator@{digests['accelpool-operator']}"
    pods = [o["spec"]["template"]["spec"] for o in find(objects, "Deployment") + find(objects, "Job")]
    pods += [o["spec"] for o in find(objects, "Pod")]
    assert sorted(c["image"] for pod in pods for c in pod["containers"]) == [operator] * 3
    args = operator_args(objects)
    assert args["agent-image"] == f"ghcr.io/accelpool/accelpool-agent@{digests['accelpool-agent']}"
    assert args["agent-images"].split(",") == [
        f"amd=ghcr.io/accelpool/accelpool-agent-rocm@{digests['accelpool-agent-rocm']}",
        f"aws=ghcr.io/accelpool/accelpool-agent-neuron@{digests['accelpool-agent-neuron']}",
        f"google=ghcr.io/accelpool/accelpool-agent-tpu@{digests['accelpool-agent-tpu']}",
    ]


def test_only_the_digest_lines_of_values_change(helm: str, built: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    images, digests = built
    assert release(helm, images, tmp_path / "dist").returncode == 0
    with tarfile.open(tmp_path / "dist" / f"accelpool-{APP_VERSION}.tgz") as packaged:
        member = packaged.extractfile("accelpool/values.yaml")
        assert member is not None
        values = member.read().decode()
    source = (CHART / "values.yaml").read_text().splitlines()
    changed = [line for line in values.splitlines() if line not in source]
    assert sorted(changed) == sorted(
        [
            f'  digest: "{digests["accelpool-operator"]}"',
            f'    digest: "{digests["accelpool-agent"]}"',
            f'      digest: "{digests["accelpool-agent-rocm"]}"',
            f'      digest: "{digests["accelpool-agent-neuron"]}"',
            f'      digest: "{digests["accelpool-agent-tpu"]}"',
        ]
    )
    assert len(values.splitlines()) == len(source) + 3, "a line added per vendor image, every comment kept"


def test_a_private_registry_and_layout_directories(helm: str, tmp_path: Path) -> None:
    """--registry moves every repository; unpacked layouts work too; vendors not built keep their tag."""
    images = tmp_path / "images"
    digests = {name: oci_layout(images / name, name, ("amd64",)) for name in NAMES[:2]}
    done = release(helm, images, tmp_path / "dist", "--registry", "registry.example.com/platform/")
    assert done.returncode == 0, done.stderr
    objects = template(helm, tmp_path / "dist" / f"accelpool-{APP_VERSION}.tgz")
    deployment = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert deployment["image"] == f"registry.example.com/platform/accelpool-operator@{digests['accelpool-operator']}"
    args = operator_args(objects)
    assert args["agent-image"] == f"registry.example.com/platform/accelpool-agent@{digests['accelpool-agent']}"
    assert f"amd=ghcr.io/accelpool/accelpool-agent-rocm:{APP_VERSION}" in args["agent-images"]


def _edit_index(layout: Path, change: dict[str, Any]) -> None:
    index = json.loads((layout / "index.json").read_text())
    index.update(change)
    (layout / "index.json").write_text(json.dumps(index))


@pytest.mark.parametrize(
    ("spoil", "says"),
    [
        ("two-manifests", "index.json lists 2 manifests; a release archive holds one image"),
        ("tampered-blob", "does not hash to its name"),
        ("no-operator", "has no archive of accelpool-operator (<name>.oci.tar)"),
        ("stranger", "stranger.oci.tar is no image of the chart"),
        ("not-a-layout", "no index.json: not an OCI image layout"),
    ],
)
def test_a_bad_archive_is_named_and_nothing_is_packaged(helm: str, tmp_path: Path, spoil: str, says: str) -> None:
    images = tmp_path / "images"
    for name in NAMES[:2]:
        oci_layout(images / name, name)
    operator = images / "accelpool-operator"
    if spoil == "two-manifests":
        index = json.loads((operator / "index.json").read_text())
        _edit_index(operator, {"manifests": index["manifests"] * 2})
    elif spoil == "tampered-blob":
        digest = json.loads((operator / "index.json").read_text())["manifests"][0]["digest"]
        (operator / "blobs" / "sha256" / digest.removeprefix("sha256:")).write_bytes(b"{}")
    elif spoil == "no-operator":
        archive(operator, tmp_path / "elsewhere.tar")
        for path in sorted(operator.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        operator.rmdir()
    elif spoil == "stranger":
        archive(operator, images / "stranger.oci.tar")
    elif spoil == "not-a-layout":
        (operator / "index.json").unlink()
    done = release(helm, images, tmp_path / "dist")
    assert done.returncode == 1 and says in done.stderr, done.stderr
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").iterdir())


# ---- The Makefile.


def _make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env=env,
    )


def test_make_images_tags_the_charts_app_version() -> None:
    done = _make("-n", "images", "IMAGE_REGISTRY=registry.example.com/platform")
    assert done.returncode == 0, done.stderr
    tags = [word for line in done.stdout.splitlines() for word in line.split() if word.startswith("registry.example")]
    assert tags == [
        f"registry.example.com/platform/accelpool-operator:{APP_VERSION}",
        f"registry.example.com/platform/accelpool-agent:{APP_VERSION}",
    ]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["tag"] == values["agent"]["image"]["tag"] == "", "the chart's default tag is appVersion"


def test_make_release_without_docker_says_so(tmp_path: Path) -> None:
    """Whatever this machine has: a `docker` whose `docker info` fails, first on PATH."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "docker").write_text("#!/bin/sh\nexit 1\n")
    (fake / "docker").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    done = _make("release", f"RELEASE_DIR={tmp_path / 'dist'}", env=env)
    assert done.returncode != 0
    assert "make release: no Docker engine answers ('docker info' failed)" in done.stderr
    assert not (tmp_path / "dist").exists(), "nothing is built or packaged"
