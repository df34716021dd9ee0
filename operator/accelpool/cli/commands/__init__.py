"""The subcommands of `accelpool`, one module each, with `register(subparsers)` and a handler returning an
exit code.

`SUMMARIES` is the index: each command's name (its module here) and its one-line help. `accelpool.cli`
imports a command's module only to run that command or to build the whole parser, so `accelpool --help`
and `accelpool validate` import nothing the other commands need (kopf, aiohttp, the planner).
"""

SUMMARIES: dict[str, str] = {
    "validate": "validate ComputePool YAML files",
    "catalog": "list the accelerator catalog, or show one entry",
    "crd": "print the ComputePool CRD (YAML)",
    "plan": "show what the operator would do with these pools",
    "check": "run a full check cycle on nodes or a pool now, and show the verdicts",
    "run": "run the operator",
    "dashboards": "generate the Grafana dashboards (JSON)",
    "recommend": "size a model's workload: memory per term, accelerators that fit, pools that hold it",
    "uninstall": "delete every ComputePool and wait until the operator has released their nodes",
}
"""Command name → its help in `accelpool --help`, in the order listed there."""
