"""`make demo` queues a quality check of its deployment that starts once its last window has closed, so
the operations view's quality panel fills a minute or two after the demo instead of at the next hour."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from revenue_platform import demo
from revenue_platform.errors import PlatformError
from revenue_platform.local_stack.airflow_api import AirflowApiClient
from revenue_platform.orders_generator import GeneratorSettings, generate_orders
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry

START = datetime(2026, 11, 22, 10, 53, 15)


class _Airflow:
    """What the demo asks of Airflow's REST API, recorded; `refuse` makes the trigger fail as a stack can."""

    def __init__(self, refuse: bool = False) -> None:
        self.triggered: list[tuple[str, dict[str, Any], datetime | None]] = []
        self.refuse = refuse

    def trigger(self, dag_id: str, conf: dict[str, Any], run_after: datetime | None = None) -> str:
        if self.refuse:
            raise PlatformError("POST /api/v2/dags/revenue_quality_checks/dagRuns -> HTTP 404")
        self.triggered.append((dag_id, conf, run_after))
        return "manual__2026-11-22T10:54:00+00:00"


@pytest.fixture
def lake(tmp_path: Path) -> str:
    root = str(tmp_path / "lake")
    DeploymentRegistry(root).register(
        DeploymentRecord(demo.DEMO_DEPLOYMENT, lake_root=root, desired_state="running"), "make demo"
    )
    return root


def test_the_check_is_queued_to_start_when_the_demo_s_last_window_has_closed(
    lake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    records = list(generate_orders(GeneratorSettings(orders=300, stores=5, start=START, span_seconds=30)))
    airflow = _Airflow()

    demo.queue_quality_check(airflow, lake, records)  # type: ignore[arg-type]

    # Windows from 10:53:15 and 10:53:30; the last ends at 10:53:45 and closes 30 s (the watermark) later.
    assert airflow.triggered == [
        ("revenue_quality_checks", {"deployment_id": "demo"}, datetime(2026, 11, 22, 10, 54, 15, tzinfo=UTC))
    ]
    assert "queued revenue_quality_checks run manual__" in capsys.readouterr().out


def test_a_stack_that_refuses_the_run_leaves_the_demo_successful(
    lake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    records = list(generate_orders(GeneratorSettings(orders=10, stores=1, start=START, span_seconds=5)))

    demo.queue_quality_check(_Airflow(refuse=True), lake, records)  # type: ignore[arg-type]

    assert "could not queue a quality check" in capsys.readouterr().out


def test_the_client_asks_airflow_to_start_the_run_at_run_after(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[str, str, Any]] = []

    def request(_client: Any, method: str, path: str, body: Any = None, auth: bool = True) -> Any:
        sent.append((method, path, body))
        return {"dag_run_id": "manual__x"}

    monkeypatch.setattr(AirflowApiClient, "_request", request)
    client = AirflowApiClient("http://localhost:1", "admin", "secret")
    at = datetime(2026, 11, 22, 10, 54, 15, tzinfo=UTC)

    assert client.trigger("revenue_quality_checks", {"deployment_id": "demo"}, run_after=at) == "manual__x"
    client.trigger("provision_topics", {})

    assert sent == [
        (
            "POST",
            "/api/v2/dags/revenue_quality_checks/dagRuns",
            {
                "logical_date": None,
                "conf": {"deployment_id": "demo"},
                "run_after": "2026-11-22T10:54:15+00:00",
            },
        ),
        ("POST", "/api/v2/dags/provision_topics/dagRuns", {"logical_date": None, "conf": {}}),
    ]
