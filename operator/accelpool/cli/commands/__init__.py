"""The subcommands of `accelpool`; each module has `register(subparsers)` and a handler returning an exit code."""

from accelpool.cli.commands import catalog, check, crd, dashboards, plan, recommend, run, validate

__all__ = ["catalog", "check", "crd", "dashboards", "plan", "recommend", "run", "validate"]
