"""Remediation, one step a module: `quarantine` (quarantine within maxUnavailable, the circuit breaker,
release after the damped hold-down), `ladder` (drain and hand-off of quarantined members) and `burnin`
(a joining node serves after a passed full check). The record each step keeps on its node is
`accelpool.model.remediation_record`; the drain's evictions run in `accelpool.runtime.controller.drain`.
"""
