"""The transcripts recorded from a real kube-apiserver (v1.36.2), read in place from
`../shared/fidelity/kubernetes` beside the repository (its README.md describes the format, the
normalization and what varies between runs). Nothing of them is copied into the repository.

A transcript file holds scenarios; a scenario holds steps, each a request and the response the real
server gave (`Step.response`), or an `observation` (something measured, such as how long the garbage
collector took). A step is named `FILE/SCENARIO/NN` (`nodes-patch/node-json-patch/07`): its test id.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.environment import missing

ROOT = Path(__file__).resolve().parents[2]
DIRECTORY = ROOT.parent / "shared" / "fidelity" / "kubernetes"
"""Where the transcripts are kept beside the repository (`../shared/fidelity/kubernetes`)."""
FILES = (
    "nodes-patch",
    "list-watch-events",
    "crd-admission-and-apply",
    "ownerrefs-gc-eviction",
    "dra",
)


@dataclass(frozen=True)
class Step:
    file: str
    scenario: str
    index: int
    raw: Mapping[str, Any]

    @property
    def id(self) -> str:
        return f"{self.file}/{self.scenario}/{self.index:02d}"

    @property
    def note(self) -> str:
        return str(self.raw.get("note", ""))

    @property
    def request(self) -> Mapping[str, Any] | None:
        found: Mapping[str, Any] | None = self.raw.get("request")
        return found

    @property
    def response(self) -> Mapping[str, Any]:
        found: Mapping[str, Any] = self.raw.get("response") or {}
        return found

    @property
    def observation(self) -> Mapping[str, Any] | None:
        found: Mapping[str, Any] | None = self.raw.get("observation")
        return found

    @property
    def is_watch(self) -> bool:
        return self.request is not None and (self.request.get("query") or {}).get("watch") == "true"


@dataclass(frozen=True)
class Scenario:
    file: str
    name: str
    description: str
    steps: tuple[Step, ...]
    crds: tuple[Mapping[str, Any], ...]
    """The test CRDs (`crds:` of the file that has them), which a scenario's objects may need stored first."""

    @property
    def id(self) -> str:
        return f"{self.file}/{self.name}"


def available() -> bool:
    return DIRECTORY.is_dir() and all((DIRECTORY / f"{name}.yaml").is_file() for name in FILES)


def require() -> None:
    """Skip when the transcripts are not beside the repository; fail instead under REQUIRE_TOOLS=1 (CI)."""
    if available():
        return
    missing(
        f"the kube-apiserver transcripts are not in {DIRECTORY} (../shared/fidelity/kubernetes beside the repository)"
    )


@functools.cache
def load(file: str) -> tuple[Scenario, ...]:
    loaded = _read(file)
    crds = tuple(c for name in FILES for c in _read(name).get("crds") or ())
    return tuple(
        Scenario(
            file,
            scenario["name"],
            scenario.get("description", ""),
            tuple(Step(file, scenario["name"], index, step) for index, step in enumerate(scenario["steps"])),
            crds,
        )
        for scenario in loaded["scenarios"]
    )


@functools.cache
def _read(file: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DIRECTORY / f"{file}.yaml").read_text())
    return loaded


def scenarios() -> Iterator[Scenario]:
    for file in FILES:
        yield from load(file)


def scenario_of(some_id: str) -> Scenario:
    """The scenario of a step id, or of a scenario id."""
    file, name = some_id.split("/")[:2]
    (found,) = [s for s in load(file) if s.name == name]
    return found
