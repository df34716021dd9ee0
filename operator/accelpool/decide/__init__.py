"""What one reconcile pass wants, decided purely: the plan, every pool's status, the objects and patches.

`desired.decide` is the entry: raw objects become planner inputs (`inputs`), the planner decides
membership, remediation and configs (`planning`), `poolstatus` composes each pool's status, and
`render`, `configmaps`, `kueue` and `patches` turn the decision into the writes `accelpool.runtime` sends.
"""
