"""The emulated API server's Kubernetes release (`ApiServer(kubernetes_version=, runtime_config=,
feature_gates=)`) decides what discovery says of `resource.k8s.io`, which accelpool's operator reads to tell
whether it can quarantine one GPU (a DeviceTaintRule) or only a node: on 1.36 DeviceTaintRules exist only
in v1beta2, and only with `--runtime-config=resource.k8s.io/v1beta2=true` and the DRADeviceTaintRules
gate; on 1.37 they are in v1. Every version's objects are the same ones."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from accelpool_demo.apiserver import Release, RunningApiServer, serving
from tests.support.environment import kubectl as support_kubectl

GROUP = "/apis/resource.k8s.io"
V1BETA2 = {"resource.k8s.io/v1beta2": True}
GATE = {"DRADeviceTaintRules": True}
CORE = ["deviceclasses", "resourceclaims", "resourceclaims/status", "resourceclaimtemplates", "resourceslices"]
RULES = ["devicetaintrules", "devicetaintrules/status"]


async def _get(api: RunningApiServer, path: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(api.url + path) as response:
        return response.status, await response.json(content_type=None)


async def _served(api: RunningApiServer) -> dict[str, list[str]]:
    """Each served version of the group, with its resources (as discovery lists them)."""
    status, group = await _get(api, GROUP)
    assert status == 200, group
    found = {}
    for version in group["versions"]:
        status, listed = await _get(api, f"{GROUP}/{version['version']}")
        assert status == 200, listed
        found[version["version"]] = sorted(r["name"] for r in listed["resources"])
    assert group["preferredVersion"] == group["versions"][0]
    return found


@pytest.fixture
async def server(request: pytest.FixtureRequest) -> AsyncIterator[RunningApiServer]:
    config: Mapping[str, Any] = request.param
    async with serving(**config) as api:
        yield api


@pytest.mark.parametrize(
    ("server", "versions", "git_version"),
    [
        pytest.param({}, {"v1": sorted(CORE + RULES)}, "v1.37.0", id="1.37 (the default)"),
        pytest.param(
            {"feature_gates": {"DRADeviceTaintRules": False}}, {"v1": CORE}, "v1.37.0", id="1.37 with the gate off"
        ),
        pytest.param(
            {"runtime_config": V1BETA2},
            {"v1": sorted(CORE + RULES), "v1beta2": sorted(CORE + RULES)},
            "v1.37.0",
            id="1.37 with v1beta2",
        ),
        pytest.param({"kubernetes_version": "1.36"}, {"v1": CORE}, "v1.36.2", id="1.36"),
        pytest.param(
            {"kubernetes_version": "1.36", "feature_gates": GATE}, {"v1": CORE}, "v1.36.2", id="1.36 with the gate only"
        ),
        pytest.param(
            {"kubernetes_version": "1.36", "runtime_config": V1BETA2},
            {"v1": CORE, "v1beta2": CORE},
            "v1.36.2",
            id="1.36 with v1beta2 only",
        ),
        pytest.param(
            {"kubernetes_version": "1.36", "runtime_config": V1BETA2, "feature_gates": GATE},
            {"v1": CORE, "v1beta2": sorted(CORE + RULES)},
            "v1.36.2",
            id="1.36 as recorded",
        ),
    ],
    indirect=["server"],
)
async def test_discovery_says_exactly_what_the_release_serves(
    server: RunningApiServer, versions: dict[str, list[str]], git_version: str
) -> None:
    assert await _served(server) == versions
    status, version = await _get(server, "/version")
    assert status == 200 and version["gitVersion"] == git_version
    for unserved in {"v1", "v1beta2"} - set(versions):
        status, _ = await _get(server, f"{GROUP}/{unserved}")
        assert status == 404
    for version, resources in versions.items():
        status, listed = await _get(server, f"{GROUP}/{version}/devicetaintrules")
        assert status == (200 if "devicetaintrules" in resources else 404), listed


RULE = {
    "kind": "DeviceTaintRule",
    "metadata": {"name": "q-gpu-3"},
    "spec": {
        "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node-7", "device": "gpu-3"},
        "taint": {"key": "accelpool.io/quarantine", "effect": "NoSchedule"},
    },
}


async def test_a_rule_posted_to_an_unserved_version_is_not_found() -> None:
    async with serving(kubernetes_version="1.36") as api, aiohttp.ClientSession() as session:
        body = {**RULE, "apiVersion": "resource.k8s.io/v1"}
        async with session.post(f"{api.url}{GROUP}/v1/devicetaintrules", json=body) as response:
            assert response.status == 404
            assert await response.json() == {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "the server could not find the requested resource",
                "reason": "NotFound",
                "details": {},
                "code": 404,
            }


async def test_every_version_reads_and_writes_the_same_objects() -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "one"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    }
    async with serving(runtime_config=V1BETA2) as api, aiohttp.ClientSession() as session:
        api.put("/api/v1/namespaces", {"metadata": {"name": "team"}})
        async with session.post(f"{api.url}{GROUP}/v1/namespaces/team/resourceclaims", json=claim) as response:
            assert response.status == 201, await response.text()
        patch = {"metadata": {"labels": {"seen": "v1beta2"}}}
        path = f"{api.url}{GROUP}/v1beta2/namespaces/team/resourceclaims/one"
        headers = {"Content-Type": "application/merge-patch+json"}
        async with session.patch(path, json=patch, headers=headers) as response:
            patched = await response.json()
            assert response.status == 200, patched
        assert patched["apiVersion"] == "resource.k8s.io/v1beta2"
        assert patched["metadata"]["labels"] == {"seen": "v1beta2"}
        assert [e["apiVersion"] for e in patched["metadata"]["managedFields"]] == [
            "resource.k8s.io/v1",
            "resource.k8s.io/v1beta2",
        ]
        stored = api.get("/apis/resource.k8s.io/v1/namespaces/team/resourceclaims/one")
        assert stored is not None and stored["apiVersion"] == "resource.k8s.io/v1"
        assert stored["metadata"]["labels"] == {"seen": "v1beta2"}
        through_beta = api.get("/apis/resource.k8s.io/v1beta2/namespaces/team/resourceclaims/one")
        assert through_beta == {**stored, "apiVersion": "resource.k8s.io/v1beta2"}
        assert api.list("/apis/resource.k8s.io/v1beta2/namespaces/team/resourceclaims") == [through_beta]
        status, listed = await _get(api, f"{GROUP}/v1beta2/resourceclaims")
        assert status == 200 and [i["apiVersion"] for i in listed["items"]] == ["resource.k8s.io/v1beta2"]


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({"version": "1.35"}, "kubernetes_version: '1.35' is not modelled; valid: 1.36, 1.37"),
        (
            {"runtime_config": {"resource.k8s.io/v1alpha3": True}},
            "runtime_config: 'resource.k8s.io/v1alpha3' is not modelled; "
            "valid: resource.k8s.io/v1, resource.k8s.io/v1beta2",
        ),
        (
            {"feature_gates": {"DRAAdminAccess": True}},
            "feature_gates: 'DRAAdminAccess' is not modelled; valid: DRADeviceTaintRules",
        ),
        (
            {"feature_gates": {"DRADeviceTaintRules": "yes"}},
            "feature_gates['DRADeviceTaintRules']: 'yes' is not true or false",
        ),
    ],
)
def test_a_release_the_emulator_does_not_model_is_refused_naming_what_it_does(
    given: dict[str, Any], error: str
) -> None:
    with pytest.raises(ValueError) as refused:
        Release(**given)
    assert str(refused.value) == error


async def test_kubectl_applies_a_quarantine_rule_and_lists_it(tmp_path: Path) -> None:
    """kubectl finds the group in the OpenAPI v3 index (so it leaves field validation to the server) and in
    discovery (so it knows the kind's resource and scope)."""
    manifest = tmp_path / "rule.yaml"
    manifest.write_text(json.dumps({**RULE, "apiVersion": "resource.k8s.io/v1"}))
    async with serving() as api:
        applied = await _kubectl(api, "apply", "-f", str(manifest))
        assert applied == "devicetaintrule.resource.k8s.io/q-gpu-3 created\n"
        assert (
            await _kubectl(api, "apply", "-f", str(manifest)) == "devicetaintrule.resource.k8s.io/q-gpu-3 unchanged\n"
        )
        assert (
            await _kubectl(api, "get", "devicetaintrules", "-o", "name") == "devicetaintrule.resource.k8s.io/q-gpu-3\n"
        )


async def _kubectl(api: RunningApiServer, *args: str) -> str:
    return await support_kubectl(api.url, *args)
