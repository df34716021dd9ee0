#!/usr/bin/env python3
"""The third-party requirements of one lock file, read from the repository's pyproject.toml files.

    python hack/requirements.py dev|operator|agent|agent-rocm|agent-neuron|agent-tpu|build \
        | uv pip compile - -o requirements-X.lock

accelpool's own distributions (accelpool-core, accelpool-api, accelpool, accelpool-agent, accelpool-demo,
accelpool-sdk) are left out: they are installed from the source tree, not from an index. `make lock` calls this.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OWN = {"accelpool-core", "accelpool-api", "accelpool", "accelpool-agent", "accelpool-demo", "accelpool-sdk"}
# Which distributions (directory, extras) each lock installs.
LOCKS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "operator": [("core", ()), ("api", ()), ("operator", ())],
    "agent": [("core", ()), ("device-agent", ("cuda",))],
    "agent-rocm": [("core", ()), ("device-agent", ("rocm",))],
    "agent-neuron": [("core", ()), ("device-agent", ())],
    "agent-tpu": [("core", ()), ("device-agent", ("tpu",))],
    "dev": [("core", ()), ("api", ()), ("operator", ()), ("device-agent", ()), ("demo", ()), ("sdk", ())],
}


def _name(requirement: str) -> str:
    for stop in "<>=!~[; ":
        requirement = requirement.split(stop, 1)[0]
    return requirement.strip().lower()


def requirements(lock: str) -> list[str]:
    if lock == "build":
        manifest = tomllib.loads((ROOT / "core" / "pyproject.toml").read_text())
        return list(manifest["build-system"]["requires"])
    found: list[str] = []
    for directory, extras in LOCKS[lock]:
        project = tomllib.loads((ROOT / directory / "pyproject.toml").read_text())["project"]
        found += project.get("dependencies", [])
        for extra in extras:
            found += project["optional-dependencies"][extra]
    if lock == "dev":
        found += tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]["dev"]
    return sorted({r for r in found if _name(r) not in OWN}, key=_name)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in {*LOCKS, "build"}:
        print(f"usage: {argv[0]} {'|'.join([*LOCKS, 'build'])}", file=sys.stderr)
        return 2
    print("\n".join(requirements(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
