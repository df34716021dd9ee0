"""accelpool: ComputePool operator for GPU and accelerator pools on Kubernetes.

Packages, from the command line down to the API (each imports only those below it; pyproject.toml's
import contracts check it): `cli` (the `accelpool` command), `runtime` (the running operator),
`decide` (one pass's decisions, pure), `model` (the cluster's objects, parsed), `admission` (the CRD,
validation, the webhook's answer), `textio` (text in and out) and `api` (the ComputePool models).
"""
