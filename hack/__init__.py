"""Developer scripts run from the repository's root (`hack/refdocs`: the reference pages' generators, `python -m
hack.refdocs`). Not shipped in any distribution."""
