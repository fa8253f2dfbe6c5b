"""Airflow plugin: the revenue operations view, in the Airflow UI's nav.

Mounts `revenue_platform.serving.operations_view` on the Airflow API server at `/revenue-ops`
(`fastapi_apps`) and adds "Revenue operations" to the UI's nav (`external_views`): the UI opens
`/plugin/revenue-operations` and embeds the page in an iframe. The page is same-origin, so its API
calls carry the UI's session cookie and are authorized as the logged-in Airflow user.

Airflow imports plugins in every process (scheduler, workers, DAG processor): this module only
builds the app object; the registry, gold and quality tables are read on request.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from revenue_platform.airflow.auth import with_airflow_auth
from revenue_platform.serving.operations_view import create_operations_app

URL_PREFIX = "/revenue-ops"
UI_ROUTE = "revenue-operations"


class RevenueOperationsViewPlugin(AirflowPlugin):
    name = "revenue_operations_view"
    fastapi_apps = [
        {
            "app": with_airflow_auth(create_operations_app()),
            "url_prefix": URL_PREFIX,
            "name": "Revenue operations view",
        }
    ]
    external_views = [
        {
            "name": "Revenue operations",
            # Trailing slash: the page's relative API URLs (api/..., data-docs/...) resolve under it.
            "href": f"{URL_PREFIX}/",
            "url_route": UI_ROUTE,
            "destination": "nav",
            "nav_top_level": True,
            "icon": f"{URL_PREFIX}/icon.svg",
        }
    ]
