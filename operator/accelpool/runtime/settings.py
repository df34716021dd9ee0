"""The operator's settings: one frozen `OperatorConfig`, from `accelpool run` flags or ACCELPOOL_* variables.

Every flag has an environment variable (`--agent-image` ↔ `ACCELPOOL_AGENT_IMAGE`); a flag wins
over its variable, the variable over the default. `accelpool run` parses the flags and hands the
config to kopf as `memo.config`; when the operator runs under plain `kopf run` (tests use
`kopf.testing.KopfRunner`), the startup handler reads the variables instead. Nothing here is a
module global set at startup. Pure (reads only the mapping it is given).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import accelpool_api as api
from accelpool.decide.render import AgentRendering
from accelpool_api import VENDOR_BACKENDS, conventions
from accelpool_core import catalog
from accelpool_core.protocol import AGENT_BACKENDS

DEFAULT_WEBHOOK_PORT = 9443
DEFAULT_WEBHOOK_CERT_DIR = "/etc/accelpool/webhook"
LOG_LEVELS = ("quiet", "info", "verbose", "debug")
VENDORS = tuple(vendor.value for vendor in catalog.Vendor)


def seconds(text: str) -> float:
    """`30`, `2.5`, `90s`, `5m`, `1h` → seconds."""
    text = str(text).strip()
    try:
        return float(text)
    except ValueError:
        return api.parse_duration(text)


def _bool(text: str) -> bool:
    return str(text).strip().lower() in ("1", "true", "yes", "on")


def _optional(text: str) -> str | None:
    return text or None


def _names(text: str) -> tuple[str, ...]:
    """`a, b,,c` → (a, b, c)."""
    return tuple(part.strip() for part in str(text).split(",") if part.strip())


def _optional_int(text: str) -> int | None:
    return int(text) if str(text).strip() else None


def _backend(text: str) -> str | None:
    """`fake` → fake; `` → None (each vendor's backend)."""
    name = str(text).strip()
    if name and name not in AGENT_BACKENDS:
        raise argparse.ArgumentTypeError(f"backend {name!r} is not one of {', '.join(AGENT_BACKENDS)} (or '')")
    return name or None


def _per_vendor(text: str) -> dict[str, str]:
    """`amd=x,aws=y` → {amd: x, aws: y}; every key a catalog vendor."""
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in str(text).split(","))):
        vendor, sep, value = item.partition("=")
        if not sep or vendor.strip() not in VENDORS or not value.strip():
            raise argparse.ArgumentTypeError(
                f"{item!r} is not VENDOR=VALUE with VENDOR one of {', '.join(VENDORS)} (e.g. amd=amdsmi,aws=neuron)"
            )
        pairs[vendor.strip()] = value.strip()
    return pairs


def _vendor_backends(text: str) -> dict[str, str]:
    """`nvidia=nvml,amd=amdsmi` → each vendor's backend, checked against the agent's backends."""
    pairs = _per_vendor(text)
    for vendor, backend in pairs.items():
        if backend not in AGENT_BACKENDS:
            raise argparse.ArgumentTypeError(
                f"backend {backend!r} for vendor {vendor} is not one of {', '.join(AGENT_BACKENDS)}"
            )
    return pairs


def _pairs(mapping: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in mapping.items())


@dataclass(frozen=True)
class _Option:
    flag: str
    dest: str
    default: Any
    help: str
    parse: Callable[[str], Any] = str
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] | None = None
    hidden: bool = False
    """Left out of `--help`: for tests, which need a period shorter than a real cluster's."""

    @property
    def env(self) -> str:
        return "ACCELPOOL_" + self.flag.lstrip("-").upper().replace("-", "_")


