#!/usr/bin/env python3
"""The chart of a release, pinned to its images: `make release` runs this once every image is an OCI archive.

    python hack/release.py --chart charts/accelpool --images dist/images --output dist \
        [--registry registry.example.com/platform] [--helm .tools/bin/helm]

Reads each image's digest from its OCI image-layout archive (`<name>.oci.tar`, what `docker buildx build
--output type=oci,dest=...` writes, or an unpacked layout directory `<name>/`): the one entry of its
`index.json` (an image index for a multi-platform build, else a manifest), checked against the blob it
names. Writes the digests into a copy of the chart's values.yaml (`image.digest`, `agent.image.digest`,
`agent.images.<vendor>.digest`; with --registry, each repository under that registry too), editing only
those lines so every comment stays, and packages the copy with `helm package` into --output. The chart
then runs `<repository>@<digest>` (templates/_helpers.tpl "accelpool.imageRef"): exactly the images built,
once they are pushed unchanged (`skopeo copy --all oci-archive:...`, `crane push`).

Prints the packaged chart's path and one line per pinned image; exits 1 with a message naming the archive
or value at fault. tests/contract/test_release.py runs it on synthetic OCI layouts and renders the result.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
INDEX_MEDIA_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)


@dataclass(frozen=True)
class Image:
    """One image of a release: its archive's name and where the chart's values name it."""

    name: str
    block: tuple[str, ...]
    """The values block with `repository` and `digest`."""
    required: bool


IMAGES = (
    Image("accelpool-operator", ("image",), True),
    Image("accelpool-agent", ("agent", "image"), True),
    Image("accelpool-agent-rocm", ("agent", "images", "amd"), False),
    Image("accelpool-agent-neuron", ("agent", "images", "aws"), False),
    Image("accelpool-agent-tpu", ("agent", "images", "google"), False),
)


class ReleaseError(Exception):
    """What is wrong, naming the archive, file or value."""


# ---------------------------------------------------------------- digests from OCI layouts


def _read_layout(source: Path, member: str) -> bytes | None:
    """A file of an OCI layout, from a tar archive or a directory; None when absent."""
    if source.is_dir():
        path = source / member
        return path.read_bytes() if path.is_file() else None
    with tarfile.open(source) as archive:
        for info in archive.getmembers():
            if info.name.removeprefix("./") == member and info.isfile():
                found = archive.extractfile(info)
                return found.read() if found is not None else None
    return None


def digest_of(source: Path) -> str:
    """The digest an OCI image layout's index.json names: its one entry, whose blob must be in the layout
    and hash to it."""
    raw = _read_layout(source, "index.json")
    if raw is None:
        raise ReleaseError(f"{source}: no index.json: not an OCI image layout (docker buildx --output type=oci)")
    try:
        index: Any = json.loads(raw)
    except ValueError as error:
        raise ReleaseError(f"{source}: index.json is not JSON: {error}") from None
    if not isinstance(index, dict) or index.get("schemaVersion") != 2:
        raise ReleaseError(f"{source}: index.json: schemaVersion must be 2, is {index.get('schemaVersion')!r}")
    manifests = index.get("manifests")
    if not isinstance(manifests, list) or len(manifests) != 1:
        count = len(manifests) if isinstance(manifests, list) else 0
        raise ReleaseError(
            f"{source}: index.json lists {count} manifests; a release archive holds one image (its index for "
            "several platforms)"
        )
    entry = manifests[0]
    digest, media_type = entry.get("digest"), entry.get("mediaType")
    if not isinstance(digest, str) or not DIGEST.match(digest):
        raise ReleaseError(f"{source}: index.json: manifests[0].digest {digest!r} is not sha256:<64 hex>")
    if media_type not in INDEX_MEDIA_TYPES:
        raise ReleaseError(
            f"{source}: index.json: manifests[0].mediaType {media_type!r} is not an image index or manifest"
        )
    blob = _read_layout(source, f"blobs/sha256/{digest.removeprefix('sha256:')}")
    if blob is None:
        raise ReleaseError(f"{source}: index.json names {digest}, which is not in blobs/sha256/")
    if "sha256:" + hashlib.sha256(blob).hexdigest() != digest:
        raise ReleaseError(f"{source}: blobs/sha256/{digest.removeprefix('sha256:')} does not hash to its name")
    return digest


def find_archives(images: Path) -> dict[str, Path]:
    """The release's archives in a directory: `<name>.oci.tar` or a layout directory `<name>/`, by image name."""
    if not images.is_dir():
        raise ReleaseError(f"--images: {images} is not a directory")
    known = {image.name for image in IMAGES}
    found: dict[str, Path] = {}
    for path in sorted(images.iterdir()):
        name = path.name.removesuffix(".oci.tar") if path.is_file() else path.name
        if path.is_file() and not path.name.endswith(".oci.tar"):
            continue
        if name not in known:
            raise ReleaseError(f"--images: {path.name} is no image of the chart; expected {', '.join(sorted(known))}")
        found[name] = path
    missing = [image.name for image in IMAGES if image.required and image.name not in found]
    if missing:
        raise ReleaseError(f"--images: {images} has no archive of {', '.join(missing)} (<name>.oci.tar)")
    return found


