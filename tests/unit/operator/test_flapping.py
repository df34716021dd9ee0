"""Flap damping: a GPU that fails again whenever it is released is quarantined a bounded number of times.

Each quarantine's hold-down is `holdDown` doubled for each of the node's quarantines in the 24 hours
before it, at most 32 times (`api.HealthSpec.damped_hold_down_seconds`); the planner is run pass after
pass on a fake clock (each pass's `now`), the node's condition flipping as the flapping GPU's agent
would write it, and every write applied before the next pass.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import pytest

import accelpool_api as api
from accelpool.decide import inputs
from accelpool.decide.planning import Plan
from accelpool.model.nodes import HealthCondition, NodeView, format_time
from accelpool.model.remediation_record import QuarantineHistory, history_of, record_of
from accelpool_api import conventions, validation

from .conftest import NOW, applied, member, pool, run

QUARANTINE = conventions.QUARANTINE_TAINT_KEY
HISTORY = conventions.QUARANTINE_HISTORY_ANNOTATION
HOLD_DOWN = 10.0
"""The floor `holdDown` may be set to (`api.MIN_HOLD_DOWN`): the fastest a node may come back."""
SPEC = {"accelerator": "H100", "nodes": 2, "health": {"holdDown": api.MIN_HOLD_DOWN}}


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def condition(healthy: bool, since: datetime) -> HealthCondition:
    if healthy:
        return HealthCondition("True", "AllChecksPassed", "8 GPUs passed all checks", since)
    return HealthCondition("False", "XidError79", "XID 79 (GPU fallen off the bus) on GPU 3", since)


def most_quarantines(window: float, hold_down: float = HOLD_DOWN) -> int:
    """The damping rule's bound on one node's quarantines within `window` seconds (under 24 hours, so every
    earlier quarantine counts): quarantine i+1 cannot begin before quarantine i, whose hold-down is
    holdDown x 2^min(i, 5), has passed, so the first L hold-downs must fit in the window."""
    assert window < api.parse_duration(api.FLAP_MEMORY)
    count, spent = 1, 0.0
    while spent + hold_down * 2 ** min(count - 1, api.FLAP_DOUBLINGS) <= window:
        spent += hold_down * 2 ** min(count - 1, api.FLAP_DOUBLINGS)
        count += 1
    return count


@dataclass
class Flapper:
    """One pool of two nodes, m1 flapping; `healthy(now, quarantined)` is what m1's agent reports at a pass."""

    healthy: Callable[[float, bool], bool]
    spec: dict[str, object] | None = None

    def run(self, seconds: float, step: float = 1.0) -> tuple[list[float], list[Plan]]:
        """Passes every `step` seconds for `seconds`: when each quarantine of m1 began, and every pass's plan."""
        pools = [pool("p", self.spec or SPEC)]
        nodes: list[NodeView] = [member("m1", "p", health=_healthy_since(NOW)), member("m2", "p")]
        reported, since = True, NOW
        began: list[float] = []
        plans: list[Plan] = []
        elapsed = 0.0
        while elapsed < seconds:
            now = at(elapsed)
            m1 = nodes[0]
            wanted = self.healthy(elapsed, m1.quarantined)
            if wanted != reported:
                reported, since = wanted, now
            nodes[0] = replace(m1, health=condition(reported, since))
            result = run(pools, nodes, now=now)
            plans.append(result)
            if any(r.node == "m1" and r.action == "taint" for r in result.remediations):
                began.append(elapsed)
            nodes = applied(nodes, result)
            elapsed += step
        return began, plans


def _healthy_since(moment: datetime) -> tuple[str, str, str, str]:
    return ("True", "AllChecksPassed", "", format_time(moment))


def fails_when_released(_: float, quarantined: bool) -> bool:
    """The worst flapper: it recovers at once and fails again on the first pass after its release."""
    return quarantined


def test_the_issue_a_gpu_that_fails_whenever_it_is_released_is_quarantined_at_most_4_times_in_74_seconds() -> None:
    """The issue: `holdDown: 0s` let a flapping GPU make 30 quarantine transitions in 74 s. At the floor (10 s)
    without damping it would still make one every 12 s; damped, the hold-downs are 10, 20, 40 s."""
    began, _ = Flapper(fails_when_released).run(74)
    assert most_quarantines(74) == 4
    assert len(began) <= 4, began
    assert began == [0, 12, 34, 76][: len(began)], "each release waits out twice the hold-down before"


