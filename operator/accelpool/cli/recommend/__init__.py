"""Sizing a workload for accelerators and pools: the functional core of `accelpool recommend`.

From a model (a size or a known name), a dtype and a workload (inference, LoRA/QLoRA, full
fine-tuning, pre-training), estimate each memory term, find which catalog accelerators and counts
hold it (whole devices, MIG slices, time-sliced shares) ranked by memory fit then speed, and how
many replicas existing ComputePools can hold. Pure: the command (`accelpool.cli.commands.recommend`)
reads the cluster or the files and prints.

Modules, in dependency order: `architectures` (known model shapes, defaults by size), `memory`
(the memory model, its formulas in the docstring), `parse` (arguments → `Request`, errors naming
the flag), `fit` (placements on the catalog, ranking), `pools` (fit against pools), `report`
(table and JSON).
"""

from accelpool.cli.recommend.architectures import KNOWN_MODELS, Architecture, known_model
from accelpool.cli.recommend.fit import Kind, Placement, Unfit, placements
from accelpool.cli.recommend.memory import Estimate, Request, Term, Workload, estimate
from accelpool.cli.recommend.parse import Arguments, InputError, request
from accelpool.cli.recommend.pools import PoolFit, PoolUnits, fit_pool, planned_resources, pool_units

__all__ = [
    "KNOWN_MODELS",
    "Architecture",
    "Arguments",
    "Estimate",
    "InputError",
    "Kind",
    "Placement",
    "PoolFit",
    "PoolUnits",
    "Request",
    "Term",
    "Unfit",
    "Workload",
    "estimate",
    "fit_pool",
    "known_model",
    "placements",
    "planned_resources",
    "pool_units",
    "request",
]
