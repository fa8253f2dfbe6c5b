"""Airflow plugin: the revenue query API on the Airflow API server, under /revenue.

Thin by design: the app, its queries and its auth live in `revenue_platform.serving` (tested
there). Importing this file imports only FastAPI/pydantic; Delta and Arrow load on the first request.
Docs: docs/serving.md.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from revenue_platform.serving.api import create_app


class RevenueQueryApiPlugin(AirflowPlugin):
    name = "revenue_query_api"
    fastapi_apps = [{"app": create_app(), "url_prefix": "/revenue", "name": "Revenue query API"}]
