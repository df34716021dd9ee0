"""Runs the demo: API server, fleet, simulators, the real operator, agents, and a live pool table.

The simulated cluster has what accelpool's install needs (the namespace, the agents' ServiceAccount, the
`nvidia` RuntimeClass the GPU Operator's toolkit creates), Kueue's CRDs and a ClusterQueue
(`accelpool_demo.kueue`), a DaemonSet controller (`accelpool_demo.daemonsets`), NVIDIA's node-side
components and a kubelet for the agent pods (`accelpool_demo.simulators`), and NVIDIA's DRA kubelet plugin
with kube-scheduler's DRA path for pods with ResourceClaims (`accelpool_demo.dra.components`: idle while the
API server serves no `resource.k8s.io`).

Called by `accelpool demo`. Everything listens on 127.0.0.1 only (the operator's /metrics and
/healthz included); every process it starts is stopped when it ends (Ctrl-C, SIGTERM, an error,
or after `--for SECONDS`): the simulators first, then the operator and the agents at once, each
given a few seconds before it is killed; then its temporary directory (the logs) is removed.

Where things are, from any working directory: the fleet is package data (`cluster.DEFAULT_FLEET`);
the example pools are the `examples/` directory of the source tree the demo is installed from
(`SOURCE_TREE`: an editable install, as `make install` makes), none for an installed wheel.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

import accelpool_api as api
from accelpool_api import conventions, crd
from accelpool_core.credentials import Credentials
from accelpool_core.kube import ApiError, KubeClient
from accelpool_core.textio import format_table
from accelpool_demo import cluster, daemonsets, kueue, nvidia, screen, webhook
from accelpool_demo.apiserver import serving
from accelpool_demo.dra.components import SCHEDULER_USER_AGENT, DraNodeComponents, DraScheduler
from accelpool_demo.injection import Injection, InjectionError, InjectionKind, check_gpus, parse_injection
from accelpool_demo.simulators import (
    DEMO_INSTALLATION,
    FAULT_ANNOTATION,
    GPU_OPERATOR_CONFIG_MAP,
    MIG_FAULT_ANNOTATION,
    MIG_STRATEGY_KEY,
    Kubelet,
    NvidiaComponents,
    fake_gpus,
    free_port,
    stop_process,
)

NAMESPACE = conventions.DEFAULT_NAMESPACE
MIG_CONFIG_MAP = conventions.DEFAULT_MIG_CONFIGMAP
DEVICE_PLUGIN_CONFIG_MAP = conventions.DEFAULT_DEVICE_PLUGIN_CONFIGMAP
POOLS_PATH = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"
AGENT_SERVICE_ACCOUNT = "accelpool-agent"
NVIDIA_RUNTIME_CLASS = "nvidia"
RUNTIME_CLASSES_PATH = "/apis/node.k8s.io/v1/runtimeclasses"
AGENT_CHECK_SECONDS = 3.0
WEBHOOK_CERT_DIR = "webhook-tls"
"""Where, in the demo's temporary directory, the operator reads its webhook certificate."""
"""The demo's operator looks at its agents' DaemonSets, pods and Events this often (30 s by default)."""
LOCALHOST = "127.0.0.1"
_PACKAGE = Path(__file__).resolve().parent
SOURCE_TREE = _PACKAGE.parents[1] if (_PACKAGE.parent / "pyproject.toml").exists() else None
"""The repository the demo runs from (its distribution's pyproject.toml sits next to the package), if any."""
SOURCE_EXAMPLES = SOURCE_TREE / "examples" if SOURCE_TREE else None
"""The example pools `accelpool demo` applies unless given --examples."""
KNOWN_NODES_SHOWN = 6
REQUESTS_REMEMBERED = 1000
"""The demo's API server keeps this many requests, however long it runs."""
DEMO_HOLD_DOWN = "30s"
"""The hold-down of the pools the demo applies (`demo_pools`): a cleared node is released within a minute."""
DRA_DRIVER_NAMESPACE = "nvidia-dra-driver-gpu"
"""Where the demo's NVIDIA DRA driver keeps its kubelet-plugin pods (the chart's release namespace)."""


