"""A backend's vendor rules (`backends.VENDOR_RULES`) join the generic telemetry rules in the agent's report."""

from __future__ import annotations

import pytest

import accelpool_agent.backends as backends
from accelpool_agent.agent import Agent
from accelpool_agent.backends import vendor_checks
from accelpool_agent.backends.fake import FakeBackend, parse_fake_gpus
from accelpool_agent.clock import ManualClock
from accelpool_agent.compute.runner import InlineRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.model import Check
from accelpool_core.protocol import AgentConfig


async def test_a_backends_vendor_rules_replace_the_generic_result_of_the_same_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(backends.VENDOR_RULES, "fake", ("tests.unit.agent.vendor_rules_example", "example_checks"))
    accelerator, count = parse_fake_gpus("MI300X:2")
    agent = Agent(
        FakeBackend(accelerator, count), AgentConfig(), AgentSettings("n", "fake"), InlineRunner(), clock=ManualClock()
    )
    agent.open()
    report = await agent.full_cycle()
    ecc = {gpu.device.index: next(c for c in gpu.checks if c.check is Check.ECC) for gpu in report.gpus}
    assert (ecc[0].reason, ecc[1].reason) == ("NoUncorrectableErrors", "VendorEccUncorrectable")
    assert [c.check for c in report.gpus[1].checks].count(Check.ECC) == 1
    assert report.status.value == "Unhealthy"


def test_backends_without_vendor_rules_have_none() -> None:
    assert vendor_checks("nvml") is None and vendor_checks("fake") is None
