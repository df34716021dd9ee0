"""`accelpool run`: the operator (kopf), watching ComputePools and Nodes cluster-wide.

    accelpool run                                   # in-cluster, ConfigMaps in accelpool-system
    accelpool run --kubeconfig ~/.kube/config --namespace gpu-operator --webhook-port=0
    accelpool run --server http://127.0.0.1:8001 --webhook-port=0   # kubectl proxy, or the demo's emulator

Every flag has an ACCELPOOL_<FLAG> environment variable (see --help). Serves /metrics on
--metrics-port (8080), kopf's liveness endpoint /healthz on --liveness-port (8081), and the
ComputePool admission webhook over HTTPS on --webhook-port (9443) with the certificate in
--webhook-cert-dir; without that certificate it exits at once (status 2) unless --webhook-port=0,
as outside a cluster, where no API server calls it. Exit 0 on SIGTERM/SIGINT.

Runs standalone unless --peering names a ClusterKopfPeering object shared by several replicas:
the live one with the highest --priority leads, the others stand by and write nothing
(`accelpool.runtime.leadership`). Without --priority a replica's is derived from its start time, so the
longest-running one leads. kopf names each replica by $POD_ID (the chart sets the pod's name).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
import time
from typing import Any

import kopf

from accelpool.cli.commands import SUMMARIES
from accelpool.runtime import collector_tuning, leadership, webhook
from accelpool.runtime.settings import OperatorConfig, add_arguments


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help=SUMMARIES["run"],
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser, os.environ)
    parser.set_defaults(func=run)


def _configure_logging(level: str) -> None:
    kopf.configure(
        debug=level == "debug",
        verbose=level in ("verbose", "debug"),
        quiet=level == "quiet",
        log_format=kopf.LogFormat.FULL,
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def run(args: argparse.Namespace) -> int:
    config = OperatorConfig.from_args(args)
    if config.webhook_port:
        try:
            webhook.tls_context(
                config.webhook_cert_dir, client_ca=config.webhook_client_ca, client_names=config.webhook_client_names
            )
        except webhook.CertificateError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    _configure_logging(config.log_level)
    importlib.import_module("accelpool.runtime.handlers")  # registers the handlers with kopf's default registry
    collector_tuning.tune()
    asyncio.run(
        kopf.operator(
            clusterwide=True,
            standalone=config.peering is None,
            peering_name=config.peering,
            priority=_priority(config),
            liveness_endpoint=config.liveness_endpoint,
            memo=kopf.Memo(config=config),
        )
    )
    return 0


def _priority(config: OperatorConfig) -> int | None:
    """--priority, or with --peering one derived from now (`leadership.priority_by_age`)."""
    if config.peering is None or config.priority is not None:
        return config.priority
    return leadership.priority_by_age(time.time_ns())
