"""`accelpool-agent check`: the JSON report, exit codes, and errors for bad input (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelpool_agent.cli import main


def run_check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    code = main(["check", "--backend", "fake", "--json", "--log-level", "ERROR", *args])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_healthy_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_check(capsys, "--fake-gpus", "H100:8")
    assert code == 0
    assert report["healthy"] is True
    assert (report["status"], report["reason"]) == ("Healthy", "AllChecksPassed")
    gpus = report["gpus"]
    assert isinstance(gpus, list) and len(gpus) == 8
    first = gpus[0]
    assert {"index", "uuid", "model", "telemetry", "checks", "matmul_tflops", "status", "reason"} <= set(first)
    assert first["model"] == "H100-80GB"
    assert first["telemetry"]["power_limit_watts"] == 700.0
    names = {c["name"] for c in first["checks"]}
    assert {"sanity", "correctness", "matmul", "bandwidth", "xid", "ecc", "thermal"} <= names
    for check in first["checks"]:
        assert {"name", "status", "value", "unit", "reason", "message"} <= set(check)
    matmul = next(c for c in first["checks"] if c["name"] == "matmul")
    assert (matmul["status"], matmul["unit"], matmul["dtype"]) == ("pass", "TFLOPS", "bf16")


def test_xid_fault_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_check(capsys, "--fake-gpus", "H100:8", "--fault", "3:xid=79")
    assert code == 1
    assert report["healthy"] is False
    assert (report["status"], report["reason"]) == ("Unhealthy", "XidError79")
    assert report["bad_gpus"] == [3]
    gpu3 = report["gpus"][3]  # type: ignore[index]
    xid = next(c for c in gpu3["checks"] if c["name"] == "xid")
    assert (xid["status"], xid["reason"]) == ("fail", "XidError79")


def test_a_corrupt_gpu_kept_busy_is_not_reported_healthy(capsys: pytest.CaptureFixture[str]) -> None:
    """GPU 0 computes wrong results but a workload keeps it busy: its checks cannot run, and "not
    checked" must not read as AllChecksPassed."""
    code, report = run_check(capsys, "--fake-gpus", "H100:8", "--fault", "0:wrong-results,busy")
    assert code == 1 and report["healthy"] is False
    assert (report["status"], report["reason"]) == ("Unknown", "ChecksSkipped")
    assert str(report["message"]).startswith("compute checks not run: GpuBusy on GPU 0")


def test_repeated_faults_and_all(capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_check(capsys, "--fake-gpus", "A100-80GB:4", "--fault", "all:hot", "--fault", "2:ecc-dbe")
    assert code == 1
    assert report["bad_gpus"] == [2]
    gpus = report["gpus"]
    assert isinstance(gpus, list)
    assert all(g["status"] in ("warn", "fail") for g in gpus)


def test_hang_is_reported_after_the_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    """Every GPU hangs, so every check is killed at the timeout whatever the machine's load: a healthy GPU
    beside a hung one would have to start its compute child and answer within the 1 s as well, which a
    loaded machine does not promise (ProcessRunner counts the child's start-up in the timeout)."""
    code, report = run_check(capsys, "--fake-gpus", "L4:2", "--fault", "all:hang", "--check-timeout", "1")
    assert code == 1
    assert report["reason"] == "CheckTimeout"
    assert report["message"] == "sanity check timed out after 1 s on GPUs 0, 1"
    gpus = report["gpus"]
    assert isinstance(gpus, list)
    for gpu in gpus:
        checks = {c["name"]: (c["status"], c["reason"]) for c in gpu["checks"]}
        assert checks["sanity"] == ("fail", "CheckTimeout")
        assert checks["matmul"] == ("skip", "NotRun"), "the checks after the killed one are not run"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fault", "3:xdi=79"], "unknown fault 'xdi'; valid faults: xid=<n>, ecc-dbe"),
        (["--fault", "9:lost"], "GPU 9 does not exist; valid GPU indexes: 0-7"),
        (["--fake-gpus", "H1000:8"], "unknown accelerator 'H1000'; did you mean"),
        (["--fake-gpus", "H100:many"], "count 'many' must be an integer from 0 to 64"),
        (["--dtypes", "fp64"], "valid dtypes: fp32, tf32, fp16, bf16"),
        (["--backend", "rocm"], "invalid choice: 'rocm'"),
    ],
)
def test_bad_input_exits_2_naming_value_and_choices(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["check", "--backend", "fake", "--fake-gpus", "H100:8", *args])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_faults_need_the_fake_backend(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["check", "--backend", "cpu", "--fault", "0:lost"])
    assert exit_.value.code == 2
    assert "--fault needs --backend fake" in capsys.readouterr().err


def test_config_file_errors_name_the_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("matmul: {dtype: bf16, minEfficiency: 3}\n")
    with pytest.raises(SystemExit) as exit_:
        main(["check", "--backend", "fake", "--config", str(config)])
    assert exit_.value.code == 2
    assert "matmul.minEfficiency" in capsys.readouterr().err


def test_config_file_policy_applies(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("pool: llm\nmatmul: {dtype: fp16, minEfficiency: 0.95}\n")
    code, report = run_check(capsys, "--fake-gpus", "H100:2", "--config", str(config))
    assert code == 1
    assert (report["reason"], report["pool"], report["dtype"]) == ("SlowMatmul", "llm", "fp16")


def test_human_output(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--backend", "fake", "--fake-gpus", "H100:2", "--fault", "1:wrong-results"])
    out = capsys.readouterr().out
    assert code == 1
    assert "Unhealthy — WrongResults" in out
    assert "fail: correctness: WrongResults" in out


def test_check_reads_infiniband_under_the_sysfs_root(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    port = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    (port / "counters").mkdir(parents=True)
    for name, text in {"state": "1: DOWN\n", "phys_state": "2: Polling\n", "link_layer": "InfiniBand\n"}.items():
        (port / name).write_text(text)
    code = main(["check", "--backend", "cpu", "--json", "--log-level", "ERROR", "--sysfs-root", str(tmp_path)])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert (report["reason"], report["action"]) == ("IbPortDown", "restart-os")
    assert report["infiniband"][0]["port"] == "mlx5_0/1"
    assert report["findings"][0]["check"] == "infiniband"


def test_check_without_a_backend_simulates_with_fake_gpus_and_names_each_vendors_devices(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ACCELPOOL_AGENT_BACKEND", raising=False)
    for gpus, name in (("MI300X:2", "AMD Instinct MI300X"), ("Trainium2:2", "Trainium2"), ("TPU-v5p:2", "TPU v5p")):
        assert main(["check", "--fake-gpus", gpus, "--json", "--log-level", "ERROR"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["backend"] == "fake"
        assert {gpu["name"] for gpu in report["gpus"]} == {name}
