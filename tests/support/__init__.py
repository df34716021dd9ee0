"""What the tests share: the environment (`environment`: the repository, tools, ../shared and the one
skip-or-fail), the admission cases and their emulated and webhook judges, Kueue's and structural-schema
emulation, the CEL cost estimator, and waiting on conditions (`waiting`)."""