@dataclass(frozen=True)
class DemoOptions:
    fleet: list[dict[str, Any]]
    pools: list[dict[str, Any]]
    port: int
    duration: float | None
    tui: bool
    operator_metrics_port: int
    workloads: list[dict[str, Any]] = field(default_factory=list)
    """The pods and PodDisruptionBudgets running when the demo starts (`load_workloads`)."""
    until_ready: bool = False
    """Stop as soon as every pool is Ready (`--until-ready`)."""


def pool_rows(pools: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """The live table: one row per pool, from its status (`screen.LEGEND` says what the columns count); WHY is
    the first condition that is not True (`AgentReady=False/RuntimeClassNotFound`). Pure."""
    rows: list[tuple[str, ...]] = [
        ("POOL", "ACCELERATOR", "MEMBERS", "READY", "QUAR", "GPUS", "TFLOPS", "PHASE", "WHY")
    ]
    for pool in sorted(pools, key=lambda p: p["metadata"]["name"]):
        status = pool.get("status") or {}
        nodes = status.get("nodes") or {}
        capacity = status.get("capacity") or {}
        tflops = capacity.get("measuredTFLOPS")
        rows.append(
            (
                pool["metadata"]["name"],
                str(status.get("accelerator") or "-"),
                f"{nodes.get('members', 0)}/{nodes.get('desired', '?')}",
                str(nodes.get("ready", 0)),
                str(nodes.get("quarantined", 0)),
                str(capacity.get("gpus", 0)),
                f"{tflops:,.0f}" if isinstance(tflops, int | float) else "-",
                str(status.get("phase") or "Pending"),
                _why(status),
            )
        )
    return rows


def _why(status: dict[str, Any]) -> str:
    for condition in status.get("conditions") or []:
        if condition.get("type") != "Ready" and condition.get("status") != "True":
            return f"{condition.get('type')}={condition.get('status')}/{condition.get('reason')}"
    return "-"


def all_ready(pools: list[dict[str, Any]]) -> bool:
    return bool(pools) and all((p.get("status") or {}).get("phase") == "Ready" for p in pools)


def load_fleet(cluster_file: Path = cluster.DEFAULT_FLEET) -> list[dict[str, Any]]:
    return cluster.nodes(cluster.parse(cluster_file.read_text()))


def load_workloads(cluster_file: Path = cluster.DEFAULT_FLEET) -> list[dict[str, Any]]:
    workloads = cluster.parse_workloads(cluster_file.read_text())
    return [obj for workload in workloads for obj in cluster.workload_objects(workload)]


def example_pools(paths: tuple[Path, ...]) -> list[dict[str, Any]]:
    pools: list[dict[str, Any]] = []
    for path in paths:
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            for document in yaml.safe_load_all(file.read_text()):
                if isinstance(document, dict) and document.get("kind") == api.KIND:
                    pools.append(document)
    return pools


def demo_pools(paths: tuple[Path, ...]) -> list[dict[str, Any]]:
    """The pools `accelpool demo` applies: `example_pools`, each given `DEMO_HOLD_DOWN` unless its file sets
    `spec.health.holdDown` (the default, 10m, would hold a node quarantined in the walkthrough for ten
    minutes after its fault is cleared). The banner says so."""
    pools = example_pools(paths)
    for pool in pools:
        health = pool.setdefault("spec", {}).setdefault("health", {})
        health.setdefault("holdDown", DEMO_HOLD_DOWN)
    return pools


def runtime_class(name: str = NVIDIA_RUNTIME_CLASS) -> dict[str, Any]:
    """The RuntimeClass the GPU Operator's container toolkit creates (handler: the NVIDIA runtime)."""
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": name}


async def install_prerequisites(client: KubeClient, namespace: str = NAMESPACE) -> None:
    """What accelpool's chart (the agents' ServiceAccount) and the GPU Operator (the `nvidia` RuntimeClass)
    put in a cluster before any pool exists."""
    await client.create(RUNTIME_CLASSES_PATH, runtime_class())
    await client.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": AGENT_SERVICE_ACCOUNT}},
    )