def test_over_an_hour_the_hold_downs_double_to_32_times_hold_down_and_stay_there() -> None:
    began, plans = Flapper(fails_when_released).run(3600, step=2)
    bound = most_quarantines(3600)
    assert bound == 16
    assert len(began) <= bound, began
    # Between two quarantines the node was healthy for at least that quarantine's hold-down.
    gaps = [b - a for a, b in itertools.pairwise(began)]
    for i, gap in enumerate(gaps):
        assert gap >= HOLD_DOWN * 2 ** min(i, api.FLAP_DOUBLINGS), (i, gaps)
    assert len(began) >= bound - 2, f"a flapper this eager comes close to the bound: {began}"
    # The Events say why the node is held so long.
    quarantined = [e.message for p in plans for e in p.events if e.reason == "NodeQuarantined" and e.kind == "Node"]
    assert quarantined[1].endswith(
        "; quarantined 1 time in the 24h before: released once healthy for 20s, "
        "holdDown 10s doubled for each (at most 32x, 168h)"
    ), quarantined[1]
    assert "quarantined 7 times in the 24h before: released once healthy for 5m20s" in quarantined[7]
    lifted = [e.message for p in plans for e in p.events if e.reason == "QuarantineLifted" and e.kind == "Node"]
    assert "quarantine lifted (quarantined for XidError79, quarantined)" in lifted[0]
    assert "hold-down" not in lifted[0], "a first quarantine's hold-down is holdDown, said nowhere"
    assert lifted[2].endswith(
        "; its hold-down was 40s: quarantined 2 times in the 24h before it, "
        "holdDown 10s doubled for each (at most 32x, 168h)"
    ), lifted[2]


@pytest.mark.parametrize(
    ("bad", "good", "step"),
    [(1, 1, 1), (1, 11, 1), (5, 30, 1), (3, 12, 2), (30, 30, 7)],
    ids=lambda v: str(v),
)
def test_any_square_wave_of_failures_stays_within_the_bound(bad: float, good: float, step: float) -> None:
    """A GPU unhealthy for `bad` seconds and healthy for `good`, over and over, whatever the passes' spacing:
    never more quarantines in 20 minutes than the damping rule allows."""

    def square_wave(elapsed: float, _: bool) -> bool:
        return elapsed % (bad + good) >= bad

    began, _ = Flapper(square_wave).run(1200, step=step)
    assert 1 <= len(began) <= most_quarantines(1200), began


def test_a_node_that_stays_healthy_for_a_day_is_forgotten() -> None:
    """The history outlives the quarantine, is pruned of quarantines older than 24 hours on any pass that
    sees it, and goes when none is left: the next quarantine's hold-down is holdDown again."""
    began, plans = Flapper(fails_when_released).run(80)
    assert len(began) == 4
    history = json.loads(_written(plans, "m1", HISTORY))
    assert history == {"quarantines": [format_time(at(s)) for s in began]}
    flapped = _view_after(plans)
    record = record_of(flapped)
    assert record is not None and record.earlier == 3
    assert json.loads(flapped.annotations[conventions.REMEDIATION_ANNOTATION])["earlier"] == 3

    # Healthy from then on: lifted a day later, the quarantines older than 24 hours dropped.
    day = api.parse_duration(api.FLAP_MEMORY)
    healthy = replace(flapped, health=condition(True, at(began[-1] + 1)))
    released = run([pool("p", SPEC)], [healthy, member("m2", "p")], now=at(began[-1] + day - 1))
    change = released.changes["m1"]
    assert [t.key for t in change.remove_taints] == [QUARANTINE]
    assert change.annotations[HISTORY] == json.dumps(
        {"quarantines": [format_time(at(began[-1]))]}, separators=(",", ":")
    ), "the last quarantine is 24 hours old only a second later"
    later = applied([healthy], released)[0]
    forgotten = run([pool("p", SPEC)], [later, member("m2", "p")], now=at(began[-1] + day))
    assert forgotten.changes["m1"].annotations[HISTORY] is None
    idle = run([pool("p", SPEC)], [applied([later], forgotten)[0], member("m2", "p")], now=at(began[-1] + day + 1))
    assert HISTORY not in idle.changes["m1"].annotations, "nothing left to write"


def test_leaving_the_pool_takes_the_history_off() -> None:
    history = QuarantineHistory((NOW,)).to_annotation()
    assert history is not None
    node = member("m1", "p", annotations={HISTORY: history}, health=_healthy_since(NOW))
    released = run([pool("p", {"accelerator": "H100"}, deleting=True)], [node], now=at(60))
    assert released.changes["m1"].annotations[HISTORY] is None


