"""The kopf handlers: thin, typed, and all delegating to the one `Controller` kept in kopf's memo.

kopf does what it is good at; the controller (`accelpool.runtime.controller`) does the rest:

- `@kopf.index` of ComputePools (`pool_records`: name → `PoolRecord`): an input of the controller,
  kept current by kopf's watch; no list call per pass. Nodes are not kopf's: the controller keeps
  them with its own informer (`accelpool.runtime.controller.nodewatch`, which says why), started here.
- `@kopf.on.event` for ComputePools: nudge the controller when something planning depends on
  changed (the spec, deletion); the controller decides whether it did.
- `@kopf.on.delete` (the finalizer `accelpool.io/finalizer`): waits until a pass has released
  the pool's nodes, removed its config keys and deleted its DaemonSet and NodePool.
- `@kopf.on.startup/login/probe/cleanup`: settings from `memo.config` (set by `accelpool run`)
  or the ACCELPOOL_* variables (under `kopf run`), the API credentials, the controller's task (with
  peering, paused until kopf runs this replica: `accelpool.runtime.leadership`), the
  /metrics server, the liveness probe, and the admission webhook's HTTPS server
  (`accelpool.runtime.webhook`; missing certificate files stop the operator at startup).

Statuses are written by the controller's passes, not by a handler. kopf's persistence: the
finalizer is `accelpool.io/finalizer`; handler progress and the diff base are kept in memory
(`MemoryProgressStorage`, `MemoryDiffBaseStorage`), because kopf's annotations would cost writes
on every pool; only a delayed retry of the delete handler "touches" the pool (an `accelpool.io/`
annotation) to be woken up.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
from typing import Any

import kopf

import accelpool_api as api
from accelpool.decide.inputs import PoolRecord
from accelpool.model.revisions import Revision
from accelpool.runtime import leadership, webhook
from accelpool.runtime.controller import Controller
from accelpool.runtime.metrics import OperatorMetrics, serve
from accelpool.runtime.settings import OperatorConfig
from accelpool_core.credentials import Credentials, token_refresh_time
from accelpool_core.kube import KubeClient

RESOURCE = (api.GROUP, api.VERSION, api.PLURAL)
RELEASE_WAIT_SECONDS = 60.0
FINALIZER = f"{api.GROUP}/finalizer"
POOL_INDEX = "pool_records"
"""kopf passes each index to handlers as a keyword argument named after its function."""


def _config(memo: Any) -> OperatorConfig:
    config = getattr(memo, "config", None)
    if not isinstance(config, OperatorConfig):
        config = OperatorConfig.from_env(os.environ)
        memo.config = config
    return config


def _controller(memo: Any) -> Controller:
    controller = getattr(memo, "controller", None)
    if not isinstance(controller, Controller):
        raise kopf.TemporaryError("the controller is not started yet", delay=1)
    return controller


Versioned = tuple[str, PoolRecord]
"""A pool index value: the pool's resourceVersion and its record (see `pool_records`)."""


class PoolRecords:
    """The pool index's records by name, as the controller's pool source: a `Revision` of the last answer, with the
    pools a pool event named (`changed`) read from kopf's index again, not all 500 at every pass (each status a pass
    writes is such an event). kopf updates an index before it calls the event handlers of the same watch event
    (kopf/_core/reactor/processing.py, `process_resource_event`: `index_resource`, then the causes), and
    `pool_event` calls `changed` first."""

    def __init__(self, index: kopf.Index[str, Versioned]) -> None:
        self._index = index
        self._records: Revision[PoolRecord] | None = None
        self._changed: set[str] = set()

    def changed(self, name: str) -> None:
        self._changed.add(name)

    def __call__(self) -> Revision[PoolRecord]:
        index, changed = self._index, self._changed
        if self._records is None:
            self._records = Revision({record.name: record for key in list(index) for _, record in index.get(key, ())})
        elif changed:
            self._records = self._records.revised({name: _first(index, name) for name in changed})
        self._changed = set()
        return self._records


