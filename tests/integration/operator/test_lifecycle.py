"""A pool's life with the real operator: apply, converge to Ready, scale, steady state, delete."""

from __future__ import annotations

import json

import yaml

from accelpool.model import nvidia
from accelpool_api import conventions
from tests.support.builders import node_body

from .conftest import DP_CONFIGMAP, MIG_CONFIGMAP, NAMESPACE, Cluster, Operator, configs_of, seed

OPERATOR_AGENTS = ("accelpool", "kopf")


def operator_writes(cluster: Cluster, since: int = 0) -> list[str]:
    return [
        f"{r.method.value} {r.url.path}"
        for r in cluster.emulator.writes(since=since)
        if r.headers.get("User-Agent", "").startswith(OPERATOR_AGENTS)
        and not r.headers.get("User-Agent", "").startswith("accelpool-test")
    ]


async def test_apply_converges_to_ready(cluster: Cluster, operator: Operator) -> None:
    seed(
        cluster, *(node_body(f"h100-{i}") for i in range(1, 4)), *(node_body(f"a100-{i}", "A100-40GB") for i in (1, 2))
    )
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 2})
    await cluster.apply_pool("slices", {"accelerator": "A100-40GB", "nodes": 1, "mig": {"profile": "1g.5gb"}})

    await cluster.wait_for(lambda: len(cluster.members("train")) == 2 and len(cluster.members("slices")) == 1)
    assert cluster.members("train") == ["h100-1", "h100-2"]
    labels = cluster.labels("a100-1")
    slices_configs = configs_of("slices", {"accelerator": "A100-40GB", "nodes": 1, "mig": {"profile": "1g.5gb"}})
    train_configs = configs_of("train", {"accelerator": "H100:8", "nodes": 2})
    assert labels[conventions.MIG_CONFIG_LABEL] == slices_configs.mig
    assert labels[conventions.DEVICE_PLUGIN_CONFIG_LABEL] == slices_configs.device_plugin
    assert labels[conventions.MIG_CONFIG_STATE_LABEL] == "pending"
    assert cluster.labels("h100-1")[conventions.DEVICE_PLUGIN_CONFIG_LABEL] == train_configs.device_plugin
    assert {"key": "accelpool.io/pool", "value": "train", "effect": "NoSchedule"} in cluster.taints("h100-1")
    assert conventions.POOL_LABEL not in cluster.labels("h100-3")

    await cluster.wait_for(lambda: cluster.configmap(DP_CONFIGMAP) and cluster.configmap(MIG_CONFIGMAP))
    dp = cluster.configmap(DP_CONFIGMAP)
    assert dp is not None
    assert set(dp["data"]) == {"default", train_configs.device_plugin, slices_configs.device_plugin}
    assert yaml.safe_load(dp["data"][str(slices_configs.device_plugin)])["flags"]["migStrategy"] == "single"
    assert yaml.safe_load(dp["data"][str(train_configs.device_plugin)]) == {
        "version": "v1",
        "flags": {"migStrategy": "none"},
    }
    mig = cluster.configmap(MIG_CONFIGMAP)
    assert mig is not None
    document = yaml.safe_load(mig["data"]["config.yaml"])
    assert document["version"] == "v1"
    assert document["mig-configs"][slices_configs.mig] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}
    ]
    assert document["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]

    await cluster.wait_for(lambda: cluster.daemonset("train") and cluster.daemonset("slices"))
    daemonset = cluster.daemonset("train")
    assert daemonset is not None
    pool_uid = (cluster.pool("train") or {})["metadata"]["uid"]
    assert daemonset["metadata"]["ownerReferences"][0] == {
        "apiVersion": "accelpool.io/v1alpha1",
        "kind": "ComputePool",
        "name": "train",
        "uid": pool_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"accelpool.io/pool": "train"}
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert json.loads(env["ACCELPOOL_AGENT_CONFIG"]["value"])["expectedTflops"]["bf16"] == 989
    assert pod["containers"][0]["image"] == "registry.example/accelpool-agent:test"

    await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Configuring", what="train Configuring")
    assert cluster.condition("train", "AgentReady")["reason"] == "WaitingForAgents"
    assert cluster.condition("slices", "MigConfigured")["reason"] == "Pending"
    await cluster.settle_members("train")
    await cluster.settle_members("slices")
    await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Ready", what="train Ready")
    await cluster.wait_for(lambda: cluster.status("slices").get("phase") == "Ready", what="slices Ready")

    train = cluster.status("train")
    assert train["observedGeneration"] == 1
    assert train["nodes"] == {
        "desired": 2,
        "members": 2,
        "ready": 2,
        "quarantined": 0,
        "burnIn": 0,
        "draining": 0,
        "handedOff": 0,
        "summary": "2/2",
    }
    assert train["capacity"]["gpus"] == 16
    assert train["capacity"]["resources"] == {"nvidia.com/gpu": 16}
    assert train["capacity"]["measuredTFLOPS"] == 1300.0
    assert train["scheduling"]["nodeSelector"] == {"accelpool.io/pool": "train"}
    assert [m["node"] for m in train["members"]] == ["h100-1", "h100-2"]
    assert {c["type"]: c["status"] for c in train["conditions"]} == {
        "Valid": "True",
        "NodesSelected": "True",
        "MigConfigured": "True",
        "DevicePluginConfigured": "True",
        "AgentReady": "True",
        "Healthy": "True",
        "DriversConsistent": "True",
        "Ready": "True",
    }
    assert cluster.status("slices")["capacity"]["resources"] == {"nvidia.com/gpu": 56}
    # The first fill is told by the status; Events are for later changes, and each node's passed burn-in.
    assert {(e["involvedObject"]["kind"], e["reason"]) for e in cluster.events()} == {("Node", "BurnInPassed")}


async def test_steady_state_makes_no_writes(cluster: Cluster, operator: Operator, monkeypatch: object) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 5)), node_body("a100-1", "A100-40GB"))
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 3})
    await cluster.apply_pool("slices", {"accelerator": "A100-40GB", "mig": {"profile": "3g.20gb"}})
    await cluster.wait_for(lambda: cluster.status("slices").get("phase") == "Configuring")
    await cluster.settle_members("train")
    await cluster.settle_members("slices")
    await cluster.wait_for(
        lambda: cluster.status("train").get("phase") == "Ready" and cluster.status("slices").get("phase") == "Ready"
    )
    converged = cluster.emulator.request_count
    # Things that change nothing the operator cares about the result of, each followed by a pass: a status
    # update of an agent DaemonSet (its controller's, counting pods) is planned with after the check interval.
    for change in (
        ("/api/v1/nodes/h100-4", {"metadata": {"labels": {"example.com/rack": "r1"}}}),
        ("/api/v1/nodes/h100-1", {"metadata": {"labels": {"example.com/rack": "r2"}}}),
        ("/apis/accelpool.io/v1alpha1/computepools/train", {"metadata": {"labels": {"team": "ml"}}}),
        ("/api/v1/nodes/h100-2", {"metadata": {"labels": {"example.com/rack": "r3"}}}),
    ):
        await cluster.client.patch(*change)
        await planned_again(cluster, operator)
    assert operator_writes(cluster, converged) == []

    # A restarted operator finds everything as it should be: it writes nothing either.
    await operator.stop()
    restarted = cluster.emulator.request_count
    await operator.start()
    await operator.wait_passes(1)
    await cluster.client.patch("/api/v1/nodes/h100-4", {"metadata": {"labels": {"example.com/rack": "r4"}}})
    await planned_again(cluster, operator)
    assert operator_writes(cluster, restarted) == []


