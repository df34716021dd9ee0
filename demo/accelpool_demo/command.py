"""`accelpool demo`: accelpool on a simulated GPU cluster, no Kubernetes needed.

accelpool demo                         live table until Ctrl-C
accelpool demo --for 2m --no-tui       run 2 minutes, print the final table (exit 1 unless all Ready)
accelpool demo --until-ready --for 5m  stop once every pool is Ready (exit 0), or after 5 minutes (exit 1)
accelpool demo inject h100-1 xid=79    give h100-1's agent a fault (GPU 0; '3:xid=79' for GPU 3)
accelpool demo inject h100-1 mig-broken            h100-1's MIG manager reports success, creates nothing
accelpool demo inject - strategy-override=single   cluster-wide MIG strategy (off to remove; no node)
accelpool demo inject h100-1 no-runtime-class  no nvidia RuntimeClass; h100-1's agent pod cannot come back
accelpool demo inject h100-1 clear     remove h100-1's faults (and bring the RuntimeClass back)

Where it finds what it runs, from any working directory (never relative to where you are):
the simulated fleet is the demo's own data, shipped with it (accelpool_demo/demo-cluster.yaml,
package data); the pools applied are the repository's examples/ (the files the docs and the
tests apply), read from the source tree accelpool-demo is installed from (editable, as
`make install` does) rather than from a copy. An installed wheel has no source tree: pass
--examples (and --cluster for another fleet). Each pool applied whose file sets no
spec.health.holdDown gets a 30s one (a pool's default is 10m), so that a node cleared in the
walkthrough (docs/tutorial/demo.md) is released within a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import signal
import socket
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from accelpool_core.durations import duration_argument
from accelpool_demo.injection import VALID_FAULTS, Injection, InjectionError, parse_injection

DEFAULT_PORT = 18080
LOCALHOST = "127.0.0.1"
USAGE_ERROR = 2


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="run accelpool on a simulated GPU cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--cluster", type=Path, help="a DemoCluster file: the simulated fleet (default: the demo's own, package data)"
    )
    parser.add_argument(
        "--examples",
        type=Path,
        action="append",
        help="ComputePool files or directories to apply, repeatable (default: examples/ of the source tree)",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="API server port on 127.0.0.1 (default %(default)s)"
    )
    parser.add_argument("--metrics-port", type=int, default=18081, help="operator /metrics port (default %(default)s)")
    parser.add_argument(
        "--for",
        dest="duration",
        type=duration_argument,
        metavar="DURATION",
        help="stop after this long: 90s, 2m, 1h (a plain number is seconds), as every accelpool duration flag",
    )
    parser.add_argument(
        "--until-ready",
        action="store_true",
        help="stop as soon as every pool is Ready (exit 0); with --for, exit 1 if they are not by then",
    )
    parser.add_argument("--no-tui", dest="tui", action="store_false", help="no live table; print the final one")
    parser.set_defaults(func=run)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    inject = actions.add_parser(
        "inject",
        help="inject a fault into a node's agent or NVIDIA's components",
        description="Inject FAULT on NODE of the running demo.",
        epilog=VALID_FAULTS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inject.add_argument("node", help="a node of the demo cluster (- for a cluster-wide fault)")
    inject.add_argument("fault", type=_injection, help="what to break (the list below)")
    inject.add_argument(
        "--server", help="the demo's API server (default: http://127.0.0.1:PORT, the demo's --port, 18080 unless given)"
    )
    inject.set_defaults(func=run_inject)


def _injection(text: str) -> Injection:
    """FAULT, checked by argparse before anything is sent: a usage error (exit 2) lists the valid ones."""
    try:
        return parse_injection(text)
    except InjectionError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def run(args: argparse.Namespace) -> int:
    from accelpool_demo.cluster import DEFAULT_FLEET
    from accelpool_demo.run import SOURCE_EXAMPLES, DemoOptions, demo_pools, load_fleet, load_workloads, run_demo

    for flag, port in (("--port", args.port), ("--metrics-port", args.metrics_port)):
        if port_in_use(port):
            print(
                f"accelpool demo: {LOCALHOST}:{port} is in use (another demo running?): stop it, or pass {flag} "
                "with a free port",
                file=sys.stderr,
            )
            return USAGE_ERROR
    examples = args.examples or ([SOURCE_EXAMPLES] if SOURCE_EXAMPLES else [])
    if not examples:
        print("accelpool demo: no source tree to take examples/ from: no pools applied (--examples adds some)")
    options = DemoOptions(
        fleet=load_fleet(args.cluster or DEFAULT_FLEET),
        pools=demo_pools(tuple(examples)),
        port=args.port,
        duration=args.duration,
        until_ready=args.until_ready,
        tui=args.tui,
        operator_metrics_port=args.metrics_port,
        workloads=load_workloads(args.cluster or DEFAULT_FLEET),
    )
    ready = asyncio.run(_until_signalled(run_demo(options)))
    return 0 if ready or (args.duration is None and not args.until_ready) else 1


def port_in_use(port: int, host: str = LOCALHOST) -> bool:
    """Whether something listens on host:port already (a port left in TIME_WAIT by a demo that ended is free:
    the probe binds with SO_REUSEADDR, as the demo's servers do)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            return error.errno == errno.EADDRINUSE
    return False


async def _until_signalled(main: Coroutine[Any, Any, bool]) -> bool:
    """Run MAIN until it ends, or until SIGINT (Ctrl-C) or SIGTERM cancels it; cancelled, it stops
    everything it started, with bounded waits. Only the first signal cancels: a second Ctrl-C
    must not cut that cleanup short and leave agent processes behind."""
    task = asyncio.ensure_future(main)
    loop = asyncio.get_running_loop()

    def stop() -> None:
        if not task.cancelling():
            task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    try:
        return await task
    except asyncio.CancelledError:
        return False
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def demo_server(args: argparse.Namespace) -> str:
    """The running demo's API server: --server, else the demo's own --port on 127.0.0.1."""
    return str(args.server or f"http://127.0.0.1:{args.port}")


def run_inject(args: argparse.Namespace) -> int:
    from accelpool_core.kube import ApiError
    from accelpool_demo.run import inject

    server = demo_server(args)
    try:
        print(asyncio.run(inject(server, args.node, args.fault.text)))
    except InjectionError as error:
        print(f"accelpool demo inject: {error}", file=sys.stderr)
        return USAGE_ERROR
    except (OSError, ApiError) as error:
        print(f"accelpool demo inject: {server}: {error} (is `accelpool demo` running?)", file=sys.stderr)
        return 1
    return 0
