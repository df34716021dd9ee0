"""The agent's HTTP endpoints (aiohttp): `/metrics` for Prometheus, `/healthz` and `/readyz` for the kubelet.

`/metrics` renders the agent's own registry (text format 0.0.4, or OpenMetrics for a client
that accepts only that); rendering reads an immutable snapshot and never touches the devices.
It runs off the event loop, in one dedicated thread (`MetricsRenderer`): concurrent scrapers
share one render, and a render is reused for `cache_seconds`, so a crowd of scrapers costs one
render and can never delay the health endpoints.

`/healthz` (liveness) answers 200 while the telemetry loop is alive and 503 once it has stalled.
`/readyz` (readiness) answers 200 once the first telemetry tick has been taken and until the
agent is stopping (SIGTERM). Neither touches a GPU: both read in-memory state on the loop.
A GPU's health never makes the agent unready: an agent on a bad GPU must keep reporting.

Slow clients are bounded: an idle or half-sent connection is closed after
`KEEPALIVE_TIMEOUT_SECONDS`, and a request whose handler takes longer than
`REQUEST_TIMEOUT_SECONDS` is answered 503.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, generate_latest

from accelpool_agent.exposition import render_text
from accelpool_core.shared_render import SharedRender

Liveness = Callable[[], tuple[bool, str]]

KEEPALIVE_TIMEOUT_SECONDS = 15.0
"""An idle connection (or one that never finishes its request headers) is closed after this long."""
REQUEST_TIMEOUT_SECONDS = 10.0
"""A request not answered within this long gets a 503 (Prometheus' default scrape timeout is 10 s)."""


def parse_listen(text: str) -> tuple[str, int]:
    """`0.0.0.0:9402`, `[::]:9402`, `:9402` → (host, port); port 0 picks a free one."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"invalid --listen {text!r}: expected HOST:PORT, e.g. 0.0.0.0:9402")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


class MetricsRenderer:
    """Renders the registry in one dedicated thread; one render is shared by concurrent scrapers
    and reused for `cache_seconds` (by the event loop's clock): `accelpool_core.shared_render`."""

    def __init__(self, registry: CollectorRegistry, *, cache_seconds: float = 1.0) -> None:
        self.registry = registry
        self._shared = SharedRender[bytes](cache_seconds=cache_seconds, thread_name="accelpool-metrics")

    @property
    def renders(self) -> int:
        return self._shared.renders

    async def render(self, accept: str) -> tuple[bytes, str]:
        encoder, content_type = choose_encoder(accept)
        if encoder is generate_latest:
            encoder = render_text  # the same bytes, faster (accelpool_agent.exposition)
        # The registry reads the agent's immutable snapshot: nothing to copy on the loop first.
        body = await self._shared.get(content_type, lambda: functools.partial(encoder, self.registry))
        return body, content_type

    def close(self) -> None:
        self._shared.close()


def make_app(
    registry: CollectorRegistry,
    liveness: Liveness,
    readiness: Liveness | None = None,
    *,
    renderer: MetricsRenderer | None = None,
) -> web.Application:
    renderer = renderer or MetricsRenderer(registry)

    async def metrics(request: web.Request) -> web.Response:
        accept = request.headers.get("Accept", "")
        # Prometheus lists both formats; the classic text format renders ~30% faster and carries
        # everything these families have, so OpenMetrics is served only to clients that want only it.
        body, content_type = await renderer.render("" if "text/plain" in accept else accept)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def healthz(_: web.Request) -> web.Response:
        alive, why = liveness()
        return web.Response(status=200 if alive else 503, text=why + "\n")

    async def readyz(_: web.Request) -> web.Response:
        ready, why = readiness() if readiness is not None else liveness()
        return web.Response(status=200 if ready else 503, text=why + "\n")

    async def index(_: web.Request) -> web.Response:
        return web.Response(
            text="<html><body><h1>accelpool device agent</h1>"
            '<p><a href="/metrics">/metrics</a> <a href="/healthz">/healthz</a> <a href="/readyz">/readyz</a></p>'
            "</body></html>",
            content_type="text/html",
        )

    @web.middleware
    async def deadline(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
                return await handler(request)
        except TimeoutError:
            return web.Response(status=503, text=f"not answered within {REQUEST_TIMEOUT_SECONDS:g} s\n")

    async def close_renderer(_: web.Application) -> None:
        renderer.close()

    app = web.Application(middlewares=[deadline])
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/", index)
    app.on_cleanup.append(close_renderer)
    return app


async def start(app: web.Application, host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=KEEPALIVE_TIMEOUT_SECONDS, shutdown_timeout=2.0)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
