"""A scenario's requests replayed in order against a fresh emulated API server, over HTTP.

Each scenario gets its own server (`accelpool_demo.apiserver.serving`), on an event loop whose clock
looptime moves (a watch's `timeoutSeconds=8` passes at once), and a plain aiohttp client that sends
each request as the recorder did (its body as JSON, or `bodyRaw` verbatim; `User-Agent: Python-urllib`,
which the real server names field managers after). What existed in the recorded cluster before the
scenario is stored first, as it was there:

- the namespaces the scenario uses, each with the two ConfigMaps kube-controller-manager publishes in
  every namespace of that cluster (`kube-root-ca.crt`, and `openshift-service-ca.crt` from its
  OpenShift build: the transcripts' README), which the recorded lists show;
- the test CRDs (`crds:` of crd-admission-and-apply.yaml) when the scenario uses their group without
  creating them;
- kube-controller-manager as it ran there: its TTL controller annotates each new Node (`_ttl_controller`),
  its node lifecycle controller does not run (`Store.node_lifecycle_controller` off);
- the list the recorder made before opening its watches (`_list_before_watching`);
- what it held from scenarios of other files (`PRESENT`: pod-eviction-pdb's node during dra-scheduling);
- for a scenario recorded on the cluster another one left (`CONTINUES`: dra-scheduling after dra-objects,
  dra-device-taint-eviction after dra-scheduling), that one's writes that succeeded, replayed, and what the
  recorded cluster had meanwhile that the emulator does not make (`AFTERMATH`: the pods' default grace period).

During a scenario recorded while kube-scheduler and kube-controller-manager's resourceclaim controller ran
(`SCHEDULED`: dra-scheduling, also when replayed for the scenario after it) the demo's own
(`accelpool_demo.dra.components.DraScheduler`, without the DRADeviceTaintRules gate, as the recorded
scheduler ran) make the claims, allocations, bindings and Events after each write, until they have
nothing more to do; the names the recorded server generated are given again (`GENERATED`).

The server is the recorded release as it was started (`release.RECORDED`: 1.36 with
`resource.k8s.io/v1beta2` and the DRADeviceTaintRules gate on).

The recorded requests carry placeholders where the recording normalized what it sent (README): they
are given this replay's values. `<uid>` is the uid of the object the request addresses (in an
ownerReference: of the owner it names); `<resourceVersion>` its current resourceVersion, or, in a
step about a stale one (its note says "stale"), the one it had when first seen; `<timestamp>` the
value stored at the same place; in queries, the resourceVersion of the latest list and the latest
`continue` token a list answered. The transcripts' README lists what else is kept verbatim; `CORRECTIONS`
holds the one request the recording shows otherwise than it was sent.

At an observation step the controllers get `OBSERVE_SECONDS` of loop time (the recorder polled for about
as long), after what the recorder did there without a step of its own (`ACTIONS`), and the objects then
stored are its outcome (which tests/conformance/test_transcripts.py's `OBSERVED` checks).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import aiohttp
import kmock
import looptime

from accelpool_demo.apiserver import RunningApiServer, serving, writes
from accelpool_demo.apiserver.release import RECORDED
from accelpool_demo.apiserver.resources import key_of, parse_path
from accelpool_demo.dra.components import DraScheduler
from tests.conformance.compare import CONTROLLER_MANAGER, TTL_ANNOTATION, Outcome
from tests.conformance.transcripts import Scenario, Step, scenario_of

USER_AGENT = "Python-urllib/3.11"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PUBLISHED_CONFIGMAPS = ("kube-root-ca.crt", "openshift-service-ca.crt")
WATCH_LIMIT = 120.0
"""Loop seconds a watch is read at most when the server does not end it (looptime's: no wall clock)."""
EVENTS_LIMIT = 1000
"""Events a watch is read at most (an emulator that streams without end fails the step, not the machine)."""
NOW = "2026-11-26T00:00:00Z"
OBSERVE_SECONDS = 10.0
"""Loop seconds the controllers are given at an observation step (looptime's: no wall clock)."""
CONTROLLER_MANAGER_AGENT = "kube-controller-manager/v1.36.2 (linux/amd64) kubernetes/ttl-controller"


@dataclass
class Replay:
    """What a replay knows while it runs: the latest list, the versions each object was first seen at."""

    api: RunningApiServer
    scheduler: DraScheduler
    """kube-scheduler and kube-controller-manager's resourceclaim controller, as the recorded cluster ran them
    during the scenarios of `SCHEDULED` (one of each for the whole replay: its scheduling queue remembers
    the pods it failed)."""
    last_list: Mapping[str, Any] = field(default_factory=dict)
    last_continue: str = ""
    """The latest continue token a list answered (a later list without one keeps it)."""
    first_versions: dict[str, str] = field(default_factory=dict)


@functools.cache
def outcomes(scenario_id: str) -> tuple[Outcome, ...]:
    """Every step's outcome, from one replay of the scenario (cached)."""
    scenario = scenario_of(scenario_id)
    loop = looptime.new_event_loop()
    try:
        return loop.run_until_complete(_replay(scenario))
    finally:
        loop.close()


async def _replay(scenario: Scenario) -> tuple[Outcome, ...]:
    server = serving(
        kubernetes_version=RECORDED.version,
        runtime_config=RECORDED.runtime_config,
        feature_gates=RECORDED.feature_gates,
    )
    async with (
        server as api,
        aiohttp.ClientSession(headers={"User-Agent": USER_AGENT}) as session,
        api.client(user_agent=SCHEDULER_USER_AGENT) as client,
    ):
        api.server.store.node_lifecycle_controller = False  # the recorded cluster ran without it (README)
        _seed(api, scenario)
        replay = Replay(api, DraScheduler(client, honour_device_taint_rules=False, clock=lambda: NOW))
        with mock.patch.object(writes, "generate_name", _as_generated_there):
            for step_id in (found for previous in _chain(scenario.id) for found in PRESENT.get(previous.id, ())):
                outcome = await _send(session, replay, _step_of(step_id))
                assert outcome.code is not None and outcome.code < 300, f"{step_id} again: {outcome}"
            await _continued(session, replay, scenario.id)
            await _list_before_watching(session, replay, scenario)
            results: list[Outcome] = []
            for step in scenario.steps:
                if step.request is None:
                    results.append(await _observe(session, replay, step))
                    continue
                results.append(await _send(session, replay, step))
                await _controllers(replay, step)
            return tuple(results)


async def _observe(session: aiohttp.ClientSession, replay: Replay, step: Step) -> Outcome:
    """An observation step: what the recorder did there (`ACTIONS`), then the controllers' time to act (the
    recorder polled for up to about this long), then the objects stored."""
    action = ACTIONS.get(step.id)
    if action is not None:
        await action(session, replay)
    await asyncio.sleep(OBSERVE_SECONDS)
    stored = frozenset(
        f"{key_of(resource)}|{namespace}|{name}"
        for (resource, namespace, name), obj in replay.api.server.store.objects.items()
        if not obj.deleted
    )
    return Outcome(None, None, observed=stored)


async def _created_like(
    session: aiohttp.ClientSession, replay: Replay, step_ids: tuple[str, ...], renamed: dict[str, str]
) -> None:
    """The requests of these steps again, with names changed (a pod the recorder made as it made another)."""
    for step_id in step_ids:
        scenario = scenario_of(step_id)
        step = scenario.steps[int(step_id.rsplit("/", 1)[1])]
        text = json.dumps(step.raw)
        for old, new in renamed.items():
            text = text.replace(f'"{old}"', f'"{new}"').replace(f"/{old}/", f"/{new}/")
        again = Step(step.file, step.scenario, step.index, json.loads(text))
        outcome = await _send(session, replay, again)
        assert outcome.code is not None and outcome.code < 300, outcome


async def _pod_p3(session: aiohttp.ClientSession, replay: Replay) -> None:
    steps = ("ownerrefs-gc-eviction/pod-eviction-pdb/02", "ownerrefs-gc-eviction/pod-eviction-pdb/07")
    await _created_like(session, replay, steps, {"p1": "p3"})


ACTIONS = {"ownerrefs-gc-eviction/pod-eviction-pdb/09": _pod_p3}
"""What the recorder did at an observation step without recording it as a step."""


async def _list_before_watching(session: aiohttp.ClientSession, replay: Replay, scenario: Scenario) -> None:
    """The list the recorder made before a scenario whose watches it opened before the changes (from the
    list's resourceVersion): their requests name that resourceVersion, no step of the transcript made it."""
    watches = [s for s in scenario.steps if s.is_watch]
    if watches:
        assert watches[0].request is not None
        async with session.get(f"{replay.api.url}{watches[0].request['path']}") as response:
            replay.last_list = (await response.json())["metadata"]


def _step_of(step_id: str) -> Step:
    return scenario_of(step_id).steps[int(step_id.rsplit("/", 1)[1])]


def _chain(scenario_id: str) -> list[Scenario]:
    """The scenario and those it continues, oldest first."""
    found = [scenario_of(scenario_id)]
    while found[0].id in CONTINUES:
        found.insert(0, scenario_of(CONTINUES[found[0].id]))
    return found


async def _continued(session: aiohttp.ClientSession, replay: Replay, scenario_id: str) -> None:
    """The state a scenario that continues others starts from (`CONTINUES`): their writes that succeeded,
    in order, then what the recorded cluster's controllers did during them (`AFTERMATH`)."""
    for previous in _chain(scenario_id)[:-1]:
        for step in previous.steps:
            request, code = step.request, step.response.get("code")
            if request is None or request["method"] == "GET" or not isinstance(code, int) or code >= 300:
                continue
            outcome = await _send(session, replay, step)
            assert outcome.code == code, f"{step.id} again: {outcome.code} {outcome.body}"
            await _controllers(replay, step)
        aftermath = AFTERMATH.get(previous.id)
        if aftermath is not None:
            aftermath(replay, previous)


def _seed(api: RunningApiServer, scenario: Scenario) -> None:
    namespaces = {"default"}
    for step in (step for s in _chain(scenario.id) for step in s.steps):
        found = re.match(r"^/api[s]?/(?:[^/]+/)?[^/]+/namespaces/([^/]+)/", (step.request or {}).get("path", ""))
        if found:
            namespaces.add(found[1])
    for namespace in sorted(namespaces):
        api.put("/api/v1/namespaces", {"metadata": {"name": namespace}})
        for name in PUBLISHED_CONFIGMAPS:
            api.put(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": name}, "data": {}})
    creates_crds = any((s.request or {}).get("path") == CRDS for s in scenario.steps)
    groups = {crd["spec"]["group"] for crd in scenario.crds}
    uses = any(f"/apis/{group}/" in (s.request or {}).get("path", "") for s in scenario.steps for group in groups)
    if uses and not creates_crds:
        for crd in scenario.crds:
            api.put(CRDS, crd)


async def _send(session: aiohttp.ClientSession, replay: Replay, step: Step) -> Outcome:
    request = step.request
    assert request is not None
    path = request["path"]
    query = {k: _query_value(replay, str(v)) for k, v in (request.get("query") or {}).items()}
    headers = {}
    data: bytes | None = None
    if "bodyRaw" in request:
        data = str(request["bodyRaw"]).encode()
    elif "body" in request:
        data = json.dumps(_resolved(replay, step, request["body"])).encode()
    if request.get("contentType"):
        headers["Content-Type"] = str(request["contentType"])
    url = f"{replay.api.url}{path}"
    try:
        async with session.request(request["method"], url, params=query, data=data, headers=headers) as response:
            warnings = response.headers.getall("Warning", [])
            content_type = response.headers.get("Content-Type")
            if step.is_watch:
                events = await _events(response, query)
                return Outcome(response.status, content_type, list(warnings), None, events)
            text = await response.text()
    except aiohttp.ServerDisconnectedError as error:
        return Outcome(None, None, [], f"<no HTTP response: {type(error).__name__}>")
    try:
        body: Any = json.loads(text)
    except ValueError:
        body = text
    outcome = Outcome(response.status, content_type, list(warnings), body)
    _remember(replay, step, body)
    if response.status == 201 and isinstance(body, Mapping) and body.get("kind") == "Node":
        await _ttl_controller(session, replay, str(body["metadata"]["name"]))
    return outcome


async def _ttl_controller(session: aiohttp.ClientSession, replay: Replay, node: str) -> None:
    """What the recorded cluster's TTL controller (kube-controller-manager) does to a new Node, soon after
    its creation: annotate it `node.alpha.kubernetes.io/ttl: "0"` with a strategic merge patch
    (pkg/controller/ttl/ttl_controller.go). The comparison ignores the annotation and this writer's
    managedFields entry, but not their consequences (a Node's annotations are never emptied)."""
    patch = {"metadata": {"annotations": {TTL_ANNOTATION: "0"}}}
    headers = {"Content-Type": "application/strategic-merge-patch+json", "User-Agent": CONTROLLER_MANAGER_AGENT}
    async with session.patch(f"{replay.api.url}/api/v1/nodes/{node}", json=patch, headers=headers) as response:
        assert response.status == 200, await response.text()


async def _events(response: aiohttp.ClientResponse, query: Mapping[str, str]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    limit = float(query.get("timeoutSeconds", 0)) + WATCH_LIMIT
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(limit):
            async for line in response.content:
                if line.strip():
                    events.append(json.loads(line))
                if len(events) >= EVENTS_LIMIT:
                    break
    return events


def _remember(replay: Replay, step: Step, body: Any) -> None:
    if not isinstance(body, Mapping):
        return
    if str(body.get("kind", "")).endswith("List") and isinstance(body.get("items"), list):
        replay.last_list = body.get("metadata") or {}
        replay.last_continue = str(replay.last_list.get("continue") or replay.last_continue)
        return
    metadata = body.get("metadata") or {}
    version = metadata.get("resourceVersion")
    key = _object_key(step, body)
    if version and key is not None and body.get("kind") != "Status":
        replay.first_versions.setdefault(key, str(version))


def _object_key(step: Step, body: Mapping[str, Any] | None) -> str | None:
    """The path of the object a request addresses (a create's: the collection's and the body's name)."""
    request = step.request or {}
    if len(request["path"].strip("/").split("/")) < 3:
        return None  # discovery, not an object
    resource, namespace, name, _ = parse_path(request["path"])
    if name is None:
        name = ((body or {}).get("metadata") or {}).get("name")
    if name is None:
        return None
    return f"{resource}|{namespace}|{name}"


def _stored(replay: Replay, step: Step, body: Any) -> dict[str, Any] | None:
    key = _object_key(step, body if isinstance(body, Mapping) else None)
    if key is None:
        return None
    resource, namespace, name = key.split("|")
    found = replay.api.server.store.get(kmock.resource(resource), None if namespace == "None" else namespace, name)
    return found


def _query_value(replay: Replay, value: str) -> str:
    version = str(replay.last_list.get("resourceVersion", ""))
    if value == "<resourceVersion of the preceding list>":
        return version
    if value == "<resourceVersion of the preceding list + 100000>":
        return str(int(version) + 100000)
    if value == "<continue token from the previous page>":
        return replay.last_continue
    return value


def _resolved(replay: Replay, step: Step, body: Any) -> Any:
    """The request body with this replay's values for the recording's placeholders."""
    body = copy.deepcopy(body)
    correction = CORRECTIONS.get(step.id)
    if correction is not None:
        body = correction(body)
    stored = _stored(replay, step, body)
    stale = "stale" in step.note
    key = _object_key(step, body if isinstance(body, Mapping) else None)

    def owner_uid(reference: Mapping[str, Any]) -> str:
        api_version, kind, name = reference.get("apiVersion", ""), reference.get("kind"), reference.get("name")
        namespace = parse_path((step.request or {})["path"])[1]
        for (_, ns, found), obj in replay.api.server.store.objects.items():
            raw = obj.raw if not obj.deleted else {}
            same = raw.get("kind") == kind and raw.get("apiVersion") == api_version and found == name
            if same and ns in (None, namespace):
                return str(raw["metadata"]["uid"])
        return "00000000-0000-0000-0000-00000000dead"

    def walk(value: Any, at: Any, key_name: str | None, parent: Any) -> Any:
        if isinstance(value, dict):
            if "<uid>" in (value.get("uid"),) and "kind" in value and "name" in value and key_name == "ownerReferences":
                value["uid"] = owner_uid(value)
            return {k: walk(v, at.get(k) if isinstance(at, Mapping) else None, str(k), value) for k, v in value.items()}
        if isinstance(value, list):
            return [
                walk(v, at[i] if isinstance(at, list) and i < len(at) else None, key_name, value)
                for i, v in enumerate(value)
            ]
        if not isinstance(value, str) or "<" not in value:
            return value
        if value == "<resourceVersion>":
            current = str(((stored or {}).get("metadata") or {}).get("resourceVersion", ""))
            if stale and key is not None:
                first = replay.first_versions.get(key, "")
                assert first and first != current, f"{step.id}: no stale resourceVersion to send"
                return first
            return current
        if value == "<uid>":
            return str(((stored or {}).get("metadata") or {}).get("uid", ""))
        if value == "<timestamp>":
            return at if isinstance(at, str) else NOW
        return value

    resolved = walk(body, stored, None, None)
    if isinstance(resolved, dict) and isinstance(resolved.get("metadata"), dict):
        _without_controllers(resolved["metadata"])
    return resolved


def _without_controllers(metadata: dict[str, Any]) -> None:
    """A body copied from an answer, less what the recorded cluster's TTL controller wrote there: the
    replay's cluster has none, and the comparison ignores both (see `compare`)."""
    annotations = metadata.get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(TTL_ANNOTATION, None)
    if isinstance(metadata.get("managedFields"), list):
        metadata["managedFields"] = [e for e in metadata["managedFields"] if e.get("manager") != CONTROLLER_MANAGER]


def _scale_put_as_sent(body: Any) -> Any:
    """The recorder changed this request's body after sending it (the next step's `replicas: 6` and
    `resourceVersion: '1'` are in it, while the answer names the 11 it sent, and a stale version would
    have been a 409 before any validation): the request as it was sent."""
    body["spec"]["replicas"] = 11
    body["metadata"]["resourceVersion"] = "<resourceVersion>"
    return body


CORRECTIONS = {"crd-admission-and-apply/crd-status-and-scale/10": _scale_put_as_sent}
"""Steps whose recorded request is not what was sent, and the request that was."""


async def _controllers(replay: Replay, step: Step) -> None:
    """After a write of a scenario of `SCHEDULED`: the demo's resourceclaim controller and DRA scheduler
    (`accelpool_demo.dra.components.DraScheduler`), stepped until a step writes nothing, as the recorder
    waited for the real ones before its next request (its observation steps: bound within 0.5 s)."""
    request = step.request
    if step.id.rsplit("/", 1)[0] not in SCHEDULED or request is None or request["method"] == "GET":
        return
    store = replay.api.server.store
    for _ in range(SCHEDULER_STEPS):
        before = store.version
        await replay.scheduler.step()
        if store.version == before:
            return
    raise AssertionError(f"{step.id}: the DRA scheduler still writes after {SCHEDULER_STEPS} steps")


def _terminating_slowly(replay: Replay, scenario: Scenario) -> None:
    """The real server's default grace period (30 s: pkg/apis/core/v1/defaults.go) on the pods of the
    scenario, which the emulator does not give them (known_differences `_POD_DEFAULTS`): an evicted pod
    stays terminating, as no kubelet ends it."""
    api = replay.api
    for step in scenario.steps:
        request = step.request
        if request is None or request["method"] != "POST" or not request["path"].endswith("/pods"):
            continue
        path = f"{request['path']}/{request['body']['metadata']['name']}"
        pod = copy.deepcopy(api.get(path))
        assert pod is not None, path
        pod["spec"]["terminationGracePeriodSeconds"] = 30
        api.put(request["path"], pod)


def _as_generated_there(metadata: dict[str, Any]) -> None:
    """`writes.generate_name`, giving the names the recorded server generated (`GENERATED`) their recorded
    suffix: later requests and answers name them."""
    if not metadata.get("name") and metadata.get("generateName") in GENERATED:
        metadata["name"] = GENERATED[str(metadata["generateName"])]
        return
    _generate_name(metadata)


_generate_name = writes.generate_name
GENERATED = {"pod-tpl-gpu-": "pod-tpl-gpu-szggp"}
"""Names the recorded server generated, by their `generateName` (dra/dra-scheduling/16: kube-controller-manager's
claim for pod-tpl's template), which the transcript names in later requests."""
SCHEDULED = ("dra/dra-scheduling",)
"""Scenarios recorded while kube-scheduler (without the DRADeviceTaintRules gate) and kube-controller-manager's
resourceclaim controller ran."""
SCHEDULER_USER_AGENT = "kube-scheduler/v1.36.2 (linux/amd64) kubernetes/scheduler"
SCHEDULER_STEPS = 10
"""Steps of the DRA scheduler after a write at most (each pod takes two: controller then scheduler)."""
PRESENT = {"dra/dra-scheduling": ("ownerrefs-gc-eviction/pod-eviction-pdb/00",)}
"""What the recorded cluster held from scenarios of other files when a scenario ran, by the steps that made it:
during dra-scheduling, pod-eviction-pdb's node `fid-node-evict`, no allocatable resources, hence the
scheduler's "0/2 nodes" (README)."""


CONTINUES = {"dra/dra-scheduling": "dra/dra-objects", "dra/dra-device-taint-eviction": "dra/dra-scheduling"}
"""Scenarios recorded on the cluster another left (their description says so), and that one."""
AFTERMATH = {"dra/dra-scheduling": _terminating_slowly}
"""What the recorded cluster's controllers did during a scenario that a later one starts from."""
