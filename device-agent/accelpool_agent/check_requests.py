"""On-demand check requests: which `accelpool.io/check-requested` token the next full cycle answers. Pure.

A user (or the operator, copying a pool's request to its members) sets an opaque token on the
Node; the agent answers it by running a full check cycle that starts after the token was seen
and writing the token into its health report (`HealthReport.check_request`) with that cycle's
verdict. `CheckRequests` follows one token through three places:

- `pending`: seen on the node, not answered yet: the compute loop starts a cycle now;
- `running`: taken by the cycle in progress, which answers it when it finishes;
- `answered`: the last token a finished cycle answered (read back from the node's annotation at
  start, so a request answered before the agent restarted is not run again).

A token seen while a cycle runs waits for the next cycle (two never run at once): the running
cycle started before it was asked for. Seeing the same token again changes nothing, so the node
watch may report every event of the node. Each step returns a new value; the daemon keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from accelpool_core.protocol import check_request_problem


@dataclass(frozen=True)
class CheckRequests:
    answered: str | None = None
    pending: str | None = None
    running: str | None = None

    @property
    def wanted(self) -> bool:
        """Whether a token waits for a cycle to start."""
        return self.pending is not None

    def restored(self, answered: str | None) -> CheckRequests:
        """The token the node's annotation answered when the agent started (read once, maybe late)."""
        return replace(self, answered=answered, pending=None if self.pending == answered else self.pending)

    def seen(self, token: str | None) -> CheckRequests:
        """The node carries `token` (None or '': no request). An invalid token changes nothing (see `problem`)."""
        if not token or check_request_problem(token) is not None:
            return self
        if token in (self.answered, self.pending, self.running):
            return self
        return replace(self, pending=token)

    def starting(self) -> CheckRequests:
        """A full cycle starts: it answers the pending token, if any."""
        return replace(self, running=self.pending, pending=None)

    def finished(self) -> CheckRequests:
        """The cycle finished with a verdict: its token (if any) is answered."""
        return replace(self, answered=self.running or self.answered, running=None)

    def failed(self) -> CheckRequests:
        """The cycle ended without a verdict: its token waits again, unless a newer one does."""
        return replace(self, pending=self.pending or self.running, running=None)


def problem(token: str | None) -> str | None:
    """Why the node's token is ignored (for one log line), or None for a valid token or no token."""
    return check_request_problem(token) if token else None