def _first(index: kopf.Index[str, Versioned], key: str) -> PoolRecord | None:
    found = next(iter(index.get(key, ())), None)
    return found[1] if found is not None else None


class MemoryDiffBaseStorage(kopf.DiffBaseStorage):
    """Keeps each pool's last handled spec in memory instead of writing it into an annotation.

    The controller compares specs itself, so kopf needs its diff base only for its own
    bookkeeping while it runs. After a restart every pool counts as new once, which costs
    nothing instead of one API write per pool and spec change.
    """

    def __init__(self) -> None:
        super().__init__()
        self._essences: dict[str, kopf.BodyEssence] = {}

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return self._essences.get(body.metadata.uid or body.metadata.name or "")

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        self._essences[body.metadata.uid or body.metadata.name or ""] = essence


class MemoryProgressStorage(kopf.ProgressStorage):
    """Keeps handler progress (retries, delays) in memory; only the wake-up "touch" is written.

    kopf's annotation storage marks every object it handles (one write per pool). The delete
    handler is idempotent, so losing its retry count on a restart costs nothing; when it asks
    to be retried later, kopf still touches the object (an annotation under accelpool.io/) to
    get the event that retries it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._records: dict[tuple[str, str], kopf.ProgressRecord] = {}
        self._toucher = kopf.AnnotationsProgressStorage(prefix=api.GROUP)

    @staticmethod
    def _id(body: kopf.Body) -> str:
        return body.metadata.uid or body.metadata.name or ""

    def fetch(self, *, key: kopf.HandlerId, body: kopf.Body) -> kopf.ProgressRecord | None:
        return self._records.get((self._id(body), key))

    def store(self, *, key: kopf.HandlerId, record: kopf.ProgressRecord, body: kopf.Body, patch: kopf.Patch) -> None:
        self._records[(self._id(body), key)] = record

    def purge(self, *, key: kopf.HandlerId, body: kopf.Body, patch: kopf.Patch) -> None:
        self._records.pop((self._id(body), key), None)

    def touch(self, *, body: kopf.Body, patch: kopf.Patch, value: str | None) -> None:
        self._toucher.touch(body=body, patch=patch, value=value)

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        return self._toucher.clear(essence=essence)


def configure(settings: kopf.OperatorSettings, config: OperatorConfig) -> None:
    """kopf tuned for a cluster with thousands of nodes and a few hundred pools."""
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = MemoryProgressStorage()
    settings.persistence.diffbase_storage = MemoryDiffBaseStorage()
    settings.posting.level = logging.WARNING
    settings.posting.reporting_component = "accelpool"
    settings.execution.max_workers = max(1, config.max_workers)
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60
    settings.queueing.worker_limit = None  # one worker per pool (nodes are watched by the controller itself)


# ---------------------------------------------------------------- activities


@kopf.on.startup(id="webhook")
async def start_webhook(memo: Any, **_: Any) -> None:
    if getattr(memo, "webhook_server", None) is None:
        memo.webhook_server = await serve_webhook(_config(memo))


async def serve_webhook(config: OperatorConfig) -> webhook.WebhookServer | None:
    """The admission webhook's server, unless --webhook-port=0; no certificate stops the operator."""
    if not config.webhook_port:
        return None
    try:
        return await webhook.serve(
            config.webhook_cert_dir,
            config.webhook_port,
            host=config.webhook_address,
            client_ca=config.webhook_client_ca,
            client_names=config.webhook_client_names,
        )
    except webhook.CertificateError as error:
        raise kopf.PermanentError(str(error)) from error


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: Any, logger: kopf.Logger, **kwargs: Any) -> None:
    pool_index: kopf.Index[str, Versioned] = kwargs[POOL_INDEX]
    config = _config(memo)
    configure(settings, config)
    client = KubeClient(Credentials.discover(config.kubeconfig, config.server))
    metrics = OperatorMetrics()
    controller = Controller(config, client, metrics)
    memo.pool_records = PoolRecords(pool_index)
    controller.bind(nodes=controller.watch_nodes().views, pools=memo.pool_records)
    controller.task = asyncio.create_task(controller.run(), name="accelpool controller")
    memo.controller = controller
    leadership.follow_kopf(settings, memo, controller, lifetime=config.peering_lifetime)
    memo.metrics_server = (
        await serve(metrics, config.metrics_address, config.metrics_port) if config.metrics_port else None
    )
    logger.info(
        "accelpool operator: ConfigMaps %s/%s and %s/%s, agents in %s (%s), metrics on :%s",
        config.namespace,
        config.device_plugin_configmap,
        config.namespace,
        config.mig_configmap,
        config.agent.namespace,
        config.agent.image,
        config.metrics_port or "off",
    )


