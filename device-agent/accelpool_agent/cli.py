"""The `accelpool-agent` command: `run` (the DaemonSet's daemon) and `check` (one cycle, then exit).

    accelpool-agent run --backend nvml --node-name $(NODE_NAME)      # on a GPU node
    accelpool-agent run --backend fake --fake-gpus H100:8 --no-report  # a simulated node
    accelpool-agent check --backend fake --fake-gpus H100:8 --fault 3:xid=79 --json

`check` exits 0 when the node is healthy and 1 when it is not (Unhealthy or Unknown); bad
arguments exit 2 with a message naming the value and the valid choices. Every backend prints the
same report (`--json`: `NodeReport.to_json`; else a verdict line and a device table). Backends: `nvml`
(NVML telemetry and XID events + CuPy compute checks: real nodes), `amdsmi` (AMD Instinct), `neuron`
(AWS Trainium / Inferentia through neuron-monitor), `tpu` (Google TPU through libtpu or tpu-info),
`cuda` (CuPy only), `cpu` (NumPy on the host CPU), `fake` (simulated devices of any vendor with
`--fault` injection): the backend registry's (`accelpool_agent.backends`), whose summaries and whose
unavailable backends (and why) `--backend`'s help and errors list. Without `--backend`, `check` detects
the host's (`backends.detect`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelpool_agent.backends import BACKENDS, backend_choices, backend_help
from accelpool_agent.backends.probes import host_probes
from accelpool_agent.faults import FaultSpec, FaultSpecError, faults_by_gpu, parse_fault_spec
from accelpool_agent.model import DTYPES
from accelpool_core.durations import duration_argument

if TYPE_CHECKING:  # the console script is re-imported by every compute child: keep this module light
    from accelpool_agent.agent import Agent
    from accelpool_agent.config import AgentSettings
    from accelpool_agent.model import NodeReport
    from accelpool_core.protocol import AgentConfig

log = logging.getLogger("accelpool_agent")

FAKE_CHECK_TIMEOUT_SECONDS = 10.0
"""The fake backend's compute checks take milliseconds: a hang is declared after 10 s, not 120."""


def _fault(text: str) -> FaultSpec:
    try:
        return parse_fault_spec(text)
    except FaultSpecError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _dtypes(text: str) -> tuple[str, ...]:
    chosen = tuple(d.strip().lower() for d in text.split(",") if d.strip())
    unknown = [d for d in chosen if d not in DTYPES]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"invalid --dtypes {text!r}: valid dtypes: {', '.join(DTYPES)}")
    return chosen


def _backend(text: str) -> str:
    if text not in BACKENDS:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r}; {backend_choices(host_probes())}")
    return text


BACKEND_DEFAULT = (
    " (default: $ACCELPOOL_AGENT_BACKEND; else `run` uses nvml, and `check` uses fake with --fake-gpus or --fault,"
    " else detects the host's devices)"
)


