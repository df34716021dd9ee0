"""The shell's small parts: kopf storages that write nothing, the metrics collector, kopf settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kopf
import pytest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from accelpool.runtime import handlers
from accelpool.runtime.metrics import PASS_STAGES, OperatorMetrics, PlanCollector, exposition
from accelpool.runtime.settings import OperatorConfig

from .conftest import member, pool, run


def body(uid: str = "u1") -> kopf.Body:
    return kopf.Body({"metadata": {"name": "p", "uid": uid, "annotations": {}}, "spec": {}})


def test_diff_base_is_kept_in_memory_and_writes_nothing() -> None:
    storage = handlers.MemoryDiffBaseStorage()
    patch = kopf.Patch()
    assert storage.fetch(body=body()) is None
    storage.store(body=body(), patch=patch, essence=kopf.BodyEssence(spec={"nodes": 2}))
    assert not patch
    assert storage.fetch(body=body()) == {"spec": {"nodes": 2}}
    assert storage.fetch(body=body("other")) is None


def test_progress_is_kept_in_memory_but_a_retry_still_touches_the_object() -> None:
    storage = handlers.MemoryProgressStorage()
    patch = kopf.Patch()
    key = kopf.HandlerId("reconcile_pool")
    storage.store(key=key, record=kopf.ProgressRecord(retries=1), body=body(), patch=patch)
    assert not patch
    assert storage.fetch(key=key, body=body()) == {"retries": 1}
    storage.purge(key=key, body=body(), patch=patch)
    assert storage.fetch(key=key, body=body()) is None
    storage.touch(body=body(), patch=patch, value="1")
    annotations = dict(patch["metadata"]["annotations"])
    assert annotations and all(k.startswith("accelpool.io/") for k in annotations)


def test_kopf_settings() -> None:
    settings = kopf.OperatorSettings()
    handlers.configure(settings, OperatorConfig(max_workers=3))
    assert settings.persistence.finalizer == "accelpool.io/finalizer"
    assert isinstance(settings.persistence.diffbase_storage, handlers.MemoryDiffBaseStorage)
    assert isinstance(settings.persistence.progress_storage, handlers.MemoryProgressStorage)
    assert settings.execution.max_workers == 3
    assert settings.posting.level >= 30


def test_metrics_exposition_of_a_plan() -> None:
    quarantined = member(
        "m1",
        "p",
        taints=[{"key": "accelpool.io/quarantined", "value": "XidError79", "effect": "NoSchedule"}],
        health=("False", "XidError79", "fallen off the bus", "2026-11-02T11:00:00Z"),
    )
    metrics = OperatorMetrics()
    metrics.plan = run(
        [
            pool("p", {"accelerator": "H100:8", "nodes": 2}),
            pool("bad", {"accelerator": "L4", "mig": {"profile": "1g.5gb"}}),
        ],
        [quarantined, member("m2", "p")],
    )
    metrics.observe_pass(0.03, True)
    metrics.observe_pass(0.2, False)
    metrics.remediations[("p", "taint")] += 1
    metrics.write("patch", "nodes")
    metrics.stage_seconds["write"] += 0.5
    families = {f.name: f for f in text_string_to_metric_families(exposition(metrics).decode())}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    assert samples[("accelpool_pools", (("phase", "Degraded"),))] == 1
    assert samples[("accelpool_pools", (("phase", "Failed"),))] == 1
    assert samples[("accelpool_pools", (("phase", "Ready"),))] == 0
    assert samples[("accelpool_pool_phase", (("phase", "Degraded"), ("pool", "p")))] == 1
    assert samples[("accelpool_pool_nodes", (("pool", "p"), ("state", "quarantined")))] == 1
    assert samples[("accelpool_pool_nodes", (("pool", "p"), ("state", "desired")))] == 2
    assert samples[("accelpool_pool_gpus", (("pool", "p"),))] == 8, "the quarantined member's GPUs are not served"
    unavailable = "accelpool_pool_unavailable_gpus"
    assert samples[(unavailable, (("pool", "p"), ("reason", "quarantined")))] == 8
    assert samples[(unavailable, (("pool", "p"), ("reason", "burn_in")))] == 0
    assert samples[("accelpool_pool_driver_versions", (("pool", "p"),))] == 0
    assert samples[("accelpool_pool_expected_tflops", (("pool", "p"),))] == 989 * 8, "of the serving GPUs, as measured"
    assert ("accelpool_pool_measured_tflops", (("pool", "p"),)) not in samples, "absent until measured"
    assert samples[("accelpool_pool_circuit_breaker_open", (("pool", "p"),))] == 0
    assert samples[("accelpool_reconcile_total", (("result", "error"),))] == 1
    assert samples[("accelpool_reconcile_errors_total", ())] == 1
    assert samples[("accelpool_reconcile_duration_seconds_count", ())] == 2
    assert samples[("accelpool_reconcile_duration_seconds_bucket", (("le", "0.05"),))] == 1
    assert samples[("accelpool_remediations_total", (("action", "taint"), ("pool", "p")))] == 1
    stages = {dict(labels)["stage"]: v for (name, labels), v in samples.items() if name.endswith("stage_seconds_total")}
    assert stages == {stage: 0.5 if stage == "write" else 0 for stage in PASS_STAGES}, "every stage, from the start"
    assert samples[("accelpool_api_writes_total", (("resource", "nodes"), ("verb", "patch")))] == 1
    assert (
        samples[
            (
                "accelpool_pool_info",
                (
                    ("accelerator", "H100-80GB x8"),
                    ("mig_strategy", "none"),
                    ("pool", "p"),
                    ("provisioner", "static"),
                    ("sharing", "none"),
                ),
            )
        ]
        == 1
    )
    assert families["accelpool_reconcile_duration_seconds"].type == "histogram"
    assert families["accelpool_remediations"].type == "counter"


def test_the_pools_series_are_rendered_once_per_plan_and_the_counters_every_scrape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    renders: list[object] = []
    collect = PlanCollector.collect

    def counted(collector: PlanCollector) -> Iterator[Metric]:
        renders.append(collector)
        yield from collect(collector)

    monkeypatch.setattr(PlanCollector, "collect", counted)
    metrics = OperatorMetrics()
    metrics.plan = run([pool("p", {"accelerator": "H100:8", "nodes": 1})], [member("m1", "p")])
    first = exposition(metrics).decode()
    metrics.observe_pass(0.03, True)
    second = exposition(metrics).decode()
    assert len(renders) == 1, "the same plan: its series rendered once"
    assert 'accelpool_pool_nodes{pool="p",state="members"} 1.0' in second
    assert 'accelpool_reconcile_total{result="success"} 0.0' in first
    assert 'accelpool_reconcile_total{result="success"} 1.0' in second, "the counters as they are now"
    metrics.plan = run([pool("p", {"accelerator": "H100:8", "nodes": 2})], [member("m1", "p"), member("m2", "p")])
    third = exposition(metrics).decode()
    assert len(renders) == 2 and 'accelpool_pool_nodes{pool="p",state="members"} 2.0' in third, "a new plan: rendered"
    families = [f.name for f in text_string_to_metric_families(third)]
    assert len(families) == len(set(families)) and families[0] == "accelpool_pools"


async def test_the_webhook_startup_handler_stops_kopf_without_a_certificate(tmp_path: Path) -> None:
    """Under `kopf run` (no `accelpool run` pre-check) the missing file is a permanent startup failure."""
    config = OperatorConfig(webhook_cert_dir=str(tmp_path / "missing"))
    with pytest.raises(kopf.PermanentError, match=r"missing/tls\.crt not found"):
        await handlers.serve_webhook(config)


async def test_the_webhook_startup_handler_does_nothing_with_port_zero(tmp_path: Path) -> None:
    config = OperatorConfig(webhook_port=0, webhook_cert_dir=str(tmp_path / "missing"))
    assert await handlers.serve_webhook(config) is None