_AGENT_DEFAULTS = AgentRendering()
OPTIONS: tuple[_Option, ...] = (
    _Option(
        "--namespace",
        "namespace",
        conventions.DEFAULT_NAMESPACE,
        "namespace of the NVIDIA ConfigMaps (the GPU Operator's, e.g. gpu-operator) and, by default, of the agents",
        aliases=("--config-namespace",),
    ),
    _Option("--agent-namespace", "agent_namespace", None, "namespace of the agent DaemonSets (default: --namespace)"),
    _Option(
        "--device-plugin-configmap",
        "device_plugin_configmap",
        conventions.DEFAULT_DEVICE_PLUGIN_CONFIGMAP,
        "the device plugin's ConfigMap: a key per pool plus 'default'",
    ),
    _Option(
        "--mig-configmap",
        "mig_configmap",
        conventions.DEFAULT_MIG_CONFIGMAP,
        "mig-parted's ConfigMap (key config.yaml): an entry per MIG pool plus 'all-disabled'",
    ),
    _Option("--kubeconfig", "kubeconfig", None, "kubeconfig file (default: in-cluster, then $KUBECONFIG)"),
    _Option("--server", "server", None, "API server URL without authentication (the demo's emulator, kubectl proxy)"),
    _Option("--metrics-address", "metrics_address", "0.0.0.0", "address of the /metrics server"),
    _Option("--metrics-port", "metrics_port", 8080, "port of /metrics (0: off)", parse=int),
    _Option("--liveness-port", "liveness_port", 8081, "port of kopf's liveness endpoint /healthz (0: off)", parse=int),
    _Option("--webhook-address", "webhook_address", "0.0.0.0", "address of the admission webhook's HTTPS server"),
    _Option(
        "--webhook-port",
        "webhook_port",
        DEFAULT_WEBHOOK_PORT,
        "HTTPS port of the ComputePool validating admission webhook (0: off)",
        parse=int,
    ),
    _Option(
        "--webhook-cert-dir",
        "webhook_cert_dir",
        DEFAULT_WEBHOOK_CERT_DIR,
        "directory holding the webhook's serving certificate and key, tls.crt and tls.key",
    ),
    _Option(
        "--webhook-client-ca",
        "webhook_client_ca",
        None,
        "PEM file of the CAs whose client certificates the webhook accepts: with it, every caller must present "
        "one (kube-apiserver does with an AdmissionConfiguration kubeConfigFile); '' (default): no client "
        "authentication",
        parse=_optional,
    ),
    _Option(
        "--webhook-client-names",
        "webhook_client_names",
        (),
        "comma-separated names (subject CN or DNS subjectAltName) one of which a client certificate must carry; "
        "'' (default): any certificate --webhook-client-ca signed",
        parse=_names,
    ),
    _Option(
        "--liveness",
        "liveness",
        None,
        "kopf-style liveness URL, e.g. http://0.0.0.0:8081/healthz (wins over --liveness-port)",
    ),
    _Option(
        "--agent-image",
        "agent_image",
        _AGENT_DEFAULTS.image,
        "agent image of NVIDIA pools, of the vendors not in --agent-images and of simulated backends (fake, cpu)",
    ),
    _Option(
        "--agent-images",
        "agent_images",
        {},
        "the agent image per vendor, over the defaults "
        f"({_pairs(_AGENT_DEFAULTS.images)}): VENDOR=IMAGE,... (e.g. amd=registry/accelpool-agent-rocm:0.1.0)",
        parse=_per_vendor,
    ),
    _Option(
        "--agent-image-pull-policy", "agent_image_pull_policy", _AGENT_DEFAULTS.image_pull_policy, "imagePullPolicy"
    ),
    _Option(
        "--agent-backend",
        "agent_backend",
        None,
        f"one --backend for every pool's agents, e.g. fake for a simulated cluster ({', '.join(AGENT_BACKENDS)}); "
        "'': each vendor's from --agent-backends",
        parse=_backend,
    ),
    _Option(
        "--agent-backends",
        "agent_backends",
        dict(VENDOR_BACKENDS),
        f"the agents' --backend per catalog vendor: VENDOR=BACKEND,... (default {_pairs(VENDOR_BACKENDS)}); "
        "a pool's spec.health.backend wins",
        parse=_vendor_backends,
    ),
    _Option(
        "--agent-runtime-class",
        "agent_runtime_class",
        _AGENT_DEFAULTS.runtime_class,
        "runtimeClassName of NVIDIA pools' agents ('' to leave unset)",
        parse=_optional,
    ),
    _Option(
        "--agent-privileged",
        "agent_privileged",
        False,
        "run agents privileged with the host's /dev (instead of relying on the NVIDIA runtime); the amdsmi, "
        "neuron and tpu backends always run so",
        parse=_bool,
    ),
    _Option(
        "--agent-service-account", "agent_service_account", _AGENT_DEFAULTS.service_account, "agents' ServiceAccount"
    ),
    _Option("--agent-cpu-request", "agent_cpu_request", _AGENT_DEFAULTS.cpu_request, "agent CPU request"),
    _Option("--agent-memory-request", "agent_memory_request", _AGENT_DEFAULTS.memory_request, "agent memory request"),
    _Option("--agent-cpu-limit", "agent_cpu_limit", None, "agent CPU limit (default: none)", parse=_optional),
    _Option(
        "--agent-memory-limit",
        "agent_memory_limit",
        _AGENT_DEFAULTS.memory_limit,
        "agent memory limit ('' for none)",
        parse=_optional,
    ),
    _Option("--agent-priority-class", "agent_priority_class", None, "agents' priorityClassName", parse=_optional),
    _Option("--agent-port", "agent_port", _AGENT_DEFAULTS.port, "the agents' /metrics and /healthz port", parse=int),
    _Option("--events-namespace", "events_namespace", "default", "namespace of Events about nodes and pools"),
    _Option(
        "--resync-interval",
        "resync_seconds",
        300.0,
        "re-read ConfigMaps, DaemonSets, NodePools, Kueue's flavors and queues this often",
        parse=seconds,
    ),
    _Option(
        "--status-interval",
        "status_resync_seconds",
        60.0,
        "re-check each pool's status against the plan at least this often",
        parse=seconds,
    ),
    _Option(
        "--status-settle",
        "status_settle_seconds",
        1.0,
        "hold a pool's status change this long so quick successive changes make one write",
        parse=seconds,
    ),
    _Option(
        "--agent-check-interval",
        "agent_check_seconds",
        30.0,
        "list the agents' DaemonSets, pods and FailedCreate Events (one list each, all pools) at most this "
        "often, and plan again this often, so AgentReady says why agents cannot run",
        parse=seconds,
    ),
    _Option(
        "--config-sync",
        "config_sync_seconds",
        60.0,
        "move a member of an edited pool to its new NVIDIA config, and give a joining node its MIG config, only "
        "once that config has been stored this long: the kubelet projects ConfigMap updates into NVIDIA's pods "
        "up to about a minute later",
        parse=seconds,
    ),
    _Option("--debounce", "debounce_seconds", 0.1, "gather changes this long before a reconcile pass", parse=seconds),
    _Option(
        "--not-ready-grace",
        "not_ready_grace_seconds",
        300.0,
        "a NotReady member is replaced by a spare after this long",
        parse=seconds,
    ),
    _Option(
        "--agent-silent-after",
        "health_stale_seconds",
        conventions.HEALTH_STALE_SECONDS,
        "read an agent's AcceleratorHealthy condition as Unknown (AgentSilent) once the operator has seen it "
        "unchanged this long (the agents rewrite it every 5 minutes)",
        parse=seconds,
        hidden=True,
    ),
    _Option(
        "--tolerated-taints",
        "tolerated_taints",
        ",".join(conventions.ACCELERATOR_TAINTS),
        "comma-separated taints (key or key=value) that do not stop a node from being claimed; "
        "any other NoSchedule/NoExecute taint reserves the node for someone else",
        parse=lambda text: tuple(p.strip() for p in str(text).split(",") if p.strip()),
    ),
    _Option("--write-concurrency", "write_concurrency", 16, "node patches in flight at once", parse=int),
    _Option("--max-workers", "max_workers", 4, "kopf's executor threads (handlers are async)", parse=int),
    _Option(
        "--peering",
        "peering",
        None,
        "the ClusterKopfPeering object the replicas share: one leads, the others stand by (default: standalone)",
        parse=_optional,
    ),
    _Option(
        "--priority",
        "priority",
        None,
        "this replica's kopf peering priority: the live replica with the highest one leads (default with "
        "--peering: minus its start time in microseconds, so the longest-running replica leads)",
        parse=_optional_int,
    ),
    _Option(
        "--peering-lifetime",
        "peering_lifetime",
        60,
        "seconds a replica's peering record stays alive without a keepalive (kopf renews it 5-10 s "
        "earlier): how long a standby waits before taking over from a leader that died without a word",
        parse=int,
    ),
    _Option("--log-level", "log_level", "info", "log verbosity", choices=LOG_LEVELS),
)


