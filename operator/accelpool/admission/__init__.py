"""ComputePool admission, one feature in one place: the CRD generated from `accelpool.api`, validation
in the API server's own words, and the validating webhook's answer to an AdmissionReview.

`accelpool validate`, the operator's webhook and its reading of stored pools all judge through here.
"""