async def _seed(client: KubeClient, fleet: list[dict[str, Any]], workloads: Sequence[dict[str, Any]] = ()) -> None:
    await client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd.custom_resource_definition())
    await install_prerequisites(client)
    await kueue.install(client)
    for node in fleet:
        await client.create("/api/v1/nodes", node)
    for obj in workloads:  # pods, reported Running and Ready as their kubelet would, and their budgets
        namespace = obj["metadata"]["namespace"]
        if obj["kind"] == "Pod":
            await client.create(f"/api/v1/namespaces/{namespace}/pods", obj)
            await client.patch(f"/api/v1/namespaces/{namespace}/pods/{obj['metadata']['name']}/status", obj)
        else:
            await client.create(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", obj)


async def _start_operator(
    server: str, metrics_port: int, log_dir: Path, config_sync_seconds: float, webhook_port: int
) -> asyncio.subprocess.Process:
    command = [
        str(Path(sys.executable).parent / "accelpool"),
        "run",
        "--server",
        server,
        "--namespace",
        NAMESPACE,
        "--metrics-address",
        LOCALHOST,
        "--metrics-port",
        str(metrics_port),
        f"--liveness=http://{LOCALHOST}:{free_port()}/healthz",
        # The admission webhook, with the certificate the chart would generate (`webhook`): the emulated API
        # server calls it for every ComputePool created or edited, as a cluster with the chart does.
        "--webhook-address",
        LOCALHOST,
        "--webhook-port",
        str(webhook_port),
        "--webhook-cert-dir",
        str(log_dir / WEBHOOK_CERT_DIR),
        "--agent-check-interval",
        str(AGENT_CHECK_SECONDS),
        # The simulated kubelet projects ConfigMap updates into NVIDIA's pods this late: an edited pool's
        # members move to their new configs once NVIDIA's components can read them.
        "--config-sync",
        str(config_sync_seconds),
        # NVIDIA's DRA kubelet plugin pods (`accelpool_demo.dra.components`): the operator restarts one after a
        # static-MIG change on a DRA pool's member by deleting it.
        "--dra-plugin-namespace",
        DRA_DRIVER_NAMESPACE,
    ]
    log_file = (log_dir / "operator.log").open("ab")
    process = await asyncio.create_subprocess_exec(*command, stdout=log_file, stderr=log_file, env=dict(os.environ))
    log_file.close()
    return process


def banner(server: str, metrics_port: int, log_dir: Path, cwd: Path | None = None) -> str:
    """The hints: commands as the README's quick start gives them (from the repository's root,
    `.tools/bin/kubectl` and `.venv/bin/accelpool`), valid from `cwd` (default: the working directory)."""
    kubectl, accelpool = (_shown(path, cwd or Path.cwd()) for path in _tools())
    inject = f"{accelpool} demo inject"
    return f"""accelpool demo: a simulated GPU cluster on this machine
  kubectl      {kubectl} --server {server} get cpool        (get nodes --show-labels, get cpool NAME -o yaml)
  metrics      operator http://{LOCALHOST}:{metrics_port}/metrics; agents: {log_dir}/agents.txt
  faults       {inject} NODE xid=79   (ecc-dbe, slow-matmul=3, nvlink-down, ib-down, ...; N:FAULT; clear)
  check        {accelpool} check --server {server} --pool llm-training   (a full cycle now; or NODE...)
  ladder       {kubectl} --server {server} get events   (drain, PodDisruptionBudget refusals, hand-off)
  NVIDIA       {inject} NODE mig-broken; {inject} - strategy-override=single (off)
  agents       {inject} NODE no-runtime-class   (no nvidia RuntimeClass: NODE's agent pod cannot return)
  kueue        {kubectl} --server {server} get clusterqueue research -o yaml   (llm-training's GPU quota)
  hold-down    {DEMO_HOLD_DOWN} for the example pools (spec.health.holdDown; a pool's default is 10m)
  logs         {log_dir}   (removed when the demo ends)
"""


def _tools() -> tuple[Path, Path]:
    """kubectl (in a source tree, the copy `make demo` fetches; else the one on PATH) and this environment's
    accelpool."""
    kubectl = SOURCE_TREE / ".tools" / "bin" / "kubectl" if SOURCE_TREE else Path("kubectl")
    return kubectl, Path(sys.executable).parent / "accelpool"


def _shown(path: Path, cwd: Path) -> str:
    """PATH as the README writes it from the repository's root (relative); absolute from anywhere else."""
    if SOURCE_TREE is not None and cwd == SOURCE_TREE and path.is_relative_to(SOURCE_TREE):
        return str(path.relative_to(SOURCE_TREE))
    return str(path)


@dataclass
class SimulatedCluster:
    """A running demo cluster: its URL, an API client, and where its processes log.

    `operator` is the operator process running now: `kill_operator` kills it as the kernel would (SIGKILL: no
    handler runs, nothing is flushed) and `start_operator` starts another on the same webhook and metrics ports,
    as a Deployment's next pod; the demo stops whichever runs when it ends."""

    server: str
    client: KubeClient
    log_dir: Path
    operator: asyncio.subprocess.Process
    kubelet: Kubelet
    nvidia: NvidiaComponents
    dra: DraNodeComponents | None = None
    """NVIDIA's DRA kubelet plugin on every node (`dra.plugins.restart`, `dra.plugins.xid` for a test)."""
    scheduler: DraScheduler | None = None
    _launch: Callable[[], Awaitable[asyncio.subprocess.Process]] | None = field(default=None, repr=False)

    async def kill_operator(self) -> None:
        """SIGKILL the operator and reap it."""
        if self.operator.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.operator.kill()
        await self.operator.wait()

    async def start_operator(self) -> None:
        """Start a new operator process once the previous one has exited; returns when it serves its webhook."""
        assert self._launch is not None, "this cluster cannot start operators"
        if self.operator.returncode is None:
            raise RuntimeError("the operator still runs: kill it first")
        self.operator = await self._launch()


@contextlib.asynccontextmanager
async def simulated_cluster(
    fleet: list[dict[str, Any]],
    *,
    workloads: Sequence[dict[str, Any]] = (),
    port: int = 0,
    operator_metrics_port: int = 0,
    installation: nvidia.Installation = DEMO_INSTALLATION,
) -> AsyncIterator[SimulatedCluster]:
    """API server + fleet + NVIDIA's components + kubelet + the real operator; all stopped on exit, however
    it comes (cancelled, an error), and then the temporary directory of their logs removed."""
    with tempfile.TemporaryDirectory(prefix="accelpool-demo-", ignore_cleanup_errors=True) as log_dir:
        async with _cluster_logging_to(
            Path(log_dir),
            fleet,
            workloads=workloads,
            port=port,
            operator_metrics_port=operator_metrics_port,
            installation=installation,
        ) as demo:
            yield demo


@contextlib.asynccontextmanager
async def _cluster_logging_to(
    log_dir: Path,
    fleet: list[dict[str, Any]],
    *,
    workloads: Sequence[dict[str, Any]],
    port: int,
    operator_metrics_port: int,
    installation: nvidia.Installation,
) -> AsyncIterator[SimulatedCluster]:
    async with serving(port=port, remember=REQUESTS_REMEMBERED) as api:
        server = api.url
        client = KubeClient(Credentials(server=server))
        for namespace in (NAMESPACE, "default", DRA_DRIVER_NAMESPACE):
            api.put("/api/v1/namespaces", {"metadata": {"name": namespace}})
        components = NvidiaComponents(
            client, NAMESPACE, DEVICE_PLUGIN_CONFIG_MAP, MIG_CONFIG_MAP, nvidia.Simulation(installation)
        )
        kubelet = Kubelet(client, server=server, namespace=NAMESPACE, log_dir=log_dir)
        dra = DraNodeComponents(
            client, components.simulation, fault_annotation=FAULT_ANNOTATION, plugin_namespace=DRA_DRIVER_NAMESPACE
        )
        scheduler_client = KubeClient(Credentials(server=server), user_agent=SCHEDULER_USER_AGENT)
        scheduler = DraScheduler(scheduler_client)
        controller_client = KubeClient(Credentials(server=server), user_agent=daemonsets.USER_AGENT)
        controller = daemonsets.DaemonSetController(controller_client, NAMESPACE)
        operator: asyncio.subprocess.Process | None = None
        tasks: list[asyncio.Task[None]] = []
        try:
            await _seed(client, fleet, workloads)
            certificates = webhook.Certificates.generate()
            certificates.write(log_dir / WEBHOOK_CERT_DIR)
            webhook_port, metrics_port = free_port(), operator_metrics_port or free_port()

            async def launch() -> asyncio.subprocess.Process:
                nonlocal operator
                operator = await _start_operator(
                    server, metrics_port, log_dir, installation.propagation_seconds, webhook_port
                )
                await _listening(LOCALHOST, webhook_port, operator)
                return operator

            await launch()
            assert operator is not None
            webhook.install(api.server, (LOCALHOST, webhook_port), certificates.ca)
            tasks = [
                asyncio.create_task(components.run()),
                asyncio.create_task(controller.run()),
                asyncio.create_task(kubelet.run()),
                asyncio.create_task(dra.run()),
                asyncio.create_task(scheduler.run()),
            ]
            yield SimulatedCluster(server, client, log_dir, operator, kubelet, components, dra, scheduler, launch)
        finally:
            # Stop the simulators first (no agent is restarted meanwhile), then every process at
            # once, each with a bounded grace: the API server stops only when nothing calls it.
            for task in tasks:
                task.cancel()
            stopping = [*tasks, kubelet.stop_all(), *([stop_process(operator)] if operator is not None else [])]
            await asyncio.gather(*stopping, return_exceptions=True)
            await controller_client.close()
            await scheduler_client.close()
            await client.close()


async def run_demo(options: DemoOptions, out: TextIO = sys.stdout) -> bool:
    """Run until interrupted, for `options.duration`, or (`until_ready`) until every pool is Ready; True when
    every pool ended Ready. The live view (`screen`): redrawn in place on a terminal, the table printed when
    it changes into a pipe."""
    pools: list[dict[str, Any]] = []
    async with simulated_cluster(
        options.fleet,
        workloads=options.workloads,
        port=options.port,
        operator_metrics_port=options.operator_metrics_port,
    ) as demo:
        for pool in options.pools:
            await demo.client.create(POOLS_PATH, pool)
        about = banner(demo.server, options.operator_metrics_port, demo.log_dir)
        print(about, file=out, flush=True)
        started = time.monotonic()
        live = options.tui and out.isatty()
        hints = about.splitlines()
        shown: str | None = None
        with contextlib.suppress(asyncio.CancelledError):
            while options.duration is None or time.monotonic() - started < options.duration:
                await asyncio.sleep(1.0)
                if demo.operator.returncode is not None:
                    log_tail = _tail(demo.log_dir / "operator.log")
                    print(f"the operator exited ({demo.operator.returncode}); its log ends:\n{log_tail}", file=out)
                    break
                pools = await demo.client.list(POOLS_PATH)
                elapsed = time.monotonic() - started
                if live:
                    size = shutil.get_terminal_size()
                    status = f"{elapsed:5.0f}s  Ctrl-C to stop"
                    frame = screen.live_frame(
                        pool_rows(pools),
                        hints,
                        status,
                        width=size.columns,
                        height=size.lines,
                        colour=not os.environ.get("NO_COLOR"),
                        first=shown is None,
                    )
                    out.write(frame)
                    out.flush()
                    shown = frame
                elif options.tui:
                    update, shown = screen.plain_update(pool_rows(pools), shown, elapsed)
                    if update is not None:
                        print(update, file=out, flush=True)
                if options.until_ready and all_ready(pools):
                    break
        with contextlib.suppress(OSError, ApiError, TimeoutError):
            pools = await asyncio.wait_for(demo.client.list(POOLS_PATH), timeout=5)
    final: Sequence[Sequence[str]] = pool_rows(pools)
    if live:  # the last frame's columns, on the terminal's width
        final = screen.fitted(final, shutil.get_terminal_size().columns)
    print(format_table(final), file=out, flush=True)
    return all_ready(pools)


async def _listening(host: str, port: int, process: asyncio.subprocess.Process, within: float = 120.0) -> None:
    """Until the process listens on host:port (the operator's webhook: pools are created only once the API
    server can call it, as `helm install --wait` waits for the operator); an error if it exits first."""
    deadline = time.monotonic() + within
    while True:
        try:
            _, writer = await asyncio.open_connection(host, port)
        except OSError:
            if process.returncode is not None:
                raise RuntimeError(f"the operator exited ({process.returncode}) before serving its webhook") from None
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the operator did not serve its webhook on {host}:{port} within {within:.0f} s"
                ) from None
            await asyncio.sleep(0.1)
            continue
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return


