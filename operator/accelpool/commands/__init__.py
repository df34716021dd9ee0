"""The subcommands of `accelpool`; each module has `register(subparsers)` and a handler returning an exit code."""
