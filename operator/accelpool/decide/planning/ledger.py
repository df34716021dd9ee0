"""What one planning pass has decided to write so far: node edits, Events, remediation records, requeue.

The pass's stages (`accelpool.decide.planning`) decide with pure functions and record the decisions
here. `NodeEdit` accumulates the labels, annotations, taints and cordon wanted on one node and
becomes a `NodeChange`. `Ledger.release` undoes everything accelpool set on a node (a member of a
deleted pool, an orphan, a surplus or a node that no longer matches), and
`Ledger.clear_agent_leftovers` takes what an agent wrote off a node in no pool. Pure (no I/O):
the ledger lives for one pass.
"""

from __future__ import annotations

from collections import defaultdict

from accelpool.decide.planning.model import EventIntent, Remediation
from accelpool.model.nodes import NodeChange, NodeView, Taint
from accelpool_api import conventions


class NodeEdit:
    """Accumulates what the pass wants on one node; becomes a `NodeChange`."""

    def __init__(self, view: NodeView) -> None:
        self.view = view
        self.pool: str | None = view.pool
        self.labels: dict[str, str | None] = {}
        self.annotations: dict[str, str | None] = {}
        self.taints: dict[tuple[str, str], Taint | None] = {}
        self.unschedulable: bool | None = None
        self.drop_health = False

    def label(self, key: str) -> str | None:
        return self.labels[key] if key in self.labels else self.view.labels.get(key)

    def annotation(self, key: str) -> str | None:
        return self.annotations[key] if key in self.annotations else self.view.annotations.get(key)

    def put_taint(self, taint: Taint) -> None:
        self.taints[(taint.key, taint.effect)] = taint

    def drop_taints(self, key: str) -> None:
        for taint in self.view.taints:
            if taint.key == key:
                self.taints[(taint.key, taint.effect)] = None
        for slot in list(self.taints):
            if slot[0] == key:
                self.taints[slot] = None

    def change(self) -> NodeChange:
        add: list[Taint] = []
        remove: list[Taint] = []
        for slot, taint in self.taints.items():  # loops, not generators: once per member and pass
            if taint is not None:
                add.append(taint)
                continue
            for present in self.view.taints:
                if (present.key, present.effect) == slot:
                    remove.append(present)
                    break
        return NodeChange(
            node=self.view.name,
            pool=self.pool,
            labels=dict(self.labels),
            annotations=dict(self.annotations),
            add_taints=tuple(add),
            remove_taints=tuple(remove),
            unschedulable=self.unschedulable,
            drop_health=self.drop_health,
        )

    def view_after(self) -> NodeView:
        return self.view.apply(self.change())


