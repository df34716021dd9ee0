"""The webhook port is open to any pod: whatever it receives costs the operator bounded work, off its event loop.

- validation runs in a worker thread while the loop goes on serving other coroutines and requests;
- a request that finds every worker busy is answered 429 at once, not queued;
- a review with 100k unknown fields gets an answer of bounded size that says how many problems it cut;
- a body over `MAX_REVIEW_BYTES` is refused 413, naming the limit, with or without a Content-Length.

Synchronised with events, never with timings: the timeouts below only keep a broken build from hanging.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from accelpool.admission import review
from accelpool.runtime import webhook

HANG_GUARD_SECONDS = 60.0
UNKNOWN_FIELDS = 100_000


def review_document(spec: dict[str, Any], uid: str = "u-1") -> dict[str, Any]:
    return {
        "apiVersion": review.API_VERSION,
        "kind": review.KIND,
        "request": {
            "uid": uid,
            "operation": "CREATE",
            "name": "p",
            "object": {
                "apiVersion": "accelpool.io/v1alpha1",
                "kind": "ComputePool",
                "metadata": {"name": "p"},
                "spec": spec,
            },
        },
    }


def hostile_spec() -> dict[str, Any]:
    spec: dict[str, Any] = {"accelerator": "H100:8"}
    spec.update({f"x{i}": i for i in range(UNKNOWN_FIELDS)})
    return spec


class BlockingReview:
    """`review.review` that waits in its worker thread until released, and notes calls on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.entered = asyncio.Event()
        self.release = threading.Event()
        self.on_loop = 0
        self.threads: list[str] = []
        self._review = review.review

    def __call__(self, document: Any) -> dict[str, Any]:
        self.threads.append(threading.current_thread().name)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.loop.call_soon_threadsafe(self.entered.set)
            self.release.wait(HANG_GUARD_SECONDS)
        else:
            self.on_loop += 1  # waiting here would block the loop for good: note it and go on
            self.entered.set()
        return self._review(document)


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(webhook.application(webhook.Reviewer(workers=1, waiting=0)))) as running:
        yield running


class CountingReviewer(webhook.Reviewer):
    """Says when a request reached it (it takes its place before it first waits)."""

    def __init__(self, workers: int, waiting: int) -> None:
        super().__init__(workers, waiting)
        self.called: asyncio.Queue[None] = asyncio.Queue()

    async def __call__(self, body: bytes) -> webhook.Answer | None:
        self.called.put_nowait(None)
        return await super().__call__(body)


