"""Generators of the reference pages (docs/reference/, charts/accelpool/README.md) from what they document.

Each page is rendered by a pure function from data read where the thing is declared: the ComputePool
API from the pydantic models (through the CRD generator, `accelpool_api.crd`), the metrics from
the operator's and the agent's collector modules, the alerts from the chart's rule file, the Helm
values from values.schema.json and values.yaml, the commands from their argparse parsers. `make docs`
writes the pages (`python -m hack.refdocs`), `make check-generated` and tests/unit/docs/test_reference.py
fail when a committed page differs from what the code renders.
"""
