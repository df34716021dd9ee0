"""The emulated API server (accelpool_demo.apiserver) held against transcripts recorded from a real
kube-apiserver v1.36.2 (`../shared/fidelity/kubernetes`: transcripts.py): each step of each scenario is a
test, replayed in order on a fresh server per scenario (replay.py) and compared with the recorded answer
on its status code, Content-Type, Warning headers and normalized body (compare.py). A step that differs
for a reason acceptable for the demo is listed in known_differences.py and expected to fail (strictly:
one that starts to match fails until its entry is removed). Observation steps (timings, what a
controller did) are compared only where a check of their outcome is written here (`OBSERVED`).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conformance import transcripts
from tests.conformance.compare import Outcome, differences
from tests.conformance.known_differences import KNOWN, known
from tests.conformance.replay import outcomes

pytestmark = pytest.mark.conformance


def _steps() -> list[object]:
    if not transcripts.available():
        return [pytest.param(None, id="transcripts")]
    params: list[object] = []
    for scenario in transcripts.scenarios():
        for step in scenario.steps:
            marks = []
            found = known(step.id)
            if found is not None and (step.request is not None or step.id in OBSERVED):
                marks.append(pytest.mark.xfail(reason=found.reason, strict=True))
            params.append(pytest.param(step.id, id=step.id, marks=marks))
    return params


def gone(*objects: str) -> Callable[[Outcome], list[str]]:
    """The check that these objects (`resource|namespace|name`) are no longer stored."""
    return lambda outcome: [f"{o} is still stored" for o in objects if o in (outcome.observed or ())]


def stored(*objects: str) -> Callable[[Outcome], list[str]]:
    return lambda outcome: [f"{o} is not stored" for o in objects if o not in (outcome.observed or ())]


GADGETS = "fidelity.example.com/v1/gadgets|None"
CONFIGMAPS = "v1/configmaps|fidg"
OBSERVED: dict[str, Callable[[Outcome], list[str]]] = {
    "ownerrefs-gc-eviction/ownerreferences-gc/12": gone(f"{CONFIGMAPS}|d-bg"),
    "ownerrefs-gc-eviction/ownerreferences-gc/16": gone(f"{GADGETS}|gc-fg", f"{CONFIGMAPS}|d-fg"),
    "ownerrefs-gc-eviction/ownerreferences-gc/18": gone(f"{GADGETS}|gc-or"),
    "ownerrefs-gc-eviction/ownerreferences-gc/21": gone(f"{CONFIGMAPS}|d-ghost"),
    "ownerrefs-gc-eviction/pod-eviction-pdb/09": stored(*(f"v1/pods|fidg|p{i}" for i in (1, 2, 3))),
}
"""Checks of observation steps' outcomes (what happened, not when), by step id; the others are skipped:
measured, not answered (timings, a scheduler's or kubelet's doings)."""


@pytest.mark.parametrize("step_id", _steps())
def test_step_answers_as_the_real_api_server(step_id: str | None) -> None:
    transcripts.require()
    assert step_id is not None
    scenario = transcripts.scenario_of(step_id)
    step = scenario.steps[int(step_id.rsplit("/", 1)[1])]
    outcome = outcomes(scenario.id)[step.index]
    if step.request is None:
        check = OBSERVED.get(step_id)
        if check is None:
            pytest.skip(f"an observation (measured, not answered): {step.note}")
        found = check(outcome)
    else:
        found = differences(step, outcome)
    assert not found, f"{step_id} ({step.note}):\n" + "\n".join(found)


def test_every_known_difference_names_a_step_or_scenario() -> None:
    transcripts.require()
    ids = {s.id for s in transcripts.scenarios()} | {st.id for s in transcripts.scenarios() for st in s.steps}
    assert not set(KNOWN) - ids, "entries in known_differences.py name no step or scenario"
