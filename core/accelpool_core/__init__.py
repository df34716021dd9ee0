"""What the accelpool operator and its device agent share, and nothing else.

- `accelpool_core.catalog`: the accelerators accelpool knows (vendors, products, MIG tables, peaks).
- `accelpool_core.protocol`: the agent's wire protocol (its health report, node condition and
  annotation, the configuration the operator renders for it). Pure data.
- `accelpool_core.kube`: a small asyncio Kubernetes API client (both sides talk to the API server).
- `accelpool_core.textio`: YAML and JSON read as kubectl reads them (untrusted input, bounded), and
  plain-text tables: the commands, the Python API and the demo read files through it.
"""
