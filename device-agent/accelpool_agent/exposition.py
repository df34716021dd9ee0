"""The Prometheus text format (0.0.4) of the agent's registry, byte for byte what
`prometheus_client.generate_latest` writes, in a fraction of its time.

`generate_latest` validates and escapes every label *name* of every sample (UTF-8 metric-name
support) and formats each line through several layers; with NVLink, fabric and InfiniBand
series an 8-GPU node has some 800 samples and that cost dominates a scrape. The agent's label
names are fixed snake_case identifiers (tests/unit/agent/test_metrics.py checks them), so only
label *values* need escaping (backslash, newline, double quote), and only when they contain one.
The families the agent emits are gauges, counters and infos without timestamps or `_created`
samples; `render_text` handles exactly those and the test suite compares it with
`generate_latest` on real snapshots. OpenMetrics (for a client that accepts only that) still goes
through prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

_number: Callable[[float], str] = floatToGoString
"""Go's float formatting (`+Inf`, `1e+06`), as prometheus_client writes sample values."""

_TYPES = {"counter": "counter", "gauge": "gauge", "info": "gauge", "stateset": "gauge", "unknown": "untyped"}
_SUFFIX = {"counter": "_total", "info": "_info"}


def _escape(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def render_text(registry: Collector) -> bytes:
    """The registry in the text format, as `generate_latest(registry)` renders the agent's families."""
    out: list[str] = []
    for metric in registry.collect():
        name = metric.name + _SUFFIX.get(metric.type, "")
        documentation = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {name} {documentation}\n# TYPE {name} {_TYPES.get(metric.type, metric.type)}\n")
        for sample in metric.samples:
            labels = sample.labels
            if labels:
                pairs = ",".join(f'{key}="{_escape(labels[key])}"' for key in sorted(labels))
                out.append(f"{sample.name}{{{pairs}}} {_number(sample.value)}\n")
            else:
                out.append(f"{sample.name} {_number(sample.value)}\n")
    return "".join(out).encode()
