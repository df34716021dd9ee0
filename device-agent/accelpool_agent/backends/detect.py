"""Which backend fits this host: `accelpool-agent check` without `--backend`, and the SDK's `instance()`, ask
`detect_backend`.

The candidates are the registered backends that have a `Detector` (`nvml`, `amdsmi`, `neuron`, `tpu`), in
the registry's order (`backends.BACKENDS`): the first whose detector finds evidence on the host wins, so an
NVIDIA node with some vendor's tool installed is still `nvml`; `cpu` when none does. What each detector
looks for is in `backends.probes`; `detect_backend` is pure over its `Probes`, so tests run it on fake /dev
and /sys trees, and `host_probes` gives the real ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelpool_agent.backends import registrations
from accelpool_agent.backends.probes import Probes, host_probes

__all__ = ["FALLBACK", "Detection", "Probes", "detect_backend", "host_probes"]

FALLBACK = "cpu"
"""The backend of a host where no detector finds anything: the host CPU."""


@dataclass(frozen=True)
class Detection:
    backend: str
    evidence: str
    """What matched, e.g. `/dev/kfd exists`; for `cpu`, that nothing did."""


def detect_backend(probes: Probes) -> Detection:
    """The backend for the first vendor whose devices or tools the probes find; `cpu` when none."""
    detectors = [(r.name, r.detector) for r in registrations() if r.detector is not None]
    for backend, detector in detectors:
        evidence = detector.evidence(probes)
        if evidence is not None:
            return Detection(backend, evidence)
    *others, last = [detector.devices for _, detector in detectors]
    return Detection(FALLBACK, f"no {', '.join(others)} or {last} device or tool found")