def test_a_hand_written_history_of_10000_quarantines_is_kept_short_and_says_how_many_it_left_out() -> None:
    times = [format_time(at(-i)) for i in range(10_000)]
    huge = json.dumps({"quarantines": times})
    assert len(huge) > 200_000
    node = member("m1", "p", annotations={HISTORY: huge}, health=_healthy_since(NOW))
    result = run([pool("p", SPEC)], [node, member("m2", "p")], now=NOW)
    text = result.changes["m1"].annotations[HISTORY]
    assert text is not None and len(text) < 512
    written = json.loads(text)
    assert written["omitted"] == 10_000 - conventions.MAX_QUARANTINE_HISTORY
    assert written["quarantines"] == sorted(times)[-conventions.MAX_QUARANTINE_HISTORY :]
    assert history_of(applied([node], result)[0]).recent(NOW) == conventions.MAX_QUARANTINE_HISTORY


@pytest.mark.parametrize(
    "text",
    ["", "[]", "{}", '{"quarantines": 3}', '{"quarantines": ["x", 1, null]}', "{" * 100_000, '{"omitted": true}'],
)
def test_a_history_that_is_not_one_is_an_empty_one(text: str) -> None:
    assert QuarantineHistory.from_annotation(text) == QuarantineHistory()


def test_the_record_carries_no_earlier_quarantines_when_there_were_none() -> None:
    began, plans = Flapper(fails_when_released).run(2)
    assert began == [0]
    assert "earlier" not in json.loads(_written(plans, "m1", conventions.REMEDIATION_ANNOTATION))


def _written(plans: list[Plan], node: str, annotation: str) -> str:
    """The last text the plans wrote into `annotation` on `node`."""
    texts = [
        p.changes[node].annotations[annotation]
        for p in plans
        if node in p.changes and annotation in p.changes[node].annotations
    ]
    text = texts[-1] if texts else None
    assert text is not None, f"{annotation} never written"
    return text


def _view_after(plans: list[Plan]) -> NodeView:
    """m1 as the last plan left it (each change applied in turn)."""
    view = member("m1", "p", health=_healthy_since(NOW))
    for p in plans:
        if "m1" in p.changes:
            view = view.apply(p.changes["m1"])
    return view


def test_the_planner_asks_to_plan_again_when_the_damped_hold_down_ends() -> None:
    """A quarantine after two others in the day holds for 4 x holdDown: the requeue timer waits for that."""
    record = {"step": "quarantined", "cause": "XidError79", "action": "none", "since": format_time(NOW), "earlier": 2}
    node = member(
        "m1",
        "p",
        taints=[{"key": QUARANTINE, "value": "XidError79", "effect": "NoSchedule"}],
        annotations={conventions.REMEDIATION_ANNOTATION: json.dumps(record)},
        health=_healthy_since(at(60)),
    )
    spec = {"accelerator": "H100", "health": {"holdDown": "10m"}}
    waiting = run([pool("p", spec)], [node], now=at(60 + 600))
    assert waiting.requeue_after == 3 * 600, "40m in all, 10m of them passed"
    assert not waiting.changes["m1"].remove_taints
    lifted = run([pool("p", spec)], [node], now=at(60 + 2400))
    assert [t.key for t in lifted.changes["m1"].remove_taints] == [QUARANTINE]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(600, "10m"), (4800, "1h20m"), (320, "5m20s"), (12.5, "12.5s"), (0, "0s"), (604800, "168h"), (0.25, "0.25s")],
)
def test_hold_downs_are_written_as_the_spec_writes_durations(seconds: float, text: str) -> None:
    assert api.format_duration(seconds) == text
    assert api.parse_duration(text) == seconds


@pytest.mark.parametrize("stored", ["0s", "9s999ms", "200ms"])
def test_a_pool_stored_below_the_floor_is_planned_at_the_floor_not_set_aside(stored: str) -> None:
    """Admitted before the floor existed (the API server keeps it on updates: validation ratcheting): its
    quarantines must still be lifted, so the operator reads the floor instead of calling the pool invalid."""
    spec_raw = {"accelerator": "H100", "health": {"holdDown": stored}}
    assert validation.validate_spec(spec_raw)[1], "a new pool with it is refused"
    assert inputs.hold_down_below_floor(spec_raw) == stored
    spec, problems = inputs.validate(spec_raw)
    assert problems == () and spec is not None
    assert spec.health.hold_down_seconds == api.parse_duration(api.MIN_HOLD_DOWN)


@pytest.mark.parametrize("stored", ["10s", "1m", "bogus", 5])
def test_other_hold_downs_are_read_as_stored(stored: object) -> None:
    spec_raw = {"accelerator": "H100", "health": {"holdDown": stored}}
    assert inputs.hold_down_below_floor(spec_raw) is None
    spec, problems = validation.validate_spec(spec_raw)
    assert inputs.validate(spec_raw) == (spec, tuple(str(p) for p in problems))