def _tail(log: Path, lines: int = 20) -> str:
    """The end of a log the demo's temporary directory holds (it is removed when the demo ends)."""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


class UnknownNodeError(InjectionError):
    """`accelpool demo inject` named a node the simulated cluster does not have."""

    def __init__(self, node: str, known: list[str]) -> None:
        shown = ", ".join(sorted(known)[:KNOWN_NODES_SHOWN])
        more = f", ... ({len(known)} in all)" if len(known) > KNOWN_NODES_SHOWN else ""
        super().__init__(f"no node {node!r} in the demo cluster; its nodes: {shown or 'none'}{more}")


async def inject(server: str, node: str, fault: str) -> str:
    """Inject a fault (see `accelpool_demo.injection`); returns what it did. A fault the agent would refuse
    (`xid=abc`), a GPU NODE does not have, and an unknown NODE raise `InjectionError` before anything is
    written.

    - an agent fault (`xid=79`, `3:ecc-dbe`, ...): the demo's kubelet restarts NODE's agent with it;
    - `mig-broken`: NODE's MIG manager reports success and creates nothing (the layout never appears);
    - `strategy-override=single|mixed|off`: the cluster-wide MIG strategy (the GPU Operator's
      ClusterPolicy `spec.mig.strategy`) for every node's device plugin and GFD; NODE is not used;
    - `no-runtime-class`: the `nvidia` RuntimeClass is deleted (a cluster without the GPU Operator's
      toolkit) and NODE's agent pod with it (as an eviction would): the DaemonSet controller's attempts
      to create it again are refused (FailedCreate), and the pool's AgentReady says why;
    - `clear`: NODE's agent and MIG faults removed, and the `nvidia` RuntimeClass back.
    """
    injection = parse_injection(fault)
    async with KubeClient(Credentials(server=server)) as client:
        if injection.names_a_node:
            target = await client.get_or_none(f"/api/v1/nodes/{node}")
            if target is None:
                raise UnknownNodeError(node, [n["metadata"]["name"] for n in await client.list("/api/v1/nodes")])
            check_gpus(injection, node, fake_gpus(target)[1])
        return await _apply(client, node, injection)


