"""A real Prometheus for contract tests: a temporary directory, 127.0.0.1 only, a free port, a
one-second scrape interval, bounded waits, and always stopped.

`Prometheus.start(binary, targets)` writes a scrape config (one job per `ScrapeTarget`, with the
static labels a PodMonitor/ServiceMonitor would add in a cluster), starts the server and waits
until it is ready; `query(expr)` evaluates PromQL at the current time through the HTTP API.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from accelpool_demo.simulators import free_port

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], *, timeout: float, interval: float = 0.2) -> T:
    """Poll `probe` until it returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def http_get(url: str, *, timeout: float = 5.0) -> str | None:
    """The body of a 200 answer, or None when the server is not (yet) answering."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body: bytes = response.read()
            return body.decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


@dataclass(frozen=True)
class ScrapeTarget:
    """One scrape job of one target; `labels` and `honor_labels` play the chart's monitors' part."""

    job: str
    address: str
    labels: dict[str, str] = field(default_factory=dict)
    honor_labels: bool = False


class Prometheus:
    def __init__(self, process: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.process = process
        self.url = url
        self.log = log

    @classmethod
    @contextlib.contextmanager
    def start(
        cls, binary: str, workdir: Path, targets: Sequence[ScrapeTarget], *, timeout: float = 30.0
    ) -> Iterator[Prometheus]:
        port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": f"{target.job}-{index}",
                    "honor_labels": target.honor_labels,
                    "static_configs": [{"targets": [target.address], "labels": {"job": target.job, **target.labels}}],
                }
                for index, target in enumerate(targets)
            ],
        }
        config_path = workdir / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(config))
        log = workdir / "prometheus.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config_path}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--web.enable-lifecycle",
                    "--storage.tsdb.retention.time=1h",
                    "--log.level=warn",
                ],
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        server = cls(process, f"http://127.0.0.1:{port}", log)
        try:
            wait_for(
                "prometheus /-/ready", lambda: server.alive() and http_get(f"{server.url}/-/ready"), timeout=timeout
            )
            yield server
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)

    def alive(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"prometheus exited with {self.process.returncode}:\n{self.log.read_text()[-3000:]}")
        return True

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                payload = json.loads(response.read())
        except urllib.error.HTTPError as error:
            payload = json.loads(error.read() or b"{}")
            raise PromQLError(f"{params}: {payload.get('errorType')}: {payload.get('error')}") from error
        if payload.get("status") != "success":
            raise PromQLError(f"{params}: {payload}")
        return payload["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant vector (or scalar as one sample) of `expr` now."""
        data = self.api("query", query=expr)
        if data["resultType"] == "vector":
            result: list[dict[str, Any]] = data["result"]
            return result
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        raise PromQLError(f"{expr}: unexpected result type {data['resultType']}")

    def label_values(self, selector: str, label: str) -> set[str]:
        """What Grafana's `label_values(selector, label)` offers: the label's values on matching series."""
        series = self.api("series", **{"match[]": selector, "start": str(time.time() - 300)})
        return {s[label] for s in series if label in s}


class PromQLError(Exception):
    """Prometheus refused a query (syntax error, bad function) or answered with an error."""