async def test_a_review_waits_for_a_worker_in_the_queue_and_past_it_gets_429(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hostile clients sending one review after another must not get the API server's call refused: it waits
    its turn (each review's work is bounded); only a full queue answers 429."""
    fake = BlockingReview(asyncio.get_running_loop())
    monkeypatch.setattr(review, "review", fake)
    reviewer = CountingReviewer(workers=1, waiting=1)
    async with TestClient(TestServer(webhook.application(reviewer))) as running:
        try:
            first = asyncio.create_task(running.post(webhook.PATH, json=review_document({"accelerator": "H100:8"})))
            await asyncio.wait_for(fake.entered.wait(), HANG_GUARD_SECONDS)
            queued = asyncio.create_task(
                running.post(webhook.PATH, json=review_document({"accelerator": "H100:8"}, uid="u-2"))
            )
            await asyncio.wait_for(reviewer.called.get(), HANG_GUARD_SECONDS)
            await asyncio.wait_for(reviewer.called.get(), HANG_GUARD_SECONDS)  # the second has its place in the queue
            assert reviewer.admitted == 2
            full = await running.post(webhook.PATH, json=review_document({"accelerator": "H100:8"}, uid="u-3"))
            assert full.status == 429 and not queued.done()
        finally:
            fake.release.set()
        answers = [await asyncio.wait_for(task, HANG_GUARD_SECONDS) for task in (first, queued)]
        assert [a.status for a in answers] == [200, 200]
        assert (await answers[1].json())["response"] == {"uid": "u-2", "allowed": True}
    assert reviewer.admitted == 0


def test_a_hostile_review_is_examined_only_as_far_as_its_answer_lists() -> None:
    """100,000 unknown fields: the first ones are described, the rest only counted, in the answer's words."""
    verdict = review.check(review_document(hostile_spec())["request"])
    assert verdict is not None and verdict.stage == "decode"
    assert len(verdict.problems) <= 3 * review.MAX_PROBLEMS < UNKNOWN_FIELDS
    assert verdict.total == UNKNOWN_FIELDS


async def test_validation_runs_off_the_loop_which_keeps_serving(
    client: TestClient[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = BlockingReview(asyncio.get_running_loop())
    monkeypatch.setattr(review, "review", fake)
    try:
        large = asyncio.create_task(client.post(webhook.PATH, json=review_document({"accelerator": "H100:8", "x": 1})))
        await asyncio.wait_for(fake.entered.wait(), HANG_GUARD_SECONDS)
        assert fake.on_loop == 0, "the review was validated on the event loop"
        assert all(name.startswith("accelpool-webhook") for name in fake.threads), fake.threads

        # While the review is held in its thread, the loop runs another coroutine ...
        other = asyncio.Event()
        asyncio.get_running_loop().call_soon(other.set)
        await asyncio.wait_for(other.wait(), HANG_GUARD_SECONDS)
        # ... and answers another request: the only worker is busy, so at once, 429.
        busy = await asyncio.wait_for(
            client.post(webhook.PATH, json=review_document({"accelerator": "H100:8"}, uid="u-2")),
            HANG_GUARD_SECONDS,
        )
        assert busy.status == 429
        assert busy.headers["Retry-After"] == str(webhook.RETRY_AFTER_SECONDS)
        assert not large.done()
    finally:
        fake.release.set()
    answer = await asyncio.wait_for(large, HANG_GUARD_SECONDS)
    assert answer.status == 200
    assert (await answer.json())["response"]["allowed"] is False
    # the worker is free again
    again = await client.post(webhook.PATH, json=review_document({"accelerator": "H100:8"}, uid="u-3"))
    assert (await again.json())["response"] == {"uid": "u-3", "allowed": True}


async def test_a_review_with_more_fields_than_any_pool_is_refused_before_validation(
    client: TestClient[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server prunes unknown fields before it calls a webhook: only another client sends 100,000."""
    checked: list[Any] = []
    monkeypatch.setattr(review, "review", checked.append)
    response = await client.post(webhook.PATH, json=review_document(hostile_spec()))
    assert response.status == 400 and checked == []
    assert f"more than {webhook.MAX_REVIEW_FIELDS} fields (MAX_REVIEW_FIELDS)" in await response.text()


@pytest.mark.parametrize(
    ("document", "within"),
    [({}, True), ({"a": [1, 2, {"b": 3}]}, True), ({"a": list(range(6))}, False), ([[[[1, 2, 3, 4, 5, 6]]]], False)],
)
def test_fields_are_counted_at_every_depth(document: Any, within: bool) -> None:
    assert webhook.within_fields(document, 5) is within


async def test_a_review_with_many_unknown_fields_gets_a_bounded_answer_naming_the_cut(
    client: TestClient[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webhook, "MAX_REVIEW_FIELDS", 2 * UNKNOWN_FIELDS)
    response = await client.post(webhook.PATH, json=review_document(hostile_spec()))
    body = await response.read()
    assert response.status == 200
    assert len(body) < 64 * 1024, len(body)
    status = json.loads(body)["response"]["status"]
    causes = status["details"]["causes"]
    assert len(causes) == review.MAX_PROBLEMS + 1
    cut = UNKNOWN_FIELDS - review.MAX_PROBLEMS
    assert causes[-1]["reason"] == "FieldValueTooMany"
    assert f"{cut} more problems not listed ({UNKNOWN_FIELDS} in all" in causes[-1]["message"]
    message = status["message"]
    assert message.startswith(f"{UNKNOWN_FIELDS} problems, the first {review.MAX_PROBLEMS} listed:\n")
    assert message.endswith(causes[-1]["message"])
    assert causes[0] == {"reason": "FieldValueInvalid", "field": "spec.x0", "message": 'unknown field "spec.x0"'}


async def test_a_review_over_the_limit_is_refused_naming_it(client: TestClient[Any, Any]) -> None:
    response = await client.post(webhook.PATH, data=b" " * (webhook.MAX_REVIEW_BYTES + 1))
    assert response.status == 413
    assert str(webhook.MAX_REVIEW_BYTES) in await response.text()


async def test_a_chunked_review_over_the_limit_is_refused_naming_it(client: TestClient[Any, Any]) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(webhook.MAX_REVIEW_BYTES // (64 * 1024) + 1):
            yield b" " * (64 * 1024)

    response = await client.post(webhook.PATH, data=chunks())
    assert response.status == 413
    assert str(webhook.MAX_REVIEW_BYTES) in await response.text()


async def test_a_small_review_is_answered_as_before(client: TestClient[Any, Any]) -> None:
    response = await client.post(webhook.PATH, json=review_document({"accelerator": "H100:8"}))
    assert response.status == 200
    assert (await response.json())["response"] == {"uid": "u-1", "allowed": True}
    malformed = await client.post(webhook.PATH, data=b"{")
    assert malformed.status == 400
    assert "not JSON" in await malformed.text()