async def _apply(client: KubeClient, node: str, injection: Injection) -> str:
    node_path = f"/api/v1/nodes/{node}"
    if injection.kind is InjectionKind.NO_RUNTIME_CLASS:
        await client.delete(f"{RUNTIME_CLASSES_PATH}/{NVIDIA_RUNTIME_CLASS}")
        pods = await client.list(f"/api/v1/namespaces/{NAMESPACE}/pods")
        evicted = [p["metadata"]["name"] for p in pods if (p.get("spec") or {}).get("nodeName") == node]
        for name in evicted:
            await client.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
        pods_text = ", ".join(evicted) or "none"
        return (
            f"RuntimeClass {NVIDIA_RUNTIME_CLASS} deleted, and {node}'s agent pod ({pods_text}): "
            "the DaemonSet controller cannot create it again (kubectl get events)"
        )
    if injection.kind is InjectionKind.STRATEGY_OVERRIDE:
        strategy = injection.value
        path = f"/api/v1/namespaces/{NAMESPACE}/configmaps/{GPU_OPERATOR_CONFIG_MAP}"
        data = {MIG_STRATEGY_KEY: "" if strategy == "off" else strategy}
        if await client.get_or_none(path) is None:
            await client.create(
                f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": GPU_OPERATOR_CONFIG_MAP}, "data": data},
            )
        else:
            await client.patch(path, {"data": data})
        return f"cluster-wide MIG strategy {strategy}: every device plugin and GFD restart with it"
    if injection.kind is InjectionKind.MIG_BROKEN:
        await client.patch(node_path, {"metadata": {"annotations": {MIG_FAULT_ANNOTATION: "broken"}}})
        return f"{node}: its MIG manager now reports success and creates nothing"
    if injection.kind is InjectionKind.CLEAR:
        if await client.get_or_none(f"{RUNTIME_CLASSES_PATH}/{NVIDIA_RUNTIME_CLASS}") is None:
            await client.create(RUNTIME_CLASSES_PATH, runtime_class())
        await client.patch(
            node_path, {"metadata": {"annotations": {FAULT_ANNOTATION: None, MIG_FAULT_ANNOTATION: None}}}
        )
        return f"{node}: faults cleared; its agent restarts without them"
    await client.patch(node_path, {"metadata": {"annotations": {FAULT_ANNOTATION: injection.text}}})
    return f"{node}: fault {injection.text!r} set; its agent restarts with it"
