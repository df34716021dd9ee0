"""Retrying a failed MIG config on its own (`accelpool.decide.planning.mig_retry`)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from accelpool.decide.planning import format_mig_retry, mig_retry_delay, parse_mig_retry
from accelpool.decide.planning.mig_retry import MigRetryStep, next_step
from accelpool.model.nodes import NodeView
from accelpool_api import conventions

from .conftest import NOW, member

WANTED = "accelpool-p"


def mig_node(state: str | None, record: str | None = None, config: str = WANTED) -> NodeView:
    labels = {conventions.MIG_CONFIG_LABEL: config}
    if state is not None:
        labels[conventions.MIG_CONFIG_STATE_LABEL] = state
    annotations = {conventions.MIG_RETRY_ANNOTATION: record} if record is not None else {}
    return member("m1", "p", "A100-40GB", labels=labels, annotations=annotations)


def test_the_backoff_doubles_from_a_minute_up_to_ten() -> None:
    assert [mig_retry_delay(n) for n in range(6)] == [60.0, 120.0, 240.0, 480.0, 600.0, 600.0]


def test_records_round_trip_and_garbage_reads_as_none() -> None:
    assert parse_mig_retry(format_mig_retry(3, NOW)) == (3, NOW)
    assert parse_mig_retry("x@2026-11-02T12:00:00Z") == (0, None)
    assert parse_mig_retry(None) == (0, None)


def test_nothing_to_do_while_the_config_has_not_failed() -> None:
    assert next_step(mig_node("pending"), WANTED, NOW) == MigRetryStep(WANTED)
    assert next_step(mig_node("failed", config="other"), WANTED, NOW) == MigRetryStep(WANTED)


def test_a_success_clears_the_record() -> None:
    step = next_step(mig_node("success", format_mig_retry(2, NOW)), WANTED, NOW)
    assert step == MigRetryStep(WANTED, record=None, rewrite_record=True)


def test_a_first_failure_is_recorded_and_checked_again_after_the_first_delay() -> None:
    step = next_step(mig_node("failed"), WANTED, NOW)
    assert step == MigRetryStep(WANTED, record="0@2026-11-02T12:00:00Z", rewrite_record=True, requeue_after=60.0)


def test_within_the_backoff_the_label_stays_and_the_pass_comes_back_when_it_ends() -> None:
    record = format_mig_retry(1, NOW - timedelta(seconds=100))
    assert next_step(mig_node("failed", record), WANTED, NOW) == MigRetryStep(WANTED, requeue_after=20.0)


def test_after_the_backoff_the_label_comes_off_once_with_a_warning() -> None:
    record = format_mig_retry(1, NOW - timedelta(seconds=200))
    step = next_step(mig_node("failed", record), WANTED, NOW)
    assert (step.label, step.record, step.rewrite_record) == (None, "2@2026-11-02T12:00:00Z", True)
    assert step.event is not None and step.event.reason == "MigConfigRetried"
    assert "(retry 2 of 5)" in step.event.message


@pytest.mark.parametrize("retries", [conventions.MIG_RETRIES, conventions.MIG_RETRIES + 1])
def test_it_gives_up_after_the_last_retry(retries: int) -> None:
    record = format_mig_retry(retries, NOW - timedelta(hours=1))
    assert next_step(mig_node("failed", record), WANTED, NOW) == MigRetryStep(WANTED)
