"""The agent's HTTP endpoints (aiohttp): `/metrics` for Prometheus and `/healthz` for the kubelet.

`/metrics` renders the agent's own registry (text format 0.0.4, or OpenMetrics for a client
that accepts only that); rendering reads an immutable snapshot and never touches the devices.
`/healthz` answers 200 while the telemetry loop is alive and 503 once it has stalled.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

Liveness = Callable[[], tuple[bool, str]]


def parse_listen(text: str) -> tuple[str, int]:
    """`0.0.0.0:9402`, `[::]:9402`, `:9402` → (host, port); port 0 picks a free one."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"invalid --listen {text!r}: expected HOST:PORT, e.g. 0.0.0.0:9402")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def make_app(registry: CollectorRegistry, liveness: Liveness) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        accept = request.headers.get("Accept", "")
        # Prometheus lists both formats; the classic text format renders ~30% faster and carries
        # everything these families have, so OpenMetrics is served only to clients that want only it.
        encoder, content_type = choose_encoder("" if "text/plain" in accept else accept)
        body = encoder(registry)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def healthz(_: web.Request) -> web.Response:
        alive, why = liveness()
        return web.Response(status=200 if alive else 503, text=why + "\n")

    async def index(_: web.Request) -> web.Response:
        return web.Response(
            text="<html><body><h1>accelpool device agent</h1>"
            '<p><a href="/metrics">/metrics</a> <a href="/healthz">/healthz</a></p></body></html>',
            content_type="text/html",
        )

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/", index)
    return app


async def start(app: web.Application, host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
