"""How a benchmark prints its results: one JSON document for `benchmarks/run.py` (`--json`), else a line each."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def print_results(title: str, results: Sequence[Mapping[str, Any]], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"title": title, "results": list(results)}))
        return
    for result in results:
        print(f"{result['what']}: {result['value']} {result['unit']} (target {result['target']}; {result['note']})")
