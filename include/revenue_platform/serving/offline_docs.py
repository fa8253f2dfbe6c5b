"""Swagger UI for a plugin app with every asset served by the app itself: no CDN, no internet.

FastAPI's built-in `/docs` page loads Swagger UI's JavaScript and CSS from a public CDN, so on a
machine without internet it renders blank. `add_offline_swagger_ui(app)` replaces it: the page
references the Swagger UI 5 files that the pinned `fastapi-offline` package ships (Swagger UI 5
renders OpenAPI 3.1, what FastAPI generates), served from `<app>/docs-assets/`. Its favicon is
local too, and the online validator badge (which fetches validator.swagger.io) is switched off.

The page, its assets and the OAuth redirect are plain Starlette routes: app-level dependencies
(the Airflow login every data route needs) do not apply to them, as for FastAPI's own docs page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.responses import HTMLResponse

ASSETS_PATH: Final = "/docs-assets"


def swagger_ui_assets_dir() -> Path:
    """The folder holding swagger-ui-bundle.js, swagger-ui.css and favicon.png (pinned package)."""
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def add_offline_swagger_ui(app: FastAPI, docs_path: str = "/docs") -> None:
    """Serve Swagger UI at `docs_path` from local files; the app must be built with docs_url=None."""
    if app.docs_url is not None:
        raise ValueError("build the app with docs_url=None: its default /docs page loads from a CDN")
    openapi_path = app.openapi_url or "/openapi.json"
    redirect_path = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"
    app.mount(ASSETS_PATH, StaticFiles(directory=swagger_ui_assets_dir()), name="docs-assets")

    def swagger_ui(request: Request) -> HTMLResponse:
        # root_path is the plugin's mount point (/revenue), so the page works wherever it is mounted.
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_path}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{redirect_path}",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            # validatorUrl null: no badge image fetched from validator.swagger.io.
            swagger_ui_parameters={"validatorUrl": None, **(app.swagger_ui_parameters or {})},
        )

    def oauth2_redirect(_: Request) -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    app.add_route(docs_path, swagger_ui, include_in_schema=False)
    app.add_route(redirect_path, oauth2_redirect, include_in_schema=False)
