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
    async with TestClient(TestServer(webhook.application(webhook.Reviewer(workers=1)))) as running:
        yield running


async def test_validation_runs_off_the_loop_which_keeps_serving(
    client: TestClient[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = BlockingReview(asyncio.get_running_loop())
    monkeypatch.setattr(review, "review", fake)
    try:
        large = asyncio.create_task(client.post(webhook.PATH, json=review_document(hostile_spec())))
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


async def test_a_review_with_100k_unknown_fields_gets_a_bounded_answer_naming_the_cut(
    client: TestClient[Any, Any],
) -> None:
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
