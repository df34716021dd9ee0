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
from tests.conformance.compare import differences
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
            if found is not None and step.request is not None:
                marks.append(pytest.mark.xfail(reason=found.reason, strict=True))
            params.append(pytest.param(step.id, id=step.id, marks=marks))
    return params


OBSERVED: dict[str, Callable[[str], list[str]]] = {}
"""Checks of observation steps' outcomes, by step id (the rest are skipped: measured, not answered)."""


@pytest.mark.parametrize("step_id", _steps())
def test_step_answers_as_the_real_api_server(step_id: str | None) -> None:
    transcripts.require()
    assert step_id is not None
    scenario = transcripts.scenario_of(step_id)
    step = scenario.steps[int(step_id.rsplit("/", 1)[1])]
    if step.request is None:
        check = OBSERVED.get(step_id)
        if check is None:
            pytest.skip(f"an observation (measured, not answered): {step.note}")
        found = check(step_id)
    else:
        outcome = outcomes(scenario.id)[step.index]
        assert outcome is not None
        found = differences(step, outcome)
    assert not found, f"{step_id} ({step.note}):\n" + "\n".join(found)


def test_every_known_difference_names_a_step_or_scenario() -> None:
    transcripts.require()
    ids = {s.id for s in transcripts.scenarios()} | {st.id for s in transcripts.scenarios() for st in s.steps}
    assert not set(KNOWN) - ids, "entries in known_differences.py name no step or scenario"
