"""A pool's on-demand check request, copied to its members.

`accelpool check --pool POOL` (or `kubectl annotate cpool POOL accelpool.io/check-requested=TOKEN`)
sets a token on the ComputePool; every member's agent answers a token on its own Node. So each
member gets the pool's token in its `accelpool.io/check-requested` annotation, once: the
member's `accelpool.io/pool-check-requested` records the pool token copied onto it. A node whose
record already holds the pool's token is left alone, so a request a user then sets on the node
itself stands; a new pool token is copied over it (the newer request wins, and its cycle is
newer than the node's request too). Nothing is ever removed here: a pool without a token leaves
its members' tokens as they are, and release (`Ledger.release`) takes only the record off.
Invalid tokens (see `accelpool_core.protocol.check_request_problem`) are not copied: every agent
would only log them.
"""

from __future__ import annotations

from accelpool.decide.planning.ledger import NodeEdit
from accelpool_api import conventions
from accelpool_core.protocol import check_request_problem


def copy_pool_request(edit: NodeEdit, token: str | None) -> None:
    """Put the pool's check request `token` on one member, unless it was copied there before."""
    if not token or check_request_problem(token) is not None:
        return
    if edit.annotation(conventions.POOL_CHECK_REQUEST_ANNOTATION) == token:
        return
    if edit.annotation(conventions.CHECK_REQUEST_ANNOTATION) != token:
        edit.annotations[conventions.CHECK_REQUEST_ANNOTATION] = token
    edit.annotations[conventions.POOL_CHECK_REQUEST_ANNOTATION] = token
