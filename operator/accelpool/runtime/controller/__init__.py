"""The operator's controller: one loop that plans the whole cluster and writes only the difference.

The path of a ComputePool from watch event to API write and status, file by file:

1. `accelpool.runtime.handlers` — kopf keeps the index of ComputePools and nudges the controller on their
   events; `nodewatch.py` — `NodeWatch`: the controller's own informer of Nodes, whose events nudge
   it only when they could change a plan (`relevance.py`); `agentwatch.py` — `AgentWatch`: the agents'
   DaemonSets, pods and FailedCreate Events, watched for the pools' AgentReady (both on `informer.py`);
2. `loop.py` — `Controller`: the loop and the pass, top to bottom (load, plan, write, status);
3. `state.py` — `ClusterState`: everything cached between passes, read once per pass as a `Snapshot`;
4. `planner.py` — `Planner`: pool inputs built once from the index records, then the pure
   `accelpool.decide.desired.decide` (planning, rendering, the ConfigMap versions);
5. `writes.py` — `Writer`: the difference between `Desired` and what is stored, in a safe order
   (`events.py` posts the Events);
6. `status.py` — `StatusWriter`: each pool's `/status`, written by the pass that computed it.

`apiserver.py` holds the paths, the transient errors and the write gate (`pause()`/`resume()`);
`kueue.py` reads Kueue's ResourceFlavors and ClusterQueues (for `state.py`) and writes them (for `writes.py`).
"""

from accelpool.runtime.controller.loop import Controller, PassResult

__all__ = ["Controller", "PassResult"]
