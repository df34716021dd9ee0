"""The XID table (NVIDIA's XID catalog) and the rule that applies it: one test per class.

Every XID that DESIGN.md or the shared reference lists as fatal must be fatal here, XID 109 follows
NVIDIA's catalog (RESET_GPU) over the reference note, application XIDs warn and fail only when they
repeat, and an XID missing from the catalog warns with a reason naming its number.
"""

from __future__ import annotations

import pytest

from accelpool_agent import rules, xids
from accelpool_agent.model import CheckStatus

HOUR = 3600.0


def judge(*xid_times: tuple[int, float], now: float = 1000.0, limit: int = 10) -> tuple[CheckStatus, str, str]:
    record = rules.XidRecord()
    for xid, at in xid_times:
        record = record.add(xid, at)
    result = rules.xid_rule(record, now, HOUR, limit)
    return result.status, result.reason, result.message


@pytest.mark.parametrize("xid", [48, 64, 74, 79, 95, 119, 120, 140])
def test_every_xid_the_design_and_reference_call_fatal_is_fatal(xid: int) -> None:
    assert xids.classify(xid) is xids.XidClass.FATAL
    status, reason, message = judge((xid, 0.0), now=100 * HOUR)  # sticky: long after the event
    assert (status, reason) == (CheckStatus.FAIL, f"XidError{xid}")
    assert "NVIDIA:" in message


@pytest.mark.parametrize("xid", [46, 62, 109, 110, 136, 143, 144, 150, 151, 155, 156, 158, 160, 162])
def test_xids_whose_catalog_action_is_a_reset_or_reboot_are_fatal(xid: int) -> None:
    assert xids.action(xid) in {"RESET_GPU", "RESTART_BM", "RESTART_VM", "WORKFLOW_NVLINK5_ERR"}
    assert judge((xid, 900.0))[:2] == (CheckStatus.FAIL, f"XidError{xid}")


def test_no_xid_with_a_reset_or_reboot_action_slips_below_fatal() -> None:
    severe = {"RESET_GPU", "RESTART_BM", "RESTART_VM", "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR", "WORKFLOW_NVLINK5_ERR"}
    assert {x for x, (_, action) in xids.CATALOG.items() if action in severe} == xids.FATAL
    assert set(xids.CATALOG) == set(range(1, 163))  # the whole catalog, no gaps


@pytest.mark.parametrize("xid", [63, 92, 94, 154])
def test_warning_xids_warn_for_the_window_then_pass(xid: int) -> None:
    assert xids.classify(xid) is xids.XidClass.WARNING
    assert judge((xid, 900.0))[:2] == (CheckStatus.WARN, f"XidError{xid}")
    assert judge((xid, 900.0), now=900.0 + HOUR + 1)[:2] == (CheckStatus.PASS, "NoRecentXidErrors")


@pytest.mark.parametrize("xid", [13, 31, 68, 8, 39])
def test_application_xids_warn(xid: int) -> None:
    assert xids.classify(xid) is xids.XidClass.APPLICATION
    status, reason, message = judge((xid, 900.0))
    assert (status, reason) == (CheckStatus.WARN, f"XidError{xid}")
    assert "restart the application" in message


def test_an_application_xid_repeating_past_the_limit_fails_and_then_clears() -> None:
    storm = [(13, 100.0 + i) for i in range(10)]
    status, reason, message = judge(*storm, now=200.0)
    assert (status, reason) == (CheckStatus.FAIL, "XidError13")
    assert "10 times" in message
    assert judge(*storm[:9], now=200.0)[0] is CheckStatus.WARN  # one below the limit
    assert judge(*storm, now=200.0 + HOUR)[0] is CheckStatus.PASS  # not sticky: it rolls out of the window


@pytest.mark.parametrize("xid", [43, 45, 14, 121])
def test_informational_xids_pass_with_a_note(xid: int) -> None:
    assert xids.classify(xid) is xids.XidClass.INFORMATIONAL
    status, reason, message = judge((xid, 900.0))
    assert (status, reason) == (CheckStatus.PASS, "InformationalXid")
    assert str(xid) in message


@pytest.mark.parametrize("xid", [1, 61, 90, 78])
def test_unexpected_xids_warn_and_say_what_nvidia_advises(xid: int) -> None:
    assert xids.classify(xid) is xids.XidClass.UNEXPECTED
    status, reason, message = judge((xid, 900.0))
    assert (status, reason) == (CheckStatus.WARN, f"XidError{xid}")
    assert "contact support" in message


def test_an_unknown_xid_warns_with_a_reason_naming_its_number() -> None:
    assert xids.classify(99999) is xids.XidClass.UNKNOWN
    status, reason, message = judge((99999, 900.0))
    assert (status, reason) == (CheckStatus.WARN, "XidError99999")
    assert "XID 99999 (not in NVIDIA's XID catalog)" in message and "severity unknown" in message


def test_a_fatal_xid_outranks_everything_else() -> None:
    status, reason, _ = judge((13, 900.0), (99999, 950.0), (79, 10.0))
    assert (status, reason) == (CheckStatus.FAIL, "XidError79")
