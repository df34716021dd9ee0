"""Where the agent's settings come from: the operator's AgentConfig plus command-line settings.

`AgentConfig` (the protocol model) is read from `--config FILE` (YAML or JSON, camelCase or
snake_case keys) or else from the ACCELPOOL_AGENT_CONFIG environment variable (JSON, what the
DaemonSet sets), or else defaults. `AgentSettings` holds what only the command line decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pydantic
import yaml

from accelpool_agent.compute import ComputeSizes
from accelpool_agent.model import DTYPES
from accelpool_core.protocol import CONFIG_ENV, AgentConfig


class ConfigError(ValueError):
    """The configuration cannot be read or is invalid; the message names the source and the field."""


def load_config(path: str | None, environ: Mapping[str, str]) -> AgentConfig:
    if path:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as error:
            raise ConfigError(f"cannot read --config {path}: {error}") from None
        return _validate(data, f"--config {path}")
    raw = environ.get(CONFIG_ENV)
    if raw:
        try:
            data = yaml.safe_load(raw) or {}
        except yaml.YAMLError as error:
            raise ConfigError(f"{CONFIG_ENV} is not valid JSON: {error}") from None
        return _validate(data, CONFIG_ENV)
    return AgentConfig()


def _validate(data: object, source: str) -> AgentConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of settings, got {type(data).__name__}")
    try:
        return AgentConfig.model_validate(data)
    except pydantic.ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']} (got {e.get('input')!r})"
            for e in error.errors()
        )
        raise ConfigError(f"{source}: {problems}") from None


@dataclass(frozen=True)
class AgentSettings:
    """Settings the command line decides (not part of the operator's AgentConfig)."""

    node_name: str
    backend: str
    telemetry_interval_seconds: float = 2.0
    """Telemetry and XID events are read this often; a fatal XID reaches the node within one tick."""
    inventory_refresh_seconds: float = 60.0
    dtypes: tuple[str, ...] = DTYPES
    """Matmul dtypes measured each cycle (the policy dtype is always added)."""
    parallelism: int = 8
    """GPUs whose compute checks run at the same time (one child process each)."""
    sizes: ComputeSizes | None = None
    """Problem sizes; None picks the engine's defaults."""
    seed: int = 0
