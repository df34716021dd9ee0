"""The running operator, the imperative shell: kopf's handlers, the controller loop that plans and writes,
the webhook's HTTPS server, hot-standby leadership, the Prometheus metrics and the settings.

Everything that waits, reads the API or writes to it is here; what it decides comes from `accelpool.decide`.
"""