@dataclass(frozen=True)
class OperatorConfig:
    """Everything `accelpool run` can be told."""

    namespace: str = conventions.DEFAULT_NAMESPACE
    agent_namespace: str | None = None
    device_plugin_configmap: str = conventions.DEFAULT_DEVICE_PLUGIN_CONFIGMAP
    mig_configmap: str = conventions.DEFAULT_MIG_CONFIGMAP
    kubeconfig: str | None = None
    server: str | None = None
    metrics_address: str = "0.0.0.0"
    metrics_port: int = 8080
    liveness_port: int = 8081
    liveness: str | None = None
    webhook_address: str = "0.0.0.0"
    webhook_port: int = DEFAULT_WEBHOOK_PORT
    webhook_cert_dir: str = DEFAULT_WEBHOOK_CERT_DIR
    webhook_client_ca: str | None = None
    webhook_client_names: tuple[str, ...] = ()
    agent: AgentRendering = field(default_factory=AgentRendering)
    events_namespace: str = "default"
    resync_seconds: float = 300.0
    status_resync_seconds: float = 60.0
    status_settle_seconds: float = 1.0
    agent_check_seconds: float = 30.0
    config_sync_seconds: float = 60.0
    debounce_seconds: float = 0.1
    not_ready_grace_seconds: float = 300.0
    health_stale_seconds: float = conventions.HEALTH_STALE_SECONDS
    tolerated_taints: tuple[str, ...] = conventions.ACCELERATOR_TAINTS
    write_concurrency: int = 16
    max_workers: int = 4
    peering: str | None = None
    priority: int | None = None
    peering_lifetime: int = 60
    log_level: str = "info"

    @property
    def liveness_endpoint(self) -> str | None:
        if self.liveness:
            return self.liveness
        return f"http://0.0.0.0:{self.liveness_port}/healthz" if self.liveness_port else None

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> OperatorConfig:
        namespace = values.get("namespace") or conventions.DEFAULT_NAMESPACE
        agent = AgentRendering(
            namespace=values.get("agent_namespace") or namespace,
            image=values.get("agent_image") or _AGENT_DEFAULTS.image,
            images={**_AGENT_DEFAULTS.images, **(values.get("agent_images") or {})},
            image_pull_policy=values.get("agent_image_pull_policy") or _AGENT_DEFAULTS.image_pull_policy,
            backend=values.get("agent_backend") or None,
            backends={**VENDOR_BACKENDS, **(values.get("agent_backends") or {})},
            runtime_class=values.get("agent_runtime_class", _AGENT_DEFAULTS.runtime_class),
            privileged=bool(values.get("agent_privileged", False)),
            service_account=values.get("agent_service_account") or _AGENT_DEFAULTS.service_account,
            cpu_request=values.get("agent_cpu_request") or _AGENT_DEFAULTS.cpu_request,
            memory_request=values.get("agent_memory_request") or _AGENT_DEFAULTS.memory_request,
            cpu_limit=values.get("agent_cpu_limit"),
            memory_limit=values.get("agent_memory_limit", _AGENT_DEFAULTS.memory_limit),
            priority_class=values.get("agent_priority_class"),
            port=int(values.get("agent_port") or _AGENT_DEFAULTS.port),
        )
        plain = {
            f: values[f]
            for f in cls.__dataclass_fields__
            if f in values and f not in ("agent",) and values[f] is not None
        }
        plain["namespace"] = namespace
        return cls(agent=agent, **plain)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> OperatorConfig:
        values: dict[str, Any] = {}
        for option in OPTIONS:
            if option.env in environ:
                values[option.dest] = option.parse(environ[option.env])
        return cls.from_values(values)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> OperatorConfig:
        return cls.from_values({option.dest: getattr(args, option.dest) for option in OPTIONS})


def add_arguments(parser: argparse.ArgumentParser, environ: Mapping[str, str]) -> None:
    """Add every operator flag, its default taken from ACCELPOOL_<FLAG> when set."""
    for option in OPTIONS:
        default = option.parse(environ[option.env]) if option.env in environ else option.default
        kwargs: dict[str, Any] = {
            "dest": option.dest,
            "default": default,
            "help": f"{option.help} [{option.env}; default: {option.default!r}]",
        }
        if option.hidden:
            kwargs["help"] = argparse.SUPPRESS
        if option.parse is _bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = option.parse
            kwargs["metavar"] = option.dest.upper().replace("_SECONDS", "")
        if option.choices:
            kwargs["choices"] = option.choices
        parser.add_argument(option.flag, *option.aliases, **kwargs)