# ---------------------------------------------------------------- values.yaml, line by line

_KEY = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z0-9_.-]+):(?P<rest>.*)$")


def _paths(lines: Sequence[str]) -> list[tuple[tuple[str, ...], int] | None]:
    """Each line's key path and indentation (None for comments, blanks and list items)."""
    stack: list[tuple[int, str]] = []
    found: list[tuple[tuple[str, ...], int] | None] = []
    for line in lines:
        match = _KEY.match(line)
        if match is None or line.lstrip().startswith(("#", "-")):
            found.append(None)
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        found.append((tuple(key for _, key in stack), indent))
    return found


def set_values(text: str, assignments: Mapping[tuple[str, ...], str]) -> str:
    """values.yaml with each scalar at a key path set (quoted), in place, or added first in its block; every
    other line, comments included, kept as it was."""
    lines = text.split("\n")
    for path, value in assignments.items():
        rendered = json.dumps(value)
        paths = _paths(lines)
        at = next((i for i, p in enumerate(paths) if p is not None and p[0] == path), None)
        if at is not None:
            match = _KEY.match(lines[at])
            assert match is not None
            lines[at] = f"{match['indent']}{match['key']}: {rendered}"
            continue
        parent = next((i for i, p in enumerate(paths) if p is not None and p[0] == path[:-1]), None)
        if parent is None:
            raise ReleaseError(f"values.yaml has no {'.'.join(path[:-1])} block to set {path[-1]} in")
        child = next(
            (p[1] for p in paths[parent + 1 :] if p is not None and p[0][:-1] == path[:-1]),
            paths[parent][1] + 2,  # type: ignore[index]
        )
        lines.insert(parent + 1, f"{' ' * child}{path[-1]}: {rendered}")
    edited = "\n".join(lines)
    parsed = yaml.safe_load(edited)
    for path, value in assignments.items():
        node: Any = parsed
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node != value:
            raise ReleaseError(f"values.yaml: {'.'.join(path)} reads {node!r} after the edit, not {value!r}")
    return edited


def assignments(digests: Mapping[str, str], registry: str | None) -> dict[tuple[str, ...], str]:
    """The values a release sets: each archived image's digest (and repository under --registry)."""
    found: dict[tuple[str, ...], str] = {}
    for image in IMAGES:
        if image.name not in digests:
            continue
        if registry:
            found[(*image.block, "repository")] = f"{registry.rstrip('/')}/{image.name}"
        found[(*image.block, "digest")] = digests[image.name]
    return found


# ---------------------------------------------------------------- the package


def package(chart: Path, values: str, output: Path, helm: str) -> Path:
    """`helm package` of a copy of the chart with these values; the .tgz it wrote."""
    output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / chart.name
        shutil.copytree(chart, copy)
        (copy / "values.yaml").write_text(values)
        done = subprocess.run(
            [helm, "package", str(copy), "--destination", str(output)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    if done.returncode != 0:
        raise ReleaseError(f"helm package failed: {done.stderr.strip() or done.stdout.strip()}")
    match = re.search(r"saved it to: (\S+\.tgz)", done.stdout)
    if match is None:
        raise ReleaseError(f"helm package said nothing of the file it wrote: {done.stdout.strip()}")
    return Path(match.group(1))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chart", type=Path, required=True, help="the chart directory (charts/accelpool)")
    parser.add_argument("--images", type=Path, required=True, help="the directory of <name>.oci.tar archives")
    parser.add_argument("--output", type=Path, required=True, help="where the packaged chart goes")
    parser.add_argument("--registry", help="set every repository to <registry>/<image name> too")
    parser.add_argument("--helm", default="helm", help="the helm binary (default: helm on PATH)")
    args = parser.parse_args(argv)
    try:
        archives = find_archives(args.images)
        digests = {name: digest_of(path) for name, path in archives.items()}
        values = set_values((args.chart / "values.yaml").read_text(), assignments(digests, args.registry))
        packaged = package(args.chart, values, args.output, args.helm)
    except (ReleaseError, OSError, tarfile.TarError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(packaged)
    for image in IMAGES:
        if image.name in digests:
            print(f"  {'.'.join(image.block)}: {image.name}@{digests[image.name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
