"""`accelpool check` against the emulated API server with no agent: what it asks, its errors and its
timeout; and its verdict table, JSON and exit code. With running agents and the operator:
tests/integration/demo/test_check_command.py."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

import accelpool_api as api
from accelpool import cli
from accelpool.cli.commands.check import (
    EXIT_TIMEOUT,
    NodeAnswer,
    UsageError,
    exit_code,
    parse_request,
    render_json,
    render_table,
)
from accelpool_api import conventions
from accelpool_core.protocol import Action, Finding, HealthReport, HealthStatus, Severity
from accelpool_demo.apiserver import RunningApiServer, serving

POOLS = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"
TOKEN = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ-[0-9a-f]{6}")


@pytest.fixture
async def emulator() -> AsyncIterator[RunningApiServer]:
    async with serving() as running:
        running.put("/api/v1/nodes", {"metadata": {"name": "h100-1", "labels": {conventions.POOL_LABEL: "train"}}})
        running.put("/api/v1/nodes", {"metadata": {"name": "h100-2"}})
        yield running


async def check(emulator: RunningApiServer, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(cli.main, ["check", "--server", emulator.url, *args])
    out, err = capsys.readouterr()
    return code, out, err


def annotations_of(emulator: RunningApiServer, path: str) -> dict[str, str]:
    found = emulator.get(path)
    assert found is not None
    return dict(found["metadata"].get("annotations") or {})


async def test_no_wait_sets_a_fresh_token_and_prints_it(
    emulator: RunningApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await check(emulator, capsys, "h100-1", "h100-2", "--no-wait")
    token = out.strip()
    assert code == 0 and TOKEN.fullmatch(token), out
    for node in ("h100-1", "h100-2"):
        assert annotations_of(emulator, f"/api/v1/nodes/{node}")[conventions.CHECK_REQUEST_ANNOTATION] == token
    assert f"check requested on h100-1, h100-2: accelpool.io/check-requested={token}" in err
    code, again, _ = await check(emulator, capsys, "h100-1", "--no-wait")
    assert code == 0 and again.strip() != token, "every request is a new token"


async def test_an_unknown_node_is_named_and_nothing_is_asked(
    emulator: RunningApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await check(emulator, capsys, "h100-1", "h100-9")
    assert (code, out, err) == (2, "", "error: node h100-9 not found\n")
    assert conventions.CHECK_REQUEST_ANNOTATION not in annotations_of(emulator, "/api/v1/nodes/h100-1")


async def test_an_unknown_pool_is_named(emulator: RunningApiServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = await check(emulator, capsys, "--pool", "nope")
    assert (code, err) == (2, "error: ComputePool nope not found\n")


async def test_a_node_whose_agent_does_not_answer_times_out_naming_it(
    emulator: RunningApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await check(emulator, capsys, "h100-2", "--timeout", "1s")
    assert code == EXIT_TIMEOUT
    assert out.splitlines()[1].split()[:3] == ["h100-2", "-", "NotAnswered"]
    assert "not answered within 1s: h100-2 (its agent's full cycle (is the agent running on it?))" in err


async def test_a_pool_request_goes_on_the_pool_and_waits_for_its_members(
    emulator: RunningApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """No operator runs here: nothing copies the pool's token, and the timeout says so."""
    async with emulator.client() as client:
        await client.create(
            POOLS,
            {
                "apiVersion": f"{api.GROUP}/{api.VERSION}",
                "kind": api.KIND,
                "metadata": {"name": "train"},
                "spec": {"accelerator": "H100:8"},
            },
        )
        await client.create(
            POOLS,
            {
                "apiVersion": f"{api.GROUP}/{api.VERSION}",
                "kind": api.KIND,
                "metadata": {"name": "empty"},
                "spec": {"accelerator": "L4"},
            },
        )
    code, out, err = await check(emulator, capsys, "--pool", "train", "--timeout", "1s", "-o", "json")
    document = json.loads(out)
    token = annotations_of(emulator, f"{POOLS}/train")[conventions.CHECK_REQUEST_ANNOTATION]
    assert code == EXIT_TIMEOUT and document["token"] == token and document["pool"] == "train"
    assert document["nodes"] == [
        {
            "node": "h100-1",
            "answered": False,
            "waitingFor": "the operator to copy the pool's request to its accelpool.io/check-requested",
        }
    ]
    assert conventions.CHECK_REQUEST_ANNOTATION not in annotations_of(emulator, "/api/v1/nodes/h100-1"), (
        "the operator's job"
    )
    assert "check requested on pool train (1 nodes)" in err
    code, _, err = await check(emulator, capsys, "--pool", "empty")
    assert code == 2 and "ComputePool empty has no member nodes (none labelled accelpool.io/pool=empty)" in err


def arguments(*args: str) -> argparse.Namespace:
    parser = cli.build_parser()
    return parser.parse_args(["check", *args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give either NODE names or --pool POOL"),
        (("h100-1", "--pool", "train"), "give either NODE names or --pool POOL"),
        (("H100_1",), "NODE: invalid value 'H100_1': a node name is a DNS subdomain"),
        (
            ("--pool", "x" * 64),
            f"--pool: invalid value '{'x' * 64}': a ComputePool name is a DNS subdomain of at most 63",
        ),
        (
            ("h100-1", "--timeout", "soon"),
            "--timeout: invalid value 'soon': a positive duration such as 90s, 15m or 1h",
        ),
        (("h100-1", "--timeout", "0"), "--timeout: invalid value '0'"),
    ],
)
def test_bad_arguments_are_named(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_request(arguments(*args))


def test_repeated_nodes_are_asked_once() -> None:
    request = parse_request(arguments("a", "b", "a", "--timeout", "90s"))
    assert (request.nodes, request.pool, request.timeout_seconds) == (("a", "b"), None, 90.0)


def report(status: HealthStatus, reason: str, message: str, action: Action = Action.NONE, **extra: Any) -> HealthReport:
    return HealthReport(status=status, reason=reason, message=message, action=action, **extra)


def test_the_verdicts_and_the_exit_code() -> None:
    healthy = NodeAnswer("h100-1", report(HealthStatus.HEALTHY, "AllChecksPassed", "8 GPUs passed all checks"))
    xid = Finding(check="xid", severity=Severity.CRITICAL, reason="XidError79", action=Action.RESTART_OS, gpus=[3])
    bad = NodeAnswer(
        "h100-2",
        report(HealthStatus.UNHEALTHY, "XidError79", "XID 79 on GPU 3", Action.RESTART_OS, findings=[xid]),
    )
    silent = NodeAnswer("h100-3", None, "its agent's full cycle")
    assert exit_code([healthy]) == 0
    assert exit_code([healthy, bad]) == 1
    assert exit_code([healthy, bad, silent]) == EXIT_TIMEOUT
    assert render_table([healthy, bad, silent]).splitlines() == [
        "NODE    STATUS     REASON           ACTION      MESSAGE",
        "h100-1  Healthy    AllChecksPassed  none        8 GPUs passed all checks",
        "h100-2  Unhealthy  XidError79       restart-os  XID 79 on GPU 3",
        "h100-3  -          NotAnswered      -           waiting for its agent's full cycle",
    ]
    document = json.loads(render_json("t", None, [bad, silent]))
    assert document["nodes"][0]["findings"] == [
        {
            "check": "xid",
            "severity": "CRITICAL",
            "reason": "XidError79",
            "action": "restart-os",
            "gpus": [3],
            "detail": "",
        }
    ]
    assert document["nodes"][1] == {"node": "h100-3", "answered": False, "waitingFor": silent.waiting_for}
