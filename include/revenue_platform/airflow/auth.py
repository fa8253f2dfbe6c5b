"""Airflow's authentication for the platform's plugin apps (the query API, the operations view).

`with_airflow_auth(app)` puts Airflow's own `get_user` dependency in the place of
`serving.auth.require_airflow_user`, whose stand-in refuses every request (503): an app is only
ever served with a real check or with none that lets anyone in. See `serving.auth` for what a
request must carry.

Airflow's security module imports the ORM models, so it is imported on the first request, not when
the plugin module is imported (plugins are imported by every Airflow process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, FastAPI, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials

from revenue_platform.serving.auth import bearer_scheme, require_airflow_user

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser


async def airflow_user(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)] = None,
) -> BaseUser:
    """The authenticated Airflow user of this request; 401/403 as Airflow's REST API answers."""
    from airflow.api_fastapi.core_api.security import get_user

    try:
        return await get_user(request, _oauth_token=None, bearer_credentials=credentials)
    except RuntimeError as error:
        # get_auth_manager() raises RuntimeError when the app runs outside the Airflow API server.
        raise HTTPException(
            status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
            detail=(
                "authentication is unavailable: this app must be served by the Airflow API server "
                f"(mounted as a plugin), which initializes the auth manager ({error})"
            ),
        ) from error


def with_airflow_auth(app: FastAPI) -> FastAPI:
    """`app`, its users checked by Airflow's auth manager (for a plugin's `fastapi_apps`)."""
    app.dependency_overrides[require_airflow_user] = airflow_user
    return app
