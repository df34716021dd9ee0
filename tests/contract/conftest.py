"""Fixtures of the chart's contract tests: the real helm, and the chart rendered with default and
full-featured values (once per module)."""

from __future__ import annotations

import pytest

from tests.contract.chart import (
    FULL_VALUES,
    Objects,
    render,
)
from tests.support.environment import require_tool


@pytest.fixture(scope="module")
def helm() -> str:
    return require_tool("helm")


@pytest.fixture(scope="module")
def default_objects(helm: str) -> Objects:
    return render(helm, include_crds=True)


@pytest.fixture(scope="module")
def full_objects(helm: str) -> Objects:
    return render(helm, [FULL_VALUES], include_crds=True)


@pytest.fixture(params=["default", "full"])
def rendered(request: pytest.FixtureRequest, default_objects: Objects, full_objects: Objects) -> Objects:
    return default_objects if request.param == "default" else full_objects
