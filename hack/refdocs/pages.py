"""The generated pages: where each one goes and the function that renders it."""

from __future__ import annotations

from pathlib import Path

from hack.refdocs import alerts, api, cli, helm_values, metrics

ROOT = Path(__file__).resolve().parents[2]


def render_all(root: Path) -> dict[str, str]:
    """Every page's path (relative to `root`) and its content, rendered from the code and files under `root`."""
    values = helm_values.read(root)
    return {
        "docs/reference/api.md": api.page(),
        "docs/reference/metrics.md": metrics.page(root),
        "docs/reference/alerts.md": alerts.page(root),
        "docs/reference/helm-values.md": helm_values.reference_page(values),
        "docs/reference/cli.md": cli.page(),
        "charts/accelpool/README.md": helm_values.chart_readme(helm_values.chart_metadata(root), values),
    }