async def planned_again(cluster: Cluster, operator: Operator) -> None:
    """Until the operator has planned again: an agent DaemonSet's status is updated (as its controller does when
    it counts pods), and the operator plans with it within `--agent-check-interval`."""
    passes = await operator.passes()
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{conventions.agent_name('train')}/status"
    stored = cluster.daemonset("train") or {}
    counted = (stored.get("status") or {}).get("numberMisscheduled", 0)
    await cluster.client.patch(path, {"status": {"numberMisscheduled": counted + 1}})
    await operator.wait_passes(passes + 1)


async def test_scale_up_then_down_releases_the_most_recent_members(cluster: Cluster, operator: Operator) -> None:
    joined_long_ago = {conventions.JOINED_ANNOTATION: "2026-10-01T00:00:00Z"}
    old = [node_body(f"n-{i}", labels={conventions.POOL_LABEL: "train"}) for i in (5, 6)]
    for node in old:
        node["metadata"]["annotations"] = dict(joined_long_ago)
    seed(cluster, *old, *(node_body(f"n-{i}") for i in (1, 2, 3)))
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 2})
    await cluster.wait_for(lambda: cluster.daemonset("train"))
    await cluster.wait_for(lambda: cluster.status("train").get("nodes", {}).get("members") == 2)
    assert cluster.members("train") == ["n-5", "n-6"], "existing members are adopted, not replaced"

    await cluster.patch_pool("train", {"nodes": 4})
    await cluster.wait_for(lambda: len(cluster.members("train")) == 4, what="scale up")
    assert cluster.members("train") == ["n-1", "n-2", "n-5", "n-6"]
    await cluster.wait_for(lambda: cluster.status("train").get("observedGeneration") == 2)

    await cluster.patch_pool("train", {"nodes": 2})
    await cluster.wait_for(lambda: len(cluster.members("train")) == 2, what="scale down")
    assert cluster.members("train") == ["n-5", "n-6"], "the most recently joined leave first"
    for name in ("n-1", "n-2"):
        assert not any(k.startswith("accelpool.io/") for k in cluster.labels(name))
        assert cluster.taints(name) == []
        annotations = cluster.node(name)["metadata"].get("annotations") or {}
        assert not any(k.startswith("accelpool.io/") for k in annotations)
    await cluster.wait_for(lambda: cluster.status("train").get("nodes", {}).get("summary") == "2/2")


