"""Retrying a failed MIG config: NVIDIA's MIG manager does not retry by itself.

The MIG manager reacts only when `nvidia.com/mig.config` changes value (and ignores its
removal). A config it could not find yet, because the kubelet projects ConfigMap updates into
its pod up to a minute later, would stay `failed` for good; a run that reported `success` but
created nothing (a MIG manager that was broken, then repaired) would never run again. So a member
whose state is `failed` for the pool's config, or `success` while it does not serve the layout,
is given a record (`accelpool.io/mig-retry: <retries>@<time>`), and after
a backoff (`mig_retry_delay`) its label is taken off and put back on the next pass, which the
MIG manager sees as a change. At most `conventions.MIG_RETRIES` times; a success clears the
record. Called by `accelpool.decide.planning.changes` for each member of a pool that sets a MIG config.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from accelpool.decide.planning.model import EventIntent
from accelpool.model.nodes import NodeView, format_time, parse_time
from accelpool_api import conventions


def mig_retry_delay(retries: int) -> float:
    """Seconds before retry `retries + 1` of a failed MIG config: 60 s (a ConfigMap sync), doubling, at most 10 min."""
    return float(min(conventions.MIG_RETRY_MAX_SECONDS, conventions.MIG_RETRY_FIRST_SECONDS * 2**retries))


def parse_mig_retry(text: str | None) -> tuple[int, datetime | None]:
    """`3@2026-11-02T12:00:00Z` → (3, that time); anything else → (0, None)."""
    count, _, at = (text or "").partition("@")
    moment = parse_time(at)
    plain = count.isascii() and count.isdigit() and len(count) <= 6
    return (int(count), moment) if plain and moment is not None else (0, None)


def format_mig_retry(retries: int, moment: datetime) -> str:
    return f"{retries}@{format_time(moment)}"


class MigRetryStep(NamedTuple):
    """What this pass does about one member's MIG config (a named tuple: one per MIG member and pass)."""

    label: str | None
    """The `nvidia.com/mig.config` value for this pass: the wanted config, or None to take it off once."""
    record: str | None = None
    """The new `accelpool.io/mig-retry` value (None: remove it); only when `rewrite_record`."""
    rewrite_record: bool = False
    event: EventIntent | None = None
    requeue_after: float | None = None
    """Seconds until the backoff of a failed config runs out."""


def next_step(view: NodeView, wanted: str, now: datetime, *, unserved: bool = False) -> MigRetryStep:
    """The step for a member that should be in the MIG config `wanted`.

    `unserved`: the member does not serve the layout (`accelpool.model.nvidia.serving_difference`, or GFD's
    `-MIG-INVALID`). With the MIG manager's `success`, that is a run that created nothing (a broken
    MIG manager, a GPU that was busy): retried like a failure once it has lasted a backoff, since the
    MIG manager will not run again until the label changes. A record of an earlier config is dropped
    when the label moves to another one (an edited pool): its retries start afresh.
    """
    record = view.annotations.get(conventions.MIG_RETRY_ANNOTATION)
    state = view.labels.get(conventions.MIG_CONFIG_STATE_LABEL)
    label = view.labels.get(conventions.MIG_CONFIG_LABEL)
    empty = state == "success" and unserved
    failed = (state == "failed" or empty) and label == wanted
    if record is None and not failed:
        return MigRetryStep(wanted)
    if record is not None and label is not None and label != wanted:
        return MigRetryStep(wanted, rewrite_record=True)  # another config now: its retries start afresh
    retries, since = parse_mig_retry(record)
    if not failed:
        cleared = since is not None and state == "success"
        return MigRetryStep(wanted, rewrite_record=cleared)
    if since is None:
        return MigRetryStep(
            wanted, record=format_mig_retry(0, now), rewrite_record=True, requeue_after=mig_retry_delay(0)
        )
    if retries >= conventions.MIG_RETRIES:
        return MigRetryStep(wanted)
    waited = (now - since).total_seconds()
    delay = mig_retry_delay(retries)
    if waited < delay:
        return MigRetryStep(wanted, requeue_after=delay - waited)
    seen = (
        f"{conventions.MIG_CONFIG_STATE_LABEL}=success for {wanted}, but the node does not serve its layout"
        if empty
        else f"{conventions.MIG_CONFIG_STATE_LABEL}=failed for {wanted}"
    )
    event = EventIntent(
        "Node",
        view.name,
        view.uid,
        "Warning",
        "MigConfigRetried",
        f"{seen}: setting {conventions.MIG_CONFIG_LABEL} again "
        f"(retry {retries + 1} of {conventions.MIG_RETRIES}); the MIG manager does not retry by itself",
    )
    return MigRetryStep(None, record=format_mig_retry(retries + 1, now), rewrite_record=True, event=event)
