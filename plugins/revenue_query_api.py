"""Airflow plugin: the revenue query API on the Airflow API server, under /revenue.

Thin by design: the app and its queries live in `revenue_platform.serving`, Airflow's check of
its users in `revenue_platform.airflow.auth` (tested there). Importing this file imports only
FastAPI/pydantic; Delta and Arrow load on the first request.
Its reference page, `/revenue/docs` (Swagger UI served offline), is linked from the UI's Docs menu
(`external_views`, category "docs"): next to Airflow's own REST API reference, which stays blank
without internet. Docs: docs/serving.md.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from revenue_platform.airflow.auth import with_airflow_auth
from revenue_platform.serving.api import create_app

URL_PREFIX = "/revenue"


class RevenueQueryApiPlugin(AirflowPlugin):
    name = "revenue_query_api"
    fastapi_apps = [
        {"app": with_airflow_auth(create_app()), "url_prefix": URL_PREFIX, "name": "Revenue query API"}
    ]
    external_views = [
        {
            "name": "Revenue API reference",
            # No url_route: the Docs menu opens it in a new tab, as it does Airflow's own reference.
            "href": f"{URL_PREFIX}/docs",
            "destination": "nav",
            "category": "docs",
        }
    ]
