"""The `accelpool.io/health` annotation stays readable across agent versions."""

from __future__ import annotations

from accelpool_core.protocol import HealthReport, HealthStatus


def test_an_annotation_from_an_older_agent_still_parses() -> None:
    old = '{"badGpus":[3],"gpus":8,"message":"XID 79 on GPU 3","reason":"XidError79","status":"Unhealthy"}'
    report = HealthReport.from_annotation(old)
    assert (report.status, report.bad_gpus, report.pool, report.agent, report.verdicts) == (
        HealthStatus.UNHEALTHY,
        [3],
        None,
        None,
        {},
    )


def test_fields_from_a_newer_agent_are_ignored() -> None:
    newer = '{"reason":"AllChecksPassed","status":"Healthy","somethingNew":{"x":1}}'
    assert HealthReport.from_annotation(newer).reason == "AllChecksPassed"


def test_writer_and_verdicts_round_trip_compactly() -> None:
    text = (
        '{"agent":"accelpool-agent-x7k2p","pool":"llm-training","reason":"WrongResults","status":"Unhealthy",'
        '"verdicts":{"GPU-0":{"correctness":{"reason":"WrongResults","since":"2026-01-01T00:00:00Z","status":"fail"}}}}'
    )
    report = HealthReport.from_annotation(text)
    assert report.verdicts["GPU-0"]["correctness"].status == "fail"
    assert HealthReport.from_annotation(report.to_annotation()) == report.model_copy(update={"checked_at": None})
    assert '"since":"2026-01-01T00:00:00Z"' in report.to_annotation()


def test_a_report_without_device_uuids_is_not_gpu_scoped() -> None:
    """An older agent names bad GPUs by index only: the operator cannot find them in a ResourceSlice."""
    old = (
        '{"badGpus":[3],"reason":"XidError79","status":"Unhealthy",'
        '"findings":[{"check":"xid","severity":"CRITICAL","reason":"XidError79","gpus":[3]}]}'
    )
    assert not HealthReport.from_annotation(old).gpu_scoped()
    newer = old[:-1] + ',"badDevices":[{"index":3,"uuid":"GPU-3","reason":"XidError79"}]}'
    assert HealthReport.from_annotation(newer).gpu_scoped()
