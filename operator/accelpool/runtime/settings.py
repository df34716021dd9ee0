"""The operator's settings: one frozen `OperatorConfig`, from `accelpool run` flags or ACCELPOOL_* variables.

Each setting is declared once, as a field of `OperatorConfig` made by `option()`: its flag, its
environment variable (`--agent-image` ↔ `ACCELPOOL_AGENT_IMAGE`), its default and its help. A flag wins
over its variable, the variable over the default. `accelpool run` parses the flags and hands the
config to kopf as `memo.config`; when the operator runs under plain `kopf run` (tests use
`kopf.testing.KopfRunner`), the startup handler reads the variables instead. Nothing here is a
module global set at startup. Pure (reads only the mapping it is given).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from accelpool.decide.render import AgentRendering
from accelpool_api import VENDOR_BACKENDS, conventions
from accelpool_core import catalog
from accelpool_core.durations import seconds
from accelpool_core.protocol import AGENT_BACKENDS

DEFAULT_WEBHOOK_PORT = 9443
DEFAULT_WEBHOOK_CERT_DIR = "/etc/accelpool/webhook"
LOG_LEVELS = ("quiet", "info", "verbose", "debug")
VENDORS = tuple(vendor.value for vendor in catalog.Vendor)


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
class Option:
    """One setting of `accelpool run`: its flag, its ACCELPOOL_* variable, its default and its help."""

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


def option(
    flag: str,
    default: Any,
    help: str,
    *,
    parse: Callable[[str], Any] = str,
    aliases: tuple[str, ...] = (),
    choices: tuple[str, ...] | None = None,
    hidden: bool = False,
) -> Any:
    """A field of `OperatorConfig` that is also a flag: the one place its default, flag and help are declared."""
    declared = Option(flag, "", default, help, parse, aliases, choices, hidden)
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata={"option": declared})
    return field(default=default, metadata={"option": declared})


_AGENT_DEFAULTS = AgentRendering()


@dataclass(frozen=True)
class OperatorConfig:
    """Everything `accelpool run` can be told: each field is a flag and an ACCELPOOL_* variable."""

    namespace: str = option(
        "--namespace",
        conventions.DEFAULT_NAMESPACE,
        "namespace of the NVIDIA ConfigMaps (the GPU Operator's, e.g. gpu-operator) and, by default, of the agents",
        aliases=("--config-namespace",),
    )
    agent_namespace: str | None = option(
        "--agent-namespace", None, "namespace of the agent DaemonSets (default: --namespace)"
    )
    device_plugin_configmap: str = option(
        "--device-plugin-configmap",
        conventions.DEFAULT_DEVICE_PLUGIN_CONFIGMAP,
        "the device plugin's ConfigMap: a key per pool plus 'default'",
    )
    mig_configmap: str = option(
        "--mig-configmap",
        conventions.DEFAULT_MIG_CONFIGMAP,
        "mig-parted's ConfigMap (key config.yaml): an entry per MIG pool plus 'all-disabled'",
    )
    kubeconfig: str | None = option("--kubeconfig", None, "kubeconfig file (default: in-cluster, then $KUBECONFIG)")
    server: str | None = option(
        "--server", None, "API server URL without authentication (the demo's emulator, kubectl proxy)"
    )
    metrics_address: str = option("--metrics-address", "0.0.0.0", "address of the /metrics server")
    metrics_port: int = option("--metrics-port", 8080, "port of /metrics (0: off)", parse=int)
    liveness_port: int = option(
        "--liveness-port", 8081, "port of kopf's liveness endpoint /healthz (0: off)", parse=int
    )
    webhook_address: str = option("--webhook-address", "0.0.0.0", "address of the admission webhook's HTTPS server")
    webhook_port: int = option(
        "--webhook-port",
        DEFAULT_WEBHOOK_PORT,
        "HTTPS port of the ComputePool validating admission webhook (0: off)",
        parse=int,
    )
    webhook_cert_dir: str = option(
        "--webhook-cert-dir",
        DEFAULT_WEBHOOK_CERT_DIR,
        "directory holding the webhook's serving certificate and key, tls.crt and tls.key",
    )
    webhook_client_ca: str | None = option(
        "--webhook-client-ca",
        None,
        "PEM file of the CAs whose client certificates the webhook accepts: with it, every caller must present "
        "one (kube-apiserver does with an AdmissionConfiguration kubeConfigFile); '' (default): no client "
        "authentication",
        parse=_optional,
    )
    webhook_client_names: tuple[str, ...] = option(
        "--webhook-client-names",
        (),
        "comma-separated names (subject CN or DNS subjectAltName) one of which a client certificate must carry; "
        "'' (default): any certificate --webhook-client-ca signed",
        parse=_names,
    )
    liveness: str | None = option(
        "--liveness", None, "kopf-style liveness URL, e.g. http://0.0.0.0:8081/healthz (wins over --liveness-port)"
    )
    agent_image: str = option(
        "--agent-image",
        _AGENT_DEFAULTS.image,
        "agent image of NVIDIA pools, of the vendors not in --agent-images and of simulated backends (fake, cpu)",
    )
    agent_images: Mapping[str, str] = option(
        "--agent-images",
        {},
        "the agent image per vendor, over the defaults "
        f"({_pairs(_AGENT_DEFAULTS.images)}): VENDOR=IMAGE,... (e.g. amd=registry/accelpool-agent-rocm:0.1.0)",
        parse=_per_vendor,
    )
    agent_image_pull_policy: str = option(
        "--agent-image-pull-policy", _AGENT_DEFAULTS.image_pull_policy, "imagePullPolicy"
    )
    agent_backend: str | None = option(
        "--agent-backend",
        None,
        f"one --backend for every pool's agents, e.g. fake for a simulated cluster ({', '.join(AGENT_BACKENDS)}); "
        "'': each vendor's from --agent-backends",
        parse=_backend,
    )
    agent_backends: Mapping[str, str] = option(
        "--agent-backends",
        dict(VENDOR_BACKENDS),
        f"the agents' --backend per catalog vendor: VENDOR=BACKEND,... (default {_pairs(VENDOR_BACKENDS)}); "
        "a pool's spec.health.backend wins",
        parse=_vendor_backends,
    )
    agent_runtime_class: str | None = option(
        "--agent-runtime-class",
        _AGENT_DEFAULTS.runtime_class,
        "runtimeClassName of NVIDIA pools' agents ('' to leave unset)",
        parse=_optional,
    )
    agent_privileged: bool = option(
        "--agent-privileged",
        False,
        "run agents privileged with the host's /dev (instead of relying on the NVIDIA runtime); the amdsmi, "
        "neuron and tpu backends always run so",
        parse=_bool,
    )
    agent_service_account: str = option(
        "--agent-service-account", _AGENT_DEFAULTS.service_account, "agents' ServiceAccount"
    )
    agent_cpu_request: str = option("--agent-cpu-request", _AGENT_DEFAULTS.cpu_request, "agent CPU request")
    agent_memory_request: str = option("--agent-memory-request", _AGENT_DEFAULTS.memory_request, "agent memory request")
    agent_cpu_limit: str | None = option("--agent-cpu-limit", None, "agent CPU limit (default: none)", parse=_optional)
    agent_memory_limit: str | None = option(
        "--agent-memory-limit", _AGENT_DEFAULTS.memory_limit, "agent memory limit ('' for none)", parse=_optional
    )
    agent_priority_class: str | None = option(
        "--agent-priority-class", None, "agents' priorityClassName", parse=_optional
    )
    agent_port: int = option("--agent-port", _AGENT_DEFAULTS.port, "the agents' /metrics and /healthz port", parse=int)
    events_namespace: str = option("--events-namespace", "default", "namespace of Events about nodes and pools")
    resync_seconds: float = option(
        "--resync-interval",
        300.0,
        "re-read ConfigMaps, DaemonSets, NodePools, Kueue's flavors and queues this often",
        parse=seconds,
    )
    status_resync_seconds: float = option(
        "--status-interval", 60.0, "re-check each pool's status against the plan at least this often", parse=seconds
    )
    status_settle_seconds: float = option(
        "--status-settle",
        1.0,
        "hold a pool's status change this long so quick successive changes make one write",
        parse=seconds,
    )
    agent_check_seconds: float = option(
        "--agent-check-interval",
        30.0,
        "plan with the agent DaemonSets' counts at most this long after they change (the agents' DaemonSets, "
        "pods and FailedCreate Events are watched; a pod's or an Event's change is planned with at once); where "
        "RBAC grants list but not watch, list them this often instead",
        parse=seconds,
    )
    config_sync_seconds: float = option(
        "--config-sync",
        60.0,
        "move a member of an edited pool to its new NVIDIA config, and give a joining node its MIG config, only "
        "once that config has been stored this long: the kubelet projects ConfigMap updates into NVIDIA's pods "
        "up to about a minute later",
        parse=seconds,
    )
    debounce_seconds: float = option(
        "--debounce", 0.1, "gather changes this long before a reconcile pass", parse=seconds
    )
    not_ready_grace_seconds: float = option(
        "--not-ready-grace", 300.0, "a NotReady member is replaced by a spare after this long", parse=seconds
    )
    health_stale_seconds: float = option(
        "--agent-silent-after",
        conventions.HEALTH_STALE_SECONDS,
        "read an agent's AcceleratorHealthy condition as Unknown (AgentSilent) once the operator has seen it "
        "unchanged this long (the agents rewrite it every 5 minutes)",
        parse=seconds,
        hidden=True,
    )
    tolerated_taints: tuple[str, ...] = option(
        "--tolerated-taints",
        conventions.ACCELERATOR_TAINTS,
        "comma-separated taints (key or key=value) that do not stop a node from being claimed; "
        "any other NoSchedule/NoExecute taint reserves the node for someone else",
        parse=_names,
    )
    device_taint_rules: Literal["auto", "v1beta2", "off"] = option(
        "--device-taint-rules",
        "auto",
        "allocation DRA pools: quarantine a bad GPU alone with a DeviceTaintRule where the cluster serves "
        "resource.k8s.io/v1 ones (auto, Kubernetes 1.37+); v1beta2 also writes Kubernetes 1.36's beta rules "
        "(kube-scheduler and kube-controller-manager need --feature-gates=DRADeviceTaintRules=true); off always "
        "quarantines the node",
        choices=("auto", "v1beta2", "off"),
    )
    dra_plugin_namespace: str | None = option(
        "--dra-plugin-namespace",
        None,
        "where NVIDIA's DRA kubelet plugin runs: the operator restarts it on a static-MIG DRA pool's member whose new "
        "layout its ResourceSlices do not show (it reads MIG devices only at start); unset: it is left alone",
        parse=_optional,
    )
    dra_plugin_selector: str = option(
        "--dra-plugin-selector",
        "app.kubernetes.io/name in (dra-driver-nvidia-gpu,nvidia-dra-driver-gpu)",
        "label selector of NVIDIA's DRA driver pods (the kubelet plugin's carry kubelet-plugin in their name)",
    )
    write_concurrency: int = option("--write-concurrency", 16, "node patches in flight at once", parse=int)
    max_workers: int = option("--max-workers", 4, "kopf's executor threads (handlers are async)", parse=int)
    peering: str | None = option(
        "--peering",
        None,
        "the ClusterKopfPeering object the replicas share: one leads, the others stand by (default: standalone)",
        parse=_optional,
    )
    priority: int | None = option(
        "--priority",
        None,
        "this replica's kopf peering priority: the live replica with the highest one leads (default with "
        "--peering: minus its start time in microseconds, so the longest-running replica leads)",
        parse=_optional_int,
    )
    peering_lifetime: int = option(
        "--peering-lifetime",
        60,
        "seconds a replica's peering record stays alive without a keepalive (kopf renews it 5-10 s "
        "earlier): how long a standby waits before taking over from a leader that died without a word",
        parse=int,
    )
    log_level: str = option("--log-level", "info", "log verbosity", choices=LOG_LEVELS)

    @functools.cached_property
    def agent(self) -> AgentRendering:
        """How agent DaemonSets are rendered: the `--agent-*` settings over `AgentRendering`'s defaults."""
        return AgentRendering(
            namespace=self.agent_namespace or self.namespace,
            image=self.agent_image,
            images={**_AGENT_DEFAULTS.images, **self.agent_images},
            image_pull_policy=self.agent_image_pull_policy,
            backend=self.agent_backend,
            backends={**VENDOR_BACKENDS, **self.agent_backends},
            runtime_class=self.agent_runtime_class,
            privileged=self.agent_privileged,
            service_account=self.agent_service_account,
            cpu_request=self.agent_cpu_request,
            memory_request=self.agent_memory_request,
            cpu_limit=self.agent_cpu_limit,
            memory_limit=self.agent_memory_limit,
            priority_class=self.agent_priority_class,
            port=self.agent_port,
        )

    @property
    def liveness_endpoint(self) -> str | None:
        if self.liveness:
            return self.liveness
        return f"http://0.0.0.0:{self.liveness_port}/healthz" if self.liveness_port else None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> OperatorConfig:
        """The settings the ACCELPOOL_* variables give; the defaults for the others."""
        return cls(**{o.dest: o.parse(environ[o.env]) for o in OPTIONS if o.env in environ})

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> OperatorConfig:
        return cls(**{option.dest: getattr(args, option.dest) for option in OPTIONS})


OPTIONS: tuple[Option, ...] = tuple(
    dataclasses.replace(f.metadata["option"], dest=f.name) for f in dataclasses.fields(OperatorConfig)
)
"""Every setting, in declaration order, with its field's name as `dest`."""


def as_flag(value: Any) -> str:
    """A setting's value as its flag would be written: `a,b` for names, `k=v,...` for maps, `` for none."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, Mapping):
        return _pairs(value)
    return str(value)


def add_arguments(parser: argparse.ArgumentParser, environ: Mapping[str, str]) -> None:
    """Add every operator flag, its default taken from ACCELPOOL_<FLAG> when set."""
    for option in OPTIONS:
        default = option.parse(environ[option.env]) if option.env in environ else option.default
        kwargs: dict[str, Any] = {
            "dest": option.dest,
            "default": default,
            "help": f"{option.help} [{option.env}; default: {as_flag(option.default)!r}]",
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
