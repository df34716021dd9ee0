"""Leadership: the controller pauses with peering until kopf runs this replica, and priorities rank by age."""

from __future__ import annotations

import tomllib
from collections.abc import AsyncIterator
from importlib import metadata
from pathlib import Path

import kopf
import pytest

from accelpool.runtime import leadership
from accelpool.runtime.controller import Controller
from accelpool.runtime.metrics import OperatorMetrics
from accelpool.runtime.settings import OperatorConfig
from accelpool_core.credentials import Credentials
from accelpool_core.kube import KubeClient


@pytest.fixture
async def controller() -> AsyncIterator[Controller]:
    """The real controller; nothing here starts a pass, so its client never connects."""
    client = KubeClient(Credentials(server="http://127.0.0.1:9"))
    instance = Controller(OperatorConfig(), client, OperatorMetrics())
    yield instance
    await client.close()


def settings(*, standalone: bool | None = None, peering: str | None = None) -> kopf.OperatorSettings:
    """kopf's settings as `kopf.operator(standalone=..., peering_name=...)` sets them."""
    result = kopf.OperatorSettings()
    if peering is not None:
        result.peering.mandatory, result.peering.name = True, peering
    if standalone is not None:
        result.peering.standalone = standalone
    return result


async def test_standalone_the_instance_is_active_from_the_start(controller: Controller) -> None:
    memo = kopf.Memo()
    found = leadership.follow_kopf(settings(standalone=True), memo, controller, lifetime=60)
    assert found is None and controller.active
    assert "leadership" not in memo


async def test_kopf_auto_detection_leaves_the_instance_active(controller: Controller) -> None:
    found = leadership.follow_kopf(settings(), kopf.Memo(), controller, lifetime=60)
    assert found is None and controller.active


async def test_with_peering_the_instance_waits_for_kopf(controller: Controller) -> None:
    memo, kopf_settings, registry = (
        kopf.Memo(),
        settings(standalone=False, peering="accelpool"),
        kopf.OperatorRegistry(),
    )
    found = leadership.follow_kopf(kopf_settings, memo, controller, lifetime=15, registry=registry)
    assert found is memo.leadership and found.peering == "accelpool"
    assert not controller.active and not found.leading
    assert kopf_settings.peering.lifetime == 15


async def test_the_instance_runs_exactly_while_a_daemon_runs(controller: Controller) -> None:
    """kopf never runs two instances of one daemon on an object, but a peering object deleted and
    created again has a new daemon starting while the old one stops: leading holds until both end."""
    leader = leadership.Leadership(controller, "accelpool")
    controller.pause()
    leader.gained()
    assert leader.leading and controller.active
    leader.gained()
    leader.lost()
    assert leader.leading and controller.active
    leader.lost()
    assert not leader.leading and not controller.active


async def test_the_daemon_is_registered_once_and_without_a_finalizer(controller: Controller) -> None:
    """A finalizer on the shared peering object would keep it from being deleted while no operator runs."""
    registry = kopf.OperatorRegistry()
    for _ in range(2):
        leadership.follow_kopf(settings(peering="accelpool"), kopf.Memo(), controller, lifetime=60, registry=registry)
    (daemon,) = registry._spawning.get_all_handlers()
    assert daemon.id == leadership.DAEMON_ID and daemon.fn is leadership.lead
    assert daemon.requires_finalizer is False
    assert daemon.selector is not None and daemon.selector.plural == "clusterkopfpeerings"
    assert daemon.selector.group == "kopf.dev"


def test_the_installed_kopf_is_the_release_leadership_was_verified_with() -> None:
    """`_register` uses kopf's private registry: a kopf upgrade must fail here before it fails in a cluster."""
    installed = metadata.version("kopf")
    assert installed.startswith(f"{leadership.KOPF_VERIFIED}."), installed
    project = tomllib.loads((Path(__file__).parents[3] / "operator" / "pyproject.toml").read_text())["project"]
    minor = tuple(int(part) for part in leadership.KOPF_VERIFIED.split("."))
    assert f"kopf>={leadership.KOPF_VERIFIED},<{minor[0]}.{minor[1] + 1}" in project["dependencies"]


async def test_a_kopf_without_the_private_registry_stops_startup_with_a_clear_error(
    controller: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = kopf.OperatorRegistry()
    monkeypatch.delattr(registry, "_spawning")
    with pytest.raises(RuntimeError, match=r"kopf .* has no OperatorRegistry._spawning .* verified with kopf 1\.45"):
        leadership.follow_kopf(settings(peering="accelpool"), kopf.Memo(), controller, lifetime=60, registry=registry)


def test_the_longest_running_replica_has_the_highest_priority() -> None:
    first, second = 1_795_000_000_000_000_000, 1_795_000_000_000_001_000  # one microsecond apart
    assert leadership.priority_by_age(first) > leadership.priority_by_age(second)


def test_priorities_stay_below_kopf_freeze() -> None:
    """`kopf freeze` claims priority 100 by default: it must pause every replica."""
    assert leadership.priority_by_age(1) < 100
    assert leadership.priority_by_age(1_795_000_000_000_000_000) < 100
