"""ComputePool admission in the operator: the validating webhook's answer to an AdmissionReview (`review`).

The CRD and the validation it applies live in the `accelpool-api` distribution (`accelpool_api.crd`,
`accelpool_api.validation`), which the Python API shares; `accelpool validate`, the operator's webhook and
its reading of stored pools all judge through them.
"""
