"""Who may call the platform's plugin apps: any user the Airflow auth manager has authenticated.

Airflow mounts plugin FastAPI apps (`fastapi_apps`) on its API server but does not protect them:
a plugin route is public unless it asks for a user itself. `require_airflow_user` is that ask,
answered by Airflow's own `get_user` dependency (airflow.api_fastapi.core_api.security), so a
request is accepted exactly when the public REST API (/api/v2) would accept it:

* an `Authorization: Bearer <jwt>` header with a token from `POST /auth/token`, or
* the UI's `_token` cookie (what the browser sends after logging in to the Airflow UI).

Anonymous requests get 401 ("Not authenticated"), expired tokens 401 ("Token Expired"), and
tokens that do not verify 403 ("Invalid JWT token") — Airflow's own answers. The check itself is the
Airflow face's (`revenue_platform.airflow.auth`): the plugins mount each app through its
`with_airflow_auth`, which puts Airflow's `get_user` in place of `require_airflow_user`; an app
served without it, or outside a running Airflow API server (no auth manager initialized), answers
every request with 503 rather than letting it in or failing with a 500.

Usage in a plugin app::

    from revenue_platform.serving.auth import AirflowUser, require_airflow_user

    app = FastAPI(dependencies=[Depends(require_airflow_user)])   # every route, or per route:

    @app.get("/whoami")
    def whoami(user: AirflowUser) -> dict[str, str]:
        return {"name": user.get_name()}

`is_admin` tells an admin from everyone else, for answers that show admins more (server paths in
`/v1/metadata/all`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

# auto_error=False: a missing header must fall through to the UI's cookie, as in Airflow itself.
# Declaring the scheme here also documents the bearer token in the plugin app's OpenAPI schema.
bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="AirflowJWT",
    description="JWT from the Airflow API server's `POST /auth/token` (or the UI's `_token` cookie).",
)


def require_airflow_user(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)] = None,
) -> Any:
    """The authenticated Airflow user of this request. Only the Airflow face can tell
    (`revenue_platform.airflow.auth.with_airflow_auth` puts Airflow's check in this one's place when
    a plugin mounts the app); an app served any other way answers 503 and never lets a request in."""
    raise HTTPException(
        status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
        detail=(
            "authentication is unavailable: this app must be served by the Airflow API server "
            "(mounted as a plugin through revenue_platform.airflow.auth.with_airflow_auth)"
        ),
    )


AirflowUser = Annotated[Any, Depends(require_airflow_user)]
"""Route parameter type for the authenticated user (an Airflow `BaseUser`)."""


# The simple auth manager's highest role; FAB names its role "Admin".
_ADMIN_ROLE = "ADMIN"


def is_admin(user: Any) -> bool:
    """True for an Airflow admin: the simple auth manager's `role` ADMIN, or a role named Admin among
    the `roles` of a FAB user. Any other user is not, also under an auth manager whose users carry
    neither attribute: what only admins see stays hidden when in doubt."""
    names: list[Any] = [getattr(user, "role", None)]
    names += [getattr(role, "name", role) for role in getattr(user, "roles", None) or []]
    return any(isinstance(name, str) and name.upper() == _ADMIN_ROLE for name in names)
