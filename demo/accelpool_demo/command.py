"""`accelpool demo`: accelpool on a simulated GPU cluster, no Kubernetes needed.

accelpool demo                         live table until Ctrl-C
accelpool demo --for 25 --no-tui       run 25 s, print the final table (exit 1 unless all Ready)
accelpool demo inject h100-1 xid=79    give h100-1's agent a fault (GPU 0; '3:xid=79' for GPU 3)
accelpool demo inject h100-1 mig-broken                 h100-1's MIG manager reports success, creates nothing
accelpool demo inject h100-1 strategy-override=single   cluster-wide MIG strategy (off to remove; h100-1 unused)
accelpool demo inject h100-1 no-runtime-class  no nvidia RuntimeClass; h100-1's agent pod cannot come back
accelpool demo inject h100-1 clear     remove h100-1's faults (and bring the RuntimeClass back)
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

DEFAULT_PORT = 18080


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="run accelpool on a simulated GPU cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cluster", type=Path, default=Path("examples/demo-cluster.yaml"), help="the simulated fleet")
    parser.add_argument(
        "--examples", type=Path, action="append", help="ComputePool files or directories to apply (default: examples/)"
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="API server port on 127.0.0.1 (default %(default)s)"
    )
    parser.add_argument("--metrics-port", type=int, default=18081, help="operator /metrics port (default %(default)s)")
    parser.add_argument("--for", dest="duration", type=float, help="stop after this many seconds")
    parser.add_argument("--no-tui", dest="tui", action="store_false", help="no live table; print the final one")
    parser.set_defaults(func=run)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    inject = actions.add_parser("inject", help="inject a fault into a node's agent or NVIDIA's components")
    inject.add_argument("node")
    inject.add_argument(
        "fault",
        help="xid=79, ecc-dbe, slow-matmul=3, wrong-results, hang, lost, N:FAULT (agent); mig-broken; "
        "strategy-override=single|mixed|off (cluster-wide); no-runtime-class; or clear",
    )
    inject.add_argument("--server", default=f"http://127.0.0.1:{DEFAULT_PORT}")
    inject.set_defaults(func=run_inject)


def run(args: argparse.Namespace) -> int:
    from accelpool_demo.run import DemoOptions, example_pools, load_fleet, run_demo

    options = DemoOptions(
        fleet=load_fleet(args.cluster),
        pools=example_pools(tuple(args.examples or [Path("examples")])),
        port=args.port,
        duration=args.duration,
        tui=args.tui,
        operator_metrics_port=args.metrics_port,
    )
    ready = asyncio.run(_until_signalled(run_demo(options)))
    return 0 if ready or args.duration is None else 1


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


def run_inject(args: argparse.Namespace) -> int:
    from accelpool_demo.run import inject

    try:
        print(asyncio.run(inject(args.server, args.node, args.fault)))
    except ValueError as error:
        print(f"accelpool demo inject: {error}")
        return 2
    return 0
