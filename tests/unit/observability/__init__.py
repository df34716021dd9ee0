"""Unit tests of the observability the chart ships: the dashboards generator."""
