"""What the accelpool operator and its device agent share, and nothing else.

- `accelpool_core.catalog`: the accelerators accelpool knows (vendors, products, MIG tables, peaks).
- `accelpool_core.protocol`: the agent's wire protocol (its health report, node condition and
  annotation, the configuration the operator renders for it). Pure data.
- `accelpool_core.kube`: a small asyncio Kubernetes API client (both sides talk to the API server).
"""
