"""The e2e tier's settings, checked on any machine (these tests need no cluster and are not `e2e`)."""

from __future__ import annotations

from tests.e2e.conftest import missing_images


def test_unset_images_are_named_with_how_to_get_them() -> None:
    why = missing_images({"AGENT_IMAGE": "ghcr.io/accelpool/accelpool-agent:dev"})
    assert why is not None and "OPERATOR_IMAGE not set" in why and "make e2e" in why
    assert "OPERATOR_IMAGE and AGENT_IMAGE" in (missing_images({}) or "")


def test_named_images_are_enough() -> None:
    assert missing_images({"OPERATOR_IMAGE": "op:dev", "AGENT_IMAGE": "agent:dev"}) is None
