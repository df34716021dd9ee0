"""Where the agent's AgentConfig comes from: a file (YAML/JSON, camelCase or snake_case) or the env."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelpool_agent.backends import BackendError, create_backend, detect_model
from accelpool_agent.config import ConfigError, load_config
from accelpool_core.protocol import CONFIG_ENV, AgentConfig


def test_defaults_without_file_or_env() -> None:
    assert load_config(None, {}) == AgentConfig()


def test_env_json_as_the_operator_renders_it() -> None:
    rendered = AgentConfig(
        pool="llm-training",
        accelerator="H100-80GB",
        expected_tflops={"bf16": 989.0},
        expected_gpus=8,
    ).model_dump_json(by_alias=True)
    config = load_config(None, {CONFIG_ENV: rendered})
    assert (config.pool, config.expected_tflops, config.expected_gpus) == ("llm-training", {"bf16": 989.0}, 8)


def test_yaml_file_in_either_case(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("pool: p\ncheckTimeoutSeconds: 30\nmatmul:\n  dtype: fp16\n  min_efficiency: 0.7\n")
    config = load_config(str(path), {CONFIG_ENV: '{"pool": "ignored"}'})
    assert (config.pool, config.check_timeout_seconds, config.matmul.dtype, config.matmul.min_efficiency) == (
        "p",
        30,
        "fp16",
        0.7,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("intervalSeconds: -1", "intervalSeconds: Input should be greater than 0"),
        ("bogus: 1", "bogus: Extra inputs are not permitted"),
        ("- a list", "expected a mapping"),
    ],
)
def test_invalid_files_name_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(str(path), {})


def test_missing_file_and_bad_env() -> None:
    with pytest.raises(ConfigError, match="cannot read --config"):
        load_config("/nonexistent/agent.yaml", {})
    with pytest.raises(ConfigError, match=CONFIG_ENV):
        load_config(None, {CONFIG_ENV: '{"pool": '})


def test_backend_factory_errors() -> None:
    with pytest.raises(BackendError, match="unknown backend 'rocm'; valid: nvml, amdsmi, neuron, tpu, cuda, cpu, fake"):
        create_backend("rocm")
    with pytest.raises(BackendError, match="need --backend fake"):
        create_backend("cpu", fake_gpus="H100:8")
    assert create_backend("fake", fake_gpus="L4:3").inventory()[2].model == "L4"


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("Tesla T4", "T4"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_detect_model_from_the_driver_name(name: str, model: str | None) -> None:
    found = detect_model(name)
    assert (found.name if found else None) == model
