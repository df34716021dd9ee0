"""Fixtures for the device agent's unit tests: fake-backend agents with a manual clock.

Compute checks run in-process (`InlineRunner`) here, so a cycle takes milliseconds; the tests
of process isolation (`test_isolation.py`) use the real `ProcessRunner`. The fake backend runs on
the agent's clock, so its error counters grow only when a test advances it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from accelpool_agent.agent import Agent
from accelpool_agent.backends.fake import FakeBackend, parse_fake_gpus
from accelpool_agent.clock import Clock, ManualClock
from accelpool_agent.compute.runner import InlineRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.faults import faults_by_gpu, parse_fault_spec
from accelpool_core.protocol import AgentConfig

MakeAgent = Callable[..., Agent]


def make_fake_agent(
    gpus: str = "H100:8",
    faults: Sequence[str] = (),
    *,
    config: AgentConfig | None = None,
    clock: Clock | None = None,
    seed: int = 0,
    node: str = "gpu-a1",
) -> Agent:
    accelerator, count = parse_fake_gpus(gpus)
    injected = faults_by_gpu([parse_fault_spec(f) for f in faults], count)
    clock = clock or ManualClock()
    backend = FakeBackend(accelerator, count, faults=injected, seed=seed, clock=clock.time)
    agent = Agent(
        backend,
        config or AgentConfig(pool="llm-training", check_timeout_seconds=5),
        AgentSettings(node_name=node, backend="fake", seed=seed),
        InlineRunner(),
        clock=clock,
    )
    agent.open()
    return agent


@pytest.fixture
def make_agent() -> MakeAgent:
    return make_fake_agent
