"""Which check request the next full cycle answers (`accelpool_agent.check_requests`)."""

from __future__ import annotations

import pytest

from accelpool_agent.check_requests import CheckRequests, problem
from accelpool_core.protocol import MAX_CHECK_REQUEST_LENGTH


def test_a_new_token_waits_for_the_next_cycle_which_answers_it() -> None:
    requests = CheckRequests().seen("2026-01-01T00:00:00Z-ab12")
    assert requests.wanted and requests.pending == "2026-01-01T00:00:00Z-ab12"
    running = requests.starting()
    assert (running.running, running.wanted) == ("2026-01-01T00:00:00Z-ab12", False)
    assert running.finished() == CheckRequests(answered="2026-01-01T00:00:00Z-ab12")


def test_a_token_seen_while_a_cycle_runs_is_answered_by_the_next_one() -> None:
    running = CheckRequests().seen("a").starting().seen("b")
    assert (running.running, running.pending) == ("a", "b")
    done = running.finished()
    assert (done.answered, done.pending, done.wanted) == ("a", "b", True)
    assert done.starting().finished() == CheckRequests(answered="b")


def test_seeing_a_token_again_changes_nothing() -> None:
    for requests in (
        CheckRequests(answered="a"),
        CheckRequests(pending="a"),
        CheckRequests(running="a"),
    ):
        assert requests.seen("a") is requests
    assert CheckRequests().seen(None) == CheckRequests().seen("") == CheckRequests()


def test_a_cycle_without_a_token_keeps_the_last_answer() -> None:
    assert CheckRequests(answered="a").starting().finished() == CheckRequests(answered="a")


def test_a_failed_cycle_leaves_its_token_waiting_unless_a_newer_one_does() -> None:
    assert CheckRequests().seen("a").starting().failed() == CheckRequests(pending="a")
    assert CheckRequests().seen("a").starting().seen("b").failed() == CheckRequests(pending="b")


def test_restoring_the_answer_found_on_the_node_drops_it_from_the_waiting() -> None:
    """The watch may see the node before the daemon has read the previous agent's annotation."""
    assert CheckRequests(pending="a").restored("a") == CheckRequests(answered="a")
    assert CheckRequests(pending="b").restored("a") == CheckRequests(answered="a", pending="b")


@pytest.mark.parametrize("token", ["x" * (MAX_CHECK_REQUEST_LENGTH + 1), "y" * 200])
def test_a_token_too_long_is_ignored_with_its_reason(token: str) -> None:
    assert CheckRequests().seen(token) == CheckRequests()
    why = problem(token)
    assert why is not None
    assert "accelpool.io/check-requested" in why and repr(token) in why and "1 to 63 characters" in why


def test_the_longest_token_is_a_request() -> None:
    token = "z" * MAX_CHECK_REQUEST_LENGTH
    assert problem(token) is None and CheckRequests().seen(token).pending == token
    assert problem(None) is None and problem("") is None