@kopf.on.login()
async def login(memo: Any, **_: Any) -> kopf.ConnectionInfo:
    """The API credentials for kopf, read afresh each time kopf asks: after a 401, and at the
    `expiration` set here, before the pod's rotating ServiceAccount token goes stale. Embedded
    certificates and keys are passed as data (kopf holds them in memory)."""
    config = _config(memo)
    credentials = Credentials.discover(config.kubeconfig, config.server)
    token = credentials.bearer_token()
    return kopf.ConnectionInfo(
        server=credentials.server,
        token=token,
        scheme="Bearer" if token else None,
        ca_path=credentials.ca_path,
        ca_data=credentials.ca_data,
        certificate_path=credentials.client_cert_path,
        certificate_data=credentials.client_cert_data,
        private_key_path=credentials.client_key_path,
        private_key_data=credentials.client_key_data,
        insecure=credentials.insecure or None,
        default_namespace=config.events_namespace,
        expiration=token_refresh_time(token, datetime.datetime.now(datetime.UTC)) if token else None,
    )


@kopf.on.probe(id="reconciler")
async def controller_probe(memo: Any, **_: Any) -> dict[str, Any]:
    return _controller(memo).probe()


@kopf.on.cleanup()
async def cleanup(memo: Any, **_: Any) -> None:
    controller = getattr(memo, "controller", None)
    if isinstance(controller, Controller):
        if controller.task is not None:
            controller.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await controller.task
        await controller.client.close()
    server = getattr(memo, "metrics_server", None)
    if server is not None:
        await server.cleanup()
    admission_server = getattr(memo, "webhook_server", None)
    if isinstance(admission_server, webhook.WebhookServer):
        await admission_server.close()


# ---------------------------------------------------------------- the pool index: an input of the controller


@kopf.index(*RESOURCE)
async def pool_records(name: str, body: kopf.Body, **_: Any) -> dict[str, Versioned]:
    """The pool's record, with its resourceVersion: kopf keeps an index value that compares equal to the new
    one (kopf/_core/engines/indexing.py `Store._replace`), and records compare without their status (planning
    does not read it), so without the version a status written since never reached the index, and every
    `--status-interval` the operator wrote every pool's whole status again."""
    return {name: (str(body.metadata.get("resourceVersion") or ""), PoolRecord.from_body(body))}


# ---------------------------------------------------------------- nudges


@kopf.on.event(*RESOURCE)
async def pool_event(name: str, type: str, memo: Any, **kwargs: Any) -> None:
    index: kopf.Index[str, Versioned] = kwargs[POOL_INDEX]
    records = getattr(memo, "pool_records", None)
    if isinstance(records, PoolRecords):
        records.changed(name)
    controller = _controller(memo)
    controller.pool_changed(name, None if type == "DELETED" else _first(index, name))


# ---------------------------------------------------------------- the finalizer


@kopf.on.delete(*RESOURCE)
async def release_pool(name: str, memo: Any, logger: kopf.Logger, **_: Any) -> None:
    controller = _controller(memo)
    if not await controller.wait_released(name, wait_seconds=RELEASE_WAIT_SECONDS):
        raise kopf.TemporaryError(f"still releasing the nodes and objects of pool {name}", delay=5)
    logger.info("released every node, config key and object of pool %s", name)
