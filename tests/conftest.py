"""Shared test settings: every test can ask for the fixtures of `tests.support.admission_webhook`
(`webhook_errors`: the operator's admission webhook over HTTPS, with the chart's certificate) and of
`tests.support.admission` (the emulator's admission of ComputePools). Helpers live in `tests/support/`.
"""

pytest_plugins = ["tests.support.admission_webhook", "tests.support.admission"]
