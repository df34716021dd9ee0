"""`accelpool plan` (its JSON is a stable interface) and `accelpool run`'s settings."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
from pathlib import Path

import pytest

from accelpool import cli
from accelpool.model import nvidia
from accelpool.runtime.settings import OPTIONS, OperatorConfig, add_arguments, as_flag
from accelpool_api import conventions

from .conftest import LOCAL_FIXTURE, ROOT, device_plugin_key, mig_entry_name

EXAMPLES = ROOT / "examples"
NOW = "2026-11-02T12:00:00Z"

POOLS_YAML = """\
apiVersion: accelpool.io/v1alpha1
kind: ComputePool
metadata: {name: llm-training}
spec:
  accelerator: H100:8
  nodes: 2
---
apiVersion: accelpool.io/v1alpha1
kind: ComputePool
metadata: {name: slices}
spec:
  accelerator: {name: A100, memory: 40GB}
  nodes: 1
  mig: {profile: 3g.20gb}
---
apiVersion: accelpool.io/v1alpha1
kind: ComputePool
metadata: {name: broken}
spec:
  accelerator: L4
  mig: {profile: 1g.5gb}
"""


BURN_IN = {"key": "accelpool.io/burn-in", "value": "pending", "effect": "NoSchedule"}
SLICES_SPEC = {"accelerator": {"name": "A100", "memory": "40GB"}, "nodes": 1, "mig": {"profile": "3g.20gb"}}
SLICES_KEY, SLICES_ENTRY = device_plugin_key("slices", SLICES_SPEC), mig_entry_name("slices", SLICES_SPEC)
TRAINING_KEY = device_plugin_key("llm-training", {"accelerator": "H100:8", "nodes": 2})
SHRINK_SPEC = {"accelerator": "H100", "nodes": 1, "mig": {"profile": "7g.80gb"}}
SHRINK_KEY, SHRINK_ENTRY = device_plugin_key("shrink", SHRINK_SPEC), mig_entry_name("shrink", SHRINK_SPEC)


def plan_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOLS_YAML)
    code = cli.main(["plan", "-f", str(pools), "--nodes", str(LOCAL_FIXTURE), "-o", "json", "--now", NOW, *extra])
    assert code == 0
    loaded: dict[str, object] = json.loads(capsys.readouterr().out)
    return loaded


def test_plan_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = plan_json(tmp_path, capsys)
    assert list(document) == ["pools", "nodePatches", "devicePluginConfig", "migConfig"]
    pools = {p["name"]: p for p in document["pools"]}  # type: ignore[attr-defined]
    assert set(pools) == {"llm-training", "slices", "broken"}
    for entry in pools.values():
        assert list(entry) == ["name", "members", "phase", "conditions"]
        for condition in entry["conditions"]:
            assert list(condition) == ["type", "status", "reason", "message"]
    assert pools["llm-training"]["members"] == ["h100-1", "h100-2"]
    assert pools["llm-training"]["phase"] == "Configuring"
    assert pools["slices"]["members"] == ["a100-40-1"]
    assert pools["broken"]["phase"] == "Failed"
    assert pools["broken"]["members"] == []
    assert pools["broken"]["conditions"][0]["type"] == "Valid"
    assert pools["broken"]["conditions"][0]["status"] == "False"

    patches = document["nodePatches"]
    assert patches == {  # every member, with the labels and taints it will carry; nothing for the invalid pool
        "a100-40-1": {
            "labels": {
                conventions.POOL_LABEL: "slices",
                conventions.DEVICE_PLUGIN_CONFIG_LABEL: SLICES_KEY,
                conventions.MIG_CONFIG_LABEL: SLICES_ENTRY,
            },
            "taints": {
                "add": [
                    {"key": "accelpool.io/pool", "value": "slices", "effect": "NoSchedule"},
                    BURN_IN,  # joining nodes serve only once they pass burn-in
                ],
                "remove": [],
            },
        },
        "h100-1": {
            "labels": {
                conventions.POOL_LABEL: "llm-training",
                conventions.DEVICE_PLUGIN_CONFIG_LABEL: TRAINING_KEY,
                conventions.MIG_CONFIG_LABEL: "all-disabled",  # whole GPUs of a MIG-capable model
            },
            "taints": {
                "add": [{"key": "accelpool.io/pool", "value": "llm-training", "effect": "NoSchedule"}, BURN_IN],
                "remove": [],
            },
        },
        "h100-2": {
            "labels": {
                conventions.POOL_LABEL: "llm-training",
                conventions.DEVICE_PLUGIN_CONFIG_LABEL: TRAINING_KEY,
                conventions.MIG_CONFIG_LABEL: "all-disabled",  # whole GPUs of a MIG-capable model
            },
            "taints": {
                "add": [{"key": "accelpool.io/pool", "value": "llm-training", "effect": "NoSchedule"}, BURN_IN],
                "remove": [],
            },
        },
    }
    assert document["devicePluginConfig"] == {
        TRAINING_KEY: {"version": "v1", "flags": {"migStrategy": "none"}},
        SLICES_KEY: {"version": "v1", "flags": {"migStrategy": "single"}},
        "default": {"version": "v1", "flags": {"migStrategy": "single"}},
    }
    assert document["migConfig"] == {
        "version": "v1",
        "mig-configs": {
            **nvidia.default_mig_configs(),
            SLICES_ENTRY: [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}],
        },
    }


def test_plan_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert plan_json(tmp_path, capsys) == plan_json(tmp_path, capsys)


def test_plan_from_a_stream_of_nodes_and_releases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        """\
apiVersion: v1
kind: Node
metadata:
  name: old-member
  labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3, nvidia.com/gpu.count: '8', accelpool.io/pool: shrink,
           nvidia.com/device-plugin.config: SHRINK_KEY, nvidia.com/mig.config: SHRINK_ENTRY}
  annotations: {accelpool.io/joined-at: '2026-11-01T00:00:00Z'}
