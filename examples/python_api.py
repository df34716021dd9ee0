"""A ComputePool from Python, notebook style: build it, apply it, wait until Ready, print the pod-spec fragment.

    pip install ./core ./api ./sdk                # accelpool-sdk: no operator, no kopf
    python examples/python_api.py                 # the cluster of $KUBECONFIG / ~/.kube/config, or in-cluster
    python examples/python_api.py --server http://127.0.0.1:18080   # `make demo`'s emulated cluster

Each cell below is a step an ML engineer takes; tests/integration/operator/test_python_api.py runs this
script against the emulated API server with the real operator.
"""

from __future__ import annotations

import argparse

import yaml

import accelpool_sdk as ap

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
parser.add_argument("--server", help="an API server URL without authentication (default: kubeconfig or in-cluster)")
parser.add_argument("--kubeconfig", help="a kubeconfig (default: in-cluster, then $KUBECONFIG, ~/.kube/config)")
parser.add_argument("--name", default="llm-finetune", help="the pool's name")
parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for Ready")
args = parser.parse_args()

# %% The cluster: a kubeconfig, the pod's ServiceAccount, or a plain URL (`make demo`). It becomes the default
# cluster of the pools below (none given: the environment's), and closes itself when the script ends.
ap.Cluster.connect(args.kubeconfig, server=args.server)

# %% The accelerator: a typed factory from accelpool's catalog, carrying the catalog's facts.
h100 = ap.Accelerator.NVIDIA.H100(count=8, mig="3g.40gb")
print(f"{h100}: {h100.memory_gb} GB, {h100.tflops('bf16'):g} bf16 TFLOPS, {h100.bandwidth_gbps:g} GB/s")

# %% A mistake is caught before anything is sent, in the API server's words (and by mypy: `mig` is a Literal
# of the H100's MIG profiles, so an IDE completes the valid ones).
try:
    ap.Accelerator.NVIDIA.H100(count=8, mig="1g.5gb")  # type: ignore[arg-type]
except ap.InvalidSpecError as error:
    print(f"refused: {error}")

# %% The pool: 2 nodes of 8 H100s, each GPU split into 2 x 3g.40gb; quarantine by taint.
pool = ap.ComputePool(
    args.name,
    h100,
    nodes=2,
    health=ap.HealthSpec(remediation="taint"),
)
print(pool.to_yaml())

# %% Apply it and wait until the operator reports it Ready (a line per change).
pool.apply()
status = pool.wait_until_ready(timeout=args.timeout)
print(f"{pool.name} is {status.phase}: {status.nodes.ready} nodes, {status.capacity.resources}")

# %% What a pod needs to run on one 3g.40gb slice of the pool.
print("pod-spec fragment:")
print(yaml.safe_dump(pool.pod_spec_fragment().as_dict(), sort_keys=False), end="")