class _HelpFormatter(argparse.HelpFormatter):
    """Writes `--backend`'s help from the backend registry when help is printed, marking the backends this
    host cannot run: the host is looked up then, not at every start (the lookup loads NVML's library and
    imports every backend module)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.dest == "backend":
            return backend_help(host_probes()) + BACKEND_DEFAULT
        return action.help


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accelpool-agent",
        description="accelpool device agent: GPU telemetry, health and performance checks.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{run,check}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--backend",
        type=_backend,
        choices=BACKENDS,
        default=os.environ.get("ACCELPOOL_AGENT_BACKEND"),
        help="which backend reads the devices" + BACKEND_DEFAULT,  # the backends' own words: _HelpFormatter
    )
    common.add_argument(
        "--config", metavar="FILE", help="AgentConfig as YAML or JSON (default: $ACCELPOOL_AGENT_CONFIG)"
    )
    common.add_argument(
        "--node-name", default=os.environ.get("NODE_NAME"), help="this node's name (default: $NODE_NAME)"
    )
    common.add_argument("--fake-gpus", metavar="MODEL[:COUNT]", help="fake backend: e.g. H100:8, A100-80GB:4, L4")
    common.add_argument(
        "--fault",
        action="append",
        type=_fault,
        default=[],
        metavar="GPU:FAULT",
        help="fake backend fault, repeatable: 3:xid=79, 1:fatal (any vendor's), all:hang, 0,2:ecc-dbe, "
        "4-7:slow-matmul=2, 1:wrong-results, 5:lost, 6:hot, 7:row-remap-failure (`accelpool-agent faults` lists all)",
    )
    common.add_argument("--seed", type=int, default=0, help="fake backend: seed of the simulated readings")
    common.add_argument(
        "--sysfs-root",
        default=os.environ.get("ACCELPOOL_AGENT_SYSFS_ROOT", "/sys"),
        metavar="DIR",
        help="where sysfs is mounted; InfiniBand ports are read from DIR/class/infiniband "
        "(default: $ACCELPOOL_AGENT_SYSFS_ROOT, else /sys)",
    )
    common.add_argument(
        "--check-timeout", type=duration_argument, metavar="DURATION", help="kill a compute check after this long"
    )
    common.add_argument("--force", action="store_true", default=None, help="run compute checks on busy GPUs too")
    common.add_argument(
        "--dtypes", type=_dtypes, default=DTYPES, help=f"matmul dtypes to measure (default {','.join(DTYPES)})"
    )
    common.add_argument("--matmul-size", type=_positive_int, metavar="N", help="n of the nxnxn GEMMs")
    common.add_argument("--parallel", type=_positive_int, default=8, metavar="N", help="GPUs checked at the same time")
    common.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "INFO"), help="DEBUG, INFO, WARNING, ERROR")

    run = commands.add_parser("run", parents=[common], help="run the agent daemon", formatter_class=_HelpFormatter)
    run.add_argument("--listen", default="0.0.0.0:9402", metavar="HOST:PORT", help="serve /metrics and /healthz here")
    run.add_argument("--kubeconfig", help="kubeconfig for the API (default: in-cluster, then ~/.kube/config)")
    run.add_argument("--server", metavar="URL", help="API server URL without authentication (tests, kubectl proxy)")
    run.add_argument("--no-report", action="store_true", help="do not write the node condition and annotation")
    run.add_argument(
        "--telemetry-interval", type=duration_argument, default=2.0, metavar="DURATION", help="telemetry/XID polling"
    )
    run.add_argument(
        "--interval", type=duration_argument, metavar="DURATION", help="time between full cycles (default: config)"
    )

    check = commands.add_parser(
        "check",
        parents=[common],
        help="run one full check cycle and exit (0 healthy, 1 not)",
        formatter_class=_HelpFormatter,
    )
    check.add_argument("--json", action="store_true", help="print the report as JSON")

    commands.add_parser("faults", help="list the fake backend's faults")
    return parser


def _settings(args: argparse.Namespace, config: AgentConfig) -> tuple[AgentConfig, AgentSettings]:
    from accelpool_agent.config import AgentSettings

    updates: dict[str, Any] = {}
    if args.check_timeout is not None:
        updates["check_timeout_seconds"] = args.check_timeout
    elif args.backend == "fake" and "check_timeout_seconds" not in config.model_fields_set:
        updates["check_timeout_seconds"] = FAKE_CHECK_TIMEOUT_SECONDS
    if args.force:
        updates["force"] = True
    if getattr(args, "interval", None) is not None:
        updates["interval_seconds"] = args.interval
    config = config.model_copy(update=updates)
    from accelpool_agent.compute import ComputeSizes

    engine = "cpu" if args.backend == "cpu" else "cuda"
    sizes = ComputeSizes.for_engine(engine)
    if args.matmul_size:
        from dataclasses import replace

        sizes = replace(sizes, matmul_n=args.matmul_size)
    settings = AgentSettings(
        node_name=args.node_name or socket.gethostname(),
        backend=args.backend,
        telemetry_interval_seconds=getattr(args, "telemetry_interval", 2.0),
        dtypes=args.dtypes,
        parallelism=1 if args.backend == "cpu" else args.parallel,
        sizes=sizes,
        seed=args.seed,
    )
    return config, settings


def _print_report(report: NodeReport) -> None:
    from accelpool_agent.model import CheckStatus

    count = len(report.gpus)
    print(f"node {report.node} ({report.backend}, {count} device{'s' if count != 1 else ''}): ", end="")
    print(f"{report.status.value} — {report.reason}")
    if report.message:
        print(f"  {report.message}")
    versions = f"driver {report.driver_version or '?'}" + (
        f", CUDA {report.cuda_version}" if report.cuda_version else ""
    )
    print(f"  recommended action: {report.action.value}; {versions}")
    for node_check in report.checks:
        if node_check.status in (CheckStatus.WARN, CheckStatus.FAIL):
            print(f"  {node_check.status.value}: {node_check.check.value}: {node_check.reason}: {node_check.message}")
    print(f"{'GPU':>3}  {'MODEL':<16} {'STATUS':<6} {'REASON':<26} {'MATMUL ' + report.dtype:>14} {'BANDWIDTH':>11}")
    for gpu in report.gpus:
        tflops = gpu.matmul_tflops.get(report.dtype)
        bandwidth = gpu.bandwidth_bytes_per_second
        print(
            f"{gpu.device.index:>3}  {(gpu.device.model or gpu.device.name)[:16]:<16} {gpu.status.value:<6} "
            f"{gpu.reason[:26]:<26} {f'{tflops:.1f} TFLOPS' if tflops else '-':>14} "
            f"{f'{bandwidth / 1e9:.0f} GB/s' if bandwidth else '-':>11}"
        )
        for check in gpu.checks:
            if check.status in (CheckStatus.WARN, CheckStatus.FAIL):
                print(f"       {check.status.value}: {check.check.value}: {check.reason}: {check.message}")


def _make_agent(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Agent:
    from accelpool_agent.agent import Agent
    from accelpool_agent.backends import BackendError, create_backend
    from accelpool_agent.compute.runner import ProcessRunner
    from accelpool_agent.config import ConfigError, load_config

    try:
        config = load_config(args.config, os.environ)
    except ConfigError as error:
        parser.error(str(error))
    try:
        faults = None
        if args.fault:
            if args.backend != "fake":
                raise BackendError(f"--fault needs --backend fake (got --backend {args.backend})")
            from accelpool_agent.backends.fake import parse_fake_gpus

            _, count = parse_fake_gpus(args.fake_gpus or config.accelerator or "H100")
            faults = faults_by_gpu(args.fault, count)
        fake_gpus = args.fake_gpus
        if args.backend == "fake" and fake_gpus is None and config.accelerator:
            fake_gpus = config.accelerator
        backend = create_backend(
            args.backend, fake_gpus=fake_gpus, faults=faults, seed=args.seed, sysfs_root=Path(args.sysfs_root)
        )
    except (BackendError, FaultSpecError) as error:
        parser.error(str(error))
    config, settings = _settings(args, config)
    return Agent(backend, config, settings, ProcessRunner())


def _check(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    agent = _make_agent(args, parser)

    async def once() -> NodeReport:
        await asyncio.to_thread(agent.open)
        try:
            report: NodeReport = await agent.full_cycle()
        finally:
            await asyncio.to_thread(agent.close)
        return report

    report = asyncio.run(once())
    if args.json:
        json.dump(report.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_report(report)
    return 0 if report.healthy else 1


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from accelpool_agent import server
    from accelpool_agent.daemon import Daemon
    from accelpool_agent.metrics import build_registry

    try:
        host, port = server.parse_listen(args.listen)
    except ValueError as error:
        parser.error(str(error))
    if not args.no_report and not args.node_name:
        parser.error("--node-name (or $NODE_NAME) is required unless --no-report")
    agent = _make_agent(args, parser)

    async def main() -> None:
        reporter = None
        client = None
        watch = None
        if not args.no_report:
            from accelpool_agent.node_watch import NodeWatch
            from accelpool_agent.reporter import NodeReporter
            from accelpool_core.credentials import Credentials
            from accelpool_core.kube import KubeClient

            client = KubeClient(Credentials.discover(args.kubeconfig, args.server))
            reporter = NodeReporter(
                client,
                agent.settings.node_name,
                heartbeat_seconds=agent.config.heartbeat_seconds,
                agent_name=os.environ.get("POD_NAME") or None,
            )
            watch = NodeWatch(client, agent.settings.node_name)
        daemon = Daemon(
            agent, reporter=reporter, telemetry_interval=agent.settings.telemetry_interval_seconds, watch=watch
        )
        registry = build_registry(lambda: agent.snapshot)
        web_runner = await server.start(server.make_app(registry, daemon.liveness, daemon.readiness), host, port)
        log.info(
            "serving /metrics, /healthz and /readyz on %s:%d; backend %s; node %s",
            host,
            port,
            args.backend,
            agent.settings.node_name,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await daemon.run(stop)
        finally:
            await web_runner.cleanup()
            if client is not None:
                await client.close()

    asyncio.run(main())
    return 0


def _list_faults() -> int:
    from accelpool_agent.faults import FAULT_HELP

    for text in FAULT_HELP.values():
        print(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "faults":
        return _list_faults()
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.command == "check":
        simulated = args.fake_gpus is not None or bool(args.fault)
        args.backend = args.backend or ("fake" if simulated else _detected_backend())
        return _check(args, parser)
    args.backend = args.backend or "nvml"
    return _run(args, parser)


def _detected_backend() -> str:
    from accelpool_agent.backends.detect import detect_backend

    detection = detect_backend(host_probes())
    print(f"backend {detection.backend} (detected: {detection.evidence})", file=sys.stderr)
    return detection.backend


if __name__ == "__main__":
    sys.exit(main())
