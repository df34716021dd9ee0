"""The cluster as accelpool reads and writes it: names, parsed nodes, NVIDIA configs, agent and drain records.

Each module turns one kind of Kubernetes object or annotation into immutable values and back, and
treats what it reads as untrusted. No decisions here: `accelpool.decide` makes them from these values.
"""
