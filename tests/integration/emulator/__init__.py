"""The emulated API server, behaviour by behaviour, as its docstring lists them."""