async def test_delete_leaves_nothing_behind(cluster: Cluster, operator: Operator) -> None:
    foreign = {"example.com/team": "ml", conventions.DEVICE_PLUGIN_CONFIG_LABEL: "admin-config"}
    seed(
        cluster,
        node_body(
            "h100-1", labels=foreign, taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
        ),
        node_body("a100-1", "A100-40GB", labels={conventions.MIG_CONFIG_LABEL: "all-disabled"}),
    )
    before = {n["metadata"]["name"]: n for n in cluster.nodes()}
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8"})
    await cluster.apply_pool("slices", {"accelerator": "A100-40GB", "mig": {"profiles": ["4g.20gb", "3g.20gb"]}})
    await cluster.wait_for(lambda: cluster.members("train") == ["h100-1"] and cluster.members("slices") == ["a100-1"])
    await cluster.wait_for(lambda: cluster.daemonset("train") and cluster.daemonset("slices"))
    assert (
        cluster.labels("h100-1")[conventions.DEVICE_PLUGIN_CONFIG_LABEL]
        == configs_of("train", {"accelerator": "H100:8"}).device_plugin
    )
    assert json.loads(cluster.node("h100-1")["metadata"]["annotations"][conventions.PRIOR_LABELS_ANNOTATION]) == {
        conventions.DEVICE_PLUGIN_CONFIG_LABEL: "admin-config",
        conventions.MIG_CONFIG_LABEL: None,  # a whole-GPU pool sets all-disabled; the node had no MIG config
    }
    assert cluster.labels("h100-1")[conventions.MIG_CONFIG_LABEL] == conventions.MIG_DISABLED_CONFIG
    await cluster.wait_for(lambda: cluster.finalizers("train") == ["accelpool.io/finalizer"])
    await cluster.settle_members("train")  # its agent reports: the condition the release must take away
    assert conventions.HEALTH_CONDITION in {c["type"] for c in cluster.node("h100-1")["status"]["conditions"]}

    await cluster.delete_pool("train")
    await cluster.delete_pool("slices")
    await cluster.wait_for(lambda: cluster.pool("train") is None and cluster.pool("slices") is None, what="deleted")

    h100 = cluster.node("h100-1")
    gfd = ("nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy")  # written by GFD meanwhile, not by us
    after = {k: v for k, v in h100["metadata"]["labels"].items() if k not in gfd}
    assert after == before["h100-1"]["metadata"]["labels"], "labels restored exactly"
    assert h100["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert not any(k.startswith("accelpool.io/") for k in h100["metadata"].get("annotations") or {})
    assert conventions.HEALTH_CONDITION not in {c["type"] for c in h100["status"].get("conditions") or []}
    a100 = cluster.labels("a100-1")
    assert a100[conventions.MIG_CONFIG_LABEL] == "all-disabled", "MIG nodes return to all-disabled"
    assert conventions.POOL_LABEL not in a100 and conventions.DEVICE_PLUGIN_CONFIG_LABEL not in a100
    dp, mig = cluster.configmap(DP_CONFIGMAP), cluster.configmap(MIG_CONFIGMAP)
    assert dp is not None and mig is not None
    assert set(dp["data"]) == {"default"}
    assert set(yaml.safe_load(mig["data"]["config.yaml"])["mig-configs"]) == nvidia.DEFAULT_MIG_CONFIG_NAMES
    assert cluster.daemonset("train") is None and cluster.daemonset("slices") is None
    daemonsets = [
        name
        for (resource, namespace, name), obj in cluster.emulator.objects.items()
        if resource == "apps/v1/daemonsets" and namespace == NAMESPACE and not obj.deleted
    ]
    assert daemonsets == []


def health_left(cluster: Cluster, node: str) -> tuple[bool, set[str]]:
    """Whether the node carries an agent's annotation, and the statuses of its AcceleratorHealthy conditions."""
    body = cluster.node(node)
    annotated = conventions.HEALTH_ANNOTATION in (body["metadata"].get("annotations") or {})
    statuses = {
        c["status"] for c in body["status"].get("conditions") or [] if c["type"] == conventions.HEALTH_CONDITION
    }
    return annotated, statuses


async def test_what_an_agent_writes_after_its_pool_is_deleted_is_removed(cluster: Cluster, operator: Operator) -> None:
    """The pool's agent pod outlives the release of its node (terminating, on a slow node) and writes its
    report once more: a node in no pool keeps nothing an agent wrote."""
    seed(cluster, node_body("h100-1"))
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8"})
    await cluster.wait_for(lambda: cluster.members("train") == ["h100-1"])
    await cluster.settle_members("train")
    await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Ready", what="train Ready")

    await cluster.delete_pool("train")
    await cluster.wait_for(lambda: cluster.pool("train") is None, what="train deleted")
    assert health_left(cluster, "h100-1") == (False, set())

    await cluster.report_health("h100-1", tflops=650.0, pool="train")  # the terminating agent's last report
    await cluster.wait_for(lambda: health_left(cluster, "h100-1") == (False, set()), what="the leftover removed")
    assert conventions.POOL_LABEL not in cluster.labels("h100-1")

    # An Unhealthy verdict stays until it ages out, as on release: a node known to be bad is not claimed.
    await cluster.report_health("h100-1", healthy=False, pool="train")
    await cluster.wait_for(lambda: health_left(cluster, "h100-1") == (False, {"False"}), what="the annotation removed")
    await cluster.apply_pool("next", {"accelerator": "H100:8"})
    await cluster.wait_for(lambda: cluster.status("next").get("phase") == "Pending", what="next Pending")
    assert cluster.members("next") == []


async def test_an_invalid_pool_is_reported_and_nothing_is_touched(cluster: Cluster, operator: Operator) -> None:
    seed(cluster, node_body("h100-1"), node_body("l4-1", "L4", 1))
    await operator.start()
    await cluster.apply_pool("bad", {"accelerator": "L4", "mig": {"profile": "1g.5gb"}})
    await cluster.apply_pool("good", {"accelerator": "H100"})
    await cluster.wait_for(lambda: cluster.status("bad").get("phase") == "Failed", what="bad Failed")
    valid = cluster.condition("bad", "Valid")
    assert valid["status"] == "False" and valid["reason"] == "InvalidSpec"
    assert "does not support MIG" in valid["message"]
    await cluster.wait_for(lambda: cluster.members("good") == ["h100-1"])
    assert cluster.members("bad") == []
    assert not any(k.startswith(("accelpool.io/", "nvidia.com/device-plugin")) for k in cluster.labels("l4-1"))
    dp = cluster.configmap(DP_CONFIGMAP)
    assert dp is not None and "accelpool-bad" not in dp["data"]
    assert cluster.daemonset("bad") is None
