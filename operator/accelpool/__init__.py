"""accelpool: ComputePool operator for GPU and accelerator pools on Kubernetes.

Packages, from the command line down to the API (each imports only those below it; pyproject.toml's
import contracts check it): `cli` (the `accelpool` command), `runtime` (the running operator),
`decide` (one pass's decisions, pure), `model` (the cluster's objects, parsed) and `admission` (the
webhook's answer). Below them, in their own distributions: `accelpool_api` (the ComputePool models,
their validation, the CRD, the cluster conventions) and `accelpool_core` (the catalog, the agent's
protocol, the API client, `textio`: text in and out).
"""