class Ledger:
    """The pass's decisions so far. `owned_configs`: the NVIDIA config names that are accelpool's own."""

    def __init__(self, owned_configs: frozenset[str]) -> None:
        self.owned_configs = owned_configs
        self.edits: dict[str, NodeEdit] = {}
        self.events: list[EventIntent] = []
        self.remediations: list[Remediation] = []
        self.released_by: dict[str, list[str]] = defaultdict(list)
        """Pool → the nodes released from it this pass (one NodesReleased Event each)."""
        self.requeue_after: float | None = None
        """Seconds until a time-based decision needs another pass (at least 1)."""

    def requeue(self, seconds: float | None) -> None:
        """Plan again within `seconds` (None: no time-based decision)."""
        if seconds is None:
            return
        seconds = max(seconds, 1.0)
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)

    def event(self, kind: str, name: str, uid: str, type_: str, reason: str, message: str) -> None:
        self.events.append(EventIntent(kind, name, uid, type_, reason, message))

    def ours(self, config_label: str | None) -> bool:
        """Whether an NVIDIA config label value names one of accelpool's own configs.

        Ownership comes from accelpool's records only: a key of a live pool, or one listed in the
        ConfigMaps' managed-keys annotations. A name that merely starts with `accelpool-` is not ours.
        """
        return config_label is not None and config_label in self.owned_configs

    def edit(self, view: NodeView) -> NodeEdit:
        found = self.edits.get(view.name)
        if found is None:
            found = self.edits[view.name] = NodeEdit(view)
        return found

    def changes(self) -> dict[str, NodeChange]:
        """Every edited node's change, in name order."""
        return {name: edit.change() for name, edit in sorted(self.edits.items())}

    def release(self, view: NodeView, pool: str) -> NodeView:
        """Undo everything accelpool set on a node; returns the node as a free candidate."""
        edit = self.edit(view)
        edit.pool = None
        edit.labels[conventions.POOL_LABEL] = None
        if conventions.REMEDIATION_ACTION_LABEL in view.labels:
            edit.labels[conventions.REMEDIATION_ACTION_LABEL] = None
        self._restore_config_labels(view, edit)
        deploy = conventions.DEVICE_PLUGIN_DEPLOY_LABEL
        if deploy in view.prior_labels:  # a DRA pool's member: back to what it was before it joined
            edit.labels[deploy] = view.prior_labels[deploy]
        for annotation in (
            conventions.JOINED_ANNOTATION,
            conventions.PRIOR_LABELS_ANNOTATION,
            conventions.CORDONED_ANNOTATION,
            conventions.HEALTH_ANNOTATION,  # the pool's agent wrote it; it says nothing once the node is free
            conventions.MIG_RETRY_ANNOTATION,
            conventions.POOL_CHECK_REQUEST_ANNOTATION,  # a user's own check request stays
            conventions.REMEDIATION_ANNOTATION,
            conventions.QUARANTINE_HISTORY_ANNOTATION,
        ):
            if annotation in view.annotations:
                edit.annotations[annotation] = None
        if view.quarantine_taint is not None:
            self.event(
                "Node",
                view.name,
                view.uid,
                "Warning",
                "QuarantineReleased",
                f"left pool {pool} while quarantined ({view.quarantine_taint.value}); "
                f"{conventions.HEALTH_CONDITION} is {view.health.status if view.health else 'not reported'}",
            )
        edit.drop_taints(conventions.POOL_TAINT_KEY)
        edit.drop_taints(conventions.QUARANTINE_TAINT_KEY)
        edit.drop_taints(conventions.BURN_IN_TAINT_KEY)  # a pool that claims the node puts its own on again
        if view.cordoned_by_us and view.unschedulable:
            edit.unschedulable = False
        # The pool's agent leaves with the node: its condition goes too, except a False, which keeps a node
        # known to be bad out of other pools until it ages out (`health_stale_seconds`).
        edit.drop_health = view.health_index is not None and not (view.health is not None and view.health.unhealthy)
        self.released_by[pool].append(view.name)
        return edit.view_after()

    def _restore_config_labels(self, view: NodeView, edit: NodeEdit) -> None:
        """The NVIDIA config labels go back to what they were before the node joined (MIG: back off)."""
        prior = view.prior_labels
        for key in (conventions.DEVICE_PLUGIN_CONFIG_LABEL, conventions.MIG_CONFIG_LABEL):
            current = edit.label(key)
            disabled_by_us = key == conventions.MIG_CONFIG_LABEL and current == conventions.MIG_DISABLED_CONFIG
            if not (self.ours(current) or (disabled_by_us and key in prior)):
                continue
            restored = prior.get(key)
            if key == conventions.MIG_CONFIG_LABEL:
                if key not in prior:  # the pool's own layout: MIG goes back off
                    restored = conventions.MIG_DISABLED_CONFIG
                if restored is None:  # it had no MIG config before it joined: leave nothing behind
                    edit.labels[conventions.MIG_CONFIG_STATE_LABEL] = None
                elif restored != current:
                    edit.labels[conventions.MIG_CONFIG_STATE_LABEL] = "pending"
            edit.labels[key] = restored

    def clear_agent_leftovers(self, view: NodeView) -> NodeView:
        """A node in no pool keeps nothing an agent wrote.

        `release` takes the agent's annotation and condition off a node, but the agent pod outlives the
        release (it is terminating, or its node is slow to hear of it) and may write its report once
        more, after its pool is gone: the annotation goes, and the condition unless it is a False that has
        not aged out (as on release, a node known to be bad stays out of other pools until then).
        """
        annotated = conventions.HEALTH_ANNOTATION in view.annotations
        condition = view.health_index is not None and not (view.health is not None and view.health.unhealthy)
        if not annotated and not condition:
            return view
        edit = self.edit(view)
        if annotated:
            edit.annotations[conventions.HEALTH_ANNOTATION] = None
        edit.drop_health = condition
        return edit.view_after()
