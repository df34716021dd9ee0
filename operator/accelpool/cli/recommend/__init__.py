"""Sizing a workload for accelerators and pools: the functional core of `accelpool recommend`.

From a model (a size, a known name, or a Hugging Face config.json), a dtype and a workload (inference, LoRA/QLoRA, full
fine-tuning, pre-training), estimate each memory term, find which catalog accelerators and counts
hold it (whole devices, MIG slices, time-sliced shares) ranked by memory fit then speed, which
are left out (no mode in the dtype; inference-only parts for training), and how many replicas
existing ComputePools can hold. Pure: the command (`accelpool.cli.commands.recommend`)
reads the cluster or the files and prints.

Modules, in dependency order: `shape` (a transformer's shape: parameters, active parameters,
linear layers, KV cache per token), `hfconfig` (a config.json → a shape, errors naming the field),
`architectures` (built-in models, defaults by size), `memory`
(the memory model, its formulas in the docstring), `parse` (arguments → `Request`, errors naming
the flag), `fit` (placements on the catalog, ranking), `pools` (fit against pools), `report`
(table and JSON).
"""

from accelpool.cli.recommend.architectures import KNOWN_MODELS, Architecture, known_model
from accelpool.cli.recommend.fit import Kind, Placement, Reason, Unfit, placements
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
    "Reason",
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