spec:
  taints: [{key: accelpool.io/pool, value: shrink, effect: NoSchedule}]
status:
  conditions: [{type: Ready, status: 'True'}]
---
apiVersion: v1
kind: Node
metadata:
  name: older-member
  labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3, nvidia.com/gpu.count: '8', accelpool.io/pool: shrink,
           nvidia.com/device-plugin.config: SHRINK_KEY, nvidia.com/mig.config: SHRINK_ENTRY}
  annotations: {accelpool.io/joined-at: '2026-10-01T00:00:00Z'}
spec:
  taints: [{key: accelpool.io/pool, value: shrink, effect: NoSchedule}]
status:
  conditions: [{type: Ready, status: 'True'}]
""".replace("SHRINK_KEY", SHRINK_KEY).replace("SHRINK_ENTRY", SHRINK_ENTRY)
    )
    pools = tmp_path / "pools.yaml"
    pools.write_text(
        "apiVersion: accelpool.io/v1alpha1\nkind: ComputePool\nmetadata: {name: shrink}\n"
        "spec: {accelerator: H100, nodes: 1, mig: {profile: 7g.80gb}}\n"
    )
    assert cli.main(["plan", "-f", str(pools), "--nodes", str(nodes), "-o", "json", "--now", NOW]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["pools"][0]["members"] == ["older-member"]
    assert document["nodePatches"]["old-member"] == {
        "labels": {
            conventions.DEVICE_PLUGIN_CONFIG_LABEL: None,
            conventions.MIG_CONFIG_LABEL: "all-disabled",
            conventions.POOL_LABEL: None,
        },
        "taints": {"add": [], "remove": [{"key": "accelpool.io/pool", "value": "shrink", "effect": "NoSchedule"}]},
    }


def test_plan_table_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["plan", "-f", str(EXAMPLES), "--nodes", str(LOCAL_FIXTURE), "--now", NOW])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0].split() == ["POOL", "ACCELERATOR", "NODES", "PHASE", "MEMBERS"]
    assert "llm-training" in out and "device-plugin config keys:" in out
    assert cli.main(["plan", "-f", str(tmp_path / "missing.yaml"), "--nodes", str(LOCAL_FIXTURE)]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert cli.main(["plan", "-f", str(EXAMPLES), "--nodes", str(LOCAL_FIXTURE), "--now", "yesterday"]) == 2


def test_plan_reports_invalid_pools_on_stderr_and_still_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOLS_YAML)
    assert cli.main(["plan", "-f", str(pools), "--nodes", str(LOCAL_FIXTURE), "-o", "json", "--now", NOW]) == 0
    err = capsys.readouterr().err
    assert err.strip() == "invalid pools (Valid=False, nothing planned for them): broken"


def test_run_settings_flags_over_environment_over_defaults() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, {"ACCELPOOL_AGENT_IMAGE": "env/agent:1", "ACCELPOOL_METRICS_PORT": "9000"})
    config = OperatorConfig.from_args(
        parser.parse_args(["--namespace", "gpu-operator", "--metrics-port", "9100", "--agent-runtime-class", ""])
    )
    assert config.namespace == "gpu-operator"
    assert config.agent.namespace == "gpu-operator", "agents default to the ConfigMaps' namespace"
    assert config.metrics_port == 9100
    assert config.agent.image == "env/agent:1"
    assert config.agent.runtime_class is None
    assert config.liveness_endpoint == "http://0.0.0.0:8081/healthz"
    defaults = OperatorConfig.from_env({})
    assert (defaults.namespace, defaults.device_plugin_configmap, defaults.mig_configmap) == (
        "accelpool-system",
        "accelpool-device-plugin-config",
        "accelpool-mig-parted-config",
    )
    from_env = OperatorConfig.from_env(
        {"ACCELPOOL_AGENT_NAMESPACE": "agents", "ACCELPOOL_DEBOUNCE": "250ms", "ACCELPOOL_AGENT_PRIVILEGED": "true"}
    )
    assert (from_env.agent.namespace, from_env.debounce_seconds, from_env.agent.privileged) == ("agents", 0.25, True)
    chart_style = parser.parse_args(["--config-namespace", "nv", "--liveness", "http://0.0.0.0:9/healthz"])
    assert OperatorConfig.from_args(chart_style).liveness_endpoint == "http://0.0.0.0:9/healthz"
    assert OperatorConfig.from_args(chart_style).namespace == "nv"


def test_every_setting_is_a_flag_declared_once_with_its_default() -> None:
    """`OperatorConfig`'s fields are the flags: no field without a flag, and each default written in the form
    its flag parses to, so the help, the environment and the dataclass cannot disagree."""
    assert [option.dest for option in OPTIONS] == [f.name for f in dataclasses.fields(OperatorConfig)]
    parser = argparse.ArgumentParser()
    add_arguments(parser, {})
    assert OperatorConfig.from_args(parser.parse_args([])) == OperatorConfig() == OperatorConfig.from_env({})
    for option in OPTIONS:
        if option.parse is not str and option.default is not None:
            assert option.parse(as_flag(option.default)) == option.default, option.flag
    assert "default:'nvidia.com/gpu,amd.com/gpu," in "".join(parser.format_help().split())


def test_webhook_settings_default_on_and_port_zero_turns_it_off() -> None:
    defaults = OperatorConfig.from_env({})
    assert (defaults.webhook_port, defaults.webhook_cert_dir) == (9443, "/etc/accelpool/webhook")
    from_env = OperatorConfig.from_env({"ACCELPOOL_WEBHOOK_PORT": "0", "ACCELPOOL_WEBHOOK_CERT_DIR": "/certs"})
    assert (from_env.webhook_port, from_env.webhook_cert_dir) == (0, "/certs")
    parser = argparse.ArgumentParser()
    add_arguments(parser, {"ACCELPOOL_WEBHOOK_PORT": "0"})
    assert OperatorConfig.from_args(parser.parse_args([])).webhook_port == 0
    assert OperatorConfig.from_args(parser.parse_args(["--webhook-port", "8443"])).webhook_port == 8443


def test_run_without_the_webhook_certificate_stops_naming_the_path_and_the_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "not-mounted"
    assert cli.main(["run", f"--webhook-cert-dir={missing}", "--server=http://127.0.0.1:9"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: webhook certificate file {missing / 'tls.crt'} not found.")
    for hint in ("webhook.enabled", "webhook.certManager.enabled", "--webhook-port=0", "ACCELPOOL_WEBHOOK_CERT_DIR"):
        assert hint in error, hint
    missing.mkdir()
    (missing / "tls.crt").write_text("not a certificate")
    (missing / "tls.key").write_text("not a key")
    assert cli.main(["run", f"--webhook-cert-dir={missing}", "--server=http://127.0.0.1:9"]) == 2
    assert "cannot load the webhook certificate" in capsys.readouterr().err


def test_demo_is_a_plugin_and_says_how_to_install_it_when_absent(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`accelpool demo` comes from accelpool-demo's entry point; the operator alone names what to install."""
    assert "demo" in {e.name for e in importlib.metadata.entry_points(group=cli.PLUGIN_GROUP)}  # installed here
    monkeypatch.setattr("accelpool.cli.entry_points", lambda group: ())
    assert cli.main(["demo", "--for", "5"]) == 2
    error = capsys.readouterr().err
    assert "accelpool-demo" in error and "pip install -e ./demo" in error and "accelpool[demo]" in error
