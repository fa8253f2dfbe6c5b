"""Airflow plugin: Prometheus metrics of the streaming deployments on the Airflow API server.

Thin by design: the collector and its app live in `revenue_platform.serving.metrics` (tested there).
Mounted at `/revenue-metrics`, so Prometheus scrapes `/revenue-metrics/metrics`. Docs:
docs/operations.md, "Metrics and alerts".
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

# The collector reads the lake, whose object store may be an Airflow connection: importing the face
# installs Airflow's connection lookup, as the other plugins' imports do, whichever loads first.
import revenue_platform.airflow  # ruff: ignore[unused-import]
from revenue_platform.serving.metrics import METRICS_URL_PREFIX, create_metrics_app, scrape_token


class RevenueMetricsPlugin(AirflowPlugin):
    name = "revenue_metrics"
    fastapi_apps = [
        {
            "app": create_metrics_app(token=scrape_token()),
            "url_prefix": METRICS_URL_PREFIX,
            "name": "Revenue metrics",
        }
    ]
