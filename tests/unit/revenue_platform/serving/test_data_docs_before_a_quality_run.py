"""The Data Docs link of the operations view is there, and answers, before the first quality run has
built a site."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from revenue_platform.serving.auth import require_airflow_user
from revenue_platform.serving.operations_view import create_operations_app


def _client(lake: Path) -> TestClient:
    app = create_operations_app(str(lake))
    app.dependency_overrides[require_airflow_user] = lambda: {"name": "tester"}
    return TestClient(app)


def test_without_a_quality_run_the_index_says_so_and_how_to_run_one(tmp_path: Path) -> None:
    with _client(tmp_path / "lake") as client:
        for path in ("/data-docs/index.html", "/data-docs/"):
            page = client.get(path)
            assert page.status_code == 200, path
            assert "No quality run yet" in page.text
            assert "dags trigger revenue_quality_checks" in page.text
        # Only the index stands in: any other page of a site that does not exist is still missing.
        assert client.get("/data-docs/validations/x.html").status_code == 404


def test_without_a_quality_run_the_quality_api_links_that_page(tmp_path: Path) -> None:
    with _client(tmp_path / "lake") as client:
        body = client.get("/api/quality").json()
        assert (body["latest"], body["data_docs_url"]) == (None, "data-docs/index.html")
        # The view resolves the link against its own page, the app's root here.
        assert "No quality run yet" in client.get(f"/{body['data_docs_url']}").text


def test_once_a_quality_run_built_the_site_its_own_index_is_served(tmp_path: Path) -> None:
    site = tmp_path / "lake" / "quality" / "data_docs"
    site.mkdir(parents=True)
    (site / "index.html").write_text("<html>GX site</html>")
    with _client(tmp_path / "lake") as client:
        assert client.get("/data-docs/index.html").text == "<html>GX site</html>"
