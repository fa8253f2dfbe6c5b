"""/revenue/docs renders from files the API server serves itself: no asset from another host.

The query app is mounted under /revenue as Airflow mounts plugin apps; every script, stylesheet and
icon the page references must be a path on the same server and answer 200 with real content.
"""

from __future__ import annotations

import re

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from revenue_platform.serving.api import create_app
from revenue_platform.serving.offline_docs import add_offline_swagger_ui


@pytest.fixture(scope="module")
def server() -> TestClient:
    outer = FastAPI()
    outer.mount("/revenue", create_app(lake_root="/nonexistent"))
    return TestClient(outer)


def test_docs_page_references_only_local_assets(server: TestClient) -> None:
    page = server.get("/revenue/docs")
    assert page.status_code == 200, "the docs page is public (no login), as FastAPI's own"
    html = page.text
    assert "cdn" not in html.lower()
    references = re.findall(r"""(?:src|href)\s*=\s*['"]([^'"]+)['"]""", html)
    references += re.findall(r"""url:\s*'([^']+)'""", html)
    assert not [ref for ref in references if "://" in ref or ref.startswith("//")], references
    assets = [ref for ref in references if ref.startswith("/revenue/docs-assets/")]
    names = {ref.rsplit("/", 1)[1] for ref in assets}
    assert names == {"swagger-ui-bundle.js", "swagger-ui.css", "favicon.png"}
    for ref in assets:
        response = server.get(ref)
        assert response.status_code == 200, ref
        assert len(response.content) > 1000, ref
    # Swagger UI 5: renders the OpenAPI 3.1 document FastAPI generates (4.x refuses 3.1).
    bundle = server.get("/revenue/docs-assets/swagger-ui-bundle.js").text
    assert re.search(r'"5\.\d+\.\d+"', bundle)
    assert server.get("/revenue/openapi.json").json()["openapi"].startswith("3.1")
    assert '"validatorUrl": null' in html, "no badge fetched from the online validator"
    assert "/revenue/openapi.json" in html


def test_data_routes_still_need_a_login(server: TestClient) -> None:
    # Anonymous: 401 (auth manager initialized) or 503 (none), never an answer with data.
    assert server.get("/revenue/v1/orders/count").status_code in (401, 503)


def test_an_app_with_the_cdn_docs_page_is_refused() -> None:
    with pytest.raises(ValueError, match="docs_url=None"):
        add_offline_swagger_ui(FastAPI())


def test_the_airflow_ui_links_the_page_from_its_docs_menu(server: TestClient) -> None:
    """Airflow's own REST API reference (/docs) is blank without internet; the UI's Docs menu lists
    this one, which renders offline, as a plugin external view in Airflow's own interface."""
    import importlib.util
    from pathlib import Path

    from airflow.api_fastapi.core_api.datamodels.plugins import ExternalViewResponse

    source = Path(__file__).resolve().parents[4] / "plugins" / "revenue_query_api.py"
    spec = importlib.util.spec_from_file_location("revenue_query_api_plugin", source)
    assert spec is not None
    assert spec.loader is not None
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    [view] = [ExternalViewResponse.model_validate(v) for v in plugin.RevenueQueryApiPlugin.external_views]
    assert (view.destination, view.category, view.url_route) == ("nav", "docs", None)
    assert view.href == "/revenue/docs"
    assert server.get(view.href).status_code == 200
