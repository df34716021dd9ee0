"""`accelpool demo`: a whole accelpool installation on one machine, without a cluster.

An emulated Kubernetes API server (`accelpool_demo.apiserver`, on kmock; kubectl works against it), a simulated
fleet of GPU nodes, a simulated NVIDIA MIG manager, the real operator, and one fake-backend
device agent per member node.
"""
