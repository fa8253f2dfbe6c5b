"""The operations view's quality panel before a deployment's first quality run: when the next one is due,
why there is none yet, and where to trigger one, instead of an empty panel for up to an hour."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from revenue_platform.paths import DAGS_DIR
from revenue_platform.quality.request import QUALITY_DAG_ID, QUALITY_SCHEDULE
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry, RegistryEvent
from revenue_platform.serving.auth import require_airflow_user
from revenue_platform.serving.operations_state import (
    LIVE_SWITCH_EVENT,
    live_since,
    next_scheduled_quality_run,
    why_no_quality_run,
)
from revenue_platform.serving.operations_view import create_operations_app

DEMO_ENDED = datetime(2026, 11, 22, 10, 54, 12, tzinfo=UTC)
"""The user's report: `make demo` ended at 10:54; the panel stayed empty until the 11:00 run."""


def test_the_view_s_schedule_is_the_quality_dag_s() -> None:
    """The view says when the DAG runs next: its cron must be the one the DAG file schedules."""
    spec = importlib.util.spec_from_file_location("quality_dag", DAGS_DIR / "revenue_quality_checks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = module.revenue_quality_checks()

    assert dag.dag_id == QUALITY_DAG_ID
    timetable = dag.timetable.timetable  # AssetOrTimeSchedule: the time part
    assert (timetable.expression, str(timetable.timezone)) == (QUALITY_SCHEDULE, "UTC")
    # next_scheduled_quality_run counts in whole hours from minute 0: another cron needs it changed too.
    assert QUALITY_SCHEDULE == "0 * * * *"


@pytest.mark.parametrize(
    ("now", "due"),
    [
        (DEMO_ENDED, datetime(2026, 11, 22, 11, 0, tzinfo=UTC)),
        (datetime(2026, 11, 22, 11, 0, tzinfo=UTC), datetime(2026, 11, 22, 12, 0, tzinfo=UTC)),
        (datetime(2026, 11, 22, 23, 59, 59, tzinfo=UTC), datetime(2026, 11, 23, 0, 0, tzinfo=UTC)),
    ],
)
def test_the_next_run_is_the_next_full_hour(now: datetime, due: datetime) -> None:
    assert next_scheduled_quality_run(now) == due


def test_a_deployment_live_since_after_the_last_hourly_run_waits_for_the_next() -> None:
    reason = why_no_quality_run(DEMO_ENDED, "demo", "demo", DEMO_ENDED - timedelta(minutes=1))

    assert reason == (
        "demo went live at 2026-11-22 10:53:12 UTC, after the last hourly run (10:00 UTC): "
        "the next one checks it."
    )


def test_a_deployment_live_before_the_last_hourly_run_should_have_been_checked() -> None:
    reason = why_no_quality_run(DEMO_ENDED, "demo", "demo", DEMO_ENDED - timedelta(hours=2))

    assert "so the 10:00 UTC run should have checked it" in reason
    assert f"look at {QUALITY_DAG_ID}'s runs in Airflow" in reason


def test_without_a_live_deployment_the_hourly_run_skips() -> None:
    assert why_no_quality_run(DEMO_ENDED, None, None, None).startswith(
        "Nothing is live yet, so the hourly run skips"
    )
    candidate = why_no_quality_run(DEMO_ENDED, "green", "blue", None)
    assert candidate.startswith("Scheduled runs check the live deployment (blue), not green")
    assert "deployment_id green" in candidate


def test_live_since_is_the_last_switch_to_the_deployment() -> None:
    def switch(to: str, at: datetime) -> RegistryEvent:
        return RegistryEvent(to, LIVE_SWITCH_EVENT, "tester", None, to, "by hand", at=at)

    events = [
        switch("blue", DEMO_ENDED - timedelta(hours=3)),
        switch("green", DEMO_ENDED - timedelta(hours=2)),
    ]
    events.append(switch("blue", DEMO_ENDED - timedelta(hours=1)))

    assert live_since("blue", events) == DEMO_ENDED - timedelta(hours=1)
    assert live_since("red", events) is None


def _quality(lake: Path, now: datetime) -> dict[str, object]:
    app = create_operations_app(str(lake), clock=lambda: now)
    app.dependency_overrides[require_airflow_user] = lambda: {"name": "tester"}
    with TestClient(app) as client:
        body: dict[str, object] = client.get("/api/quality").json()
    return body


def test_right_after_the_demo_the_panel_says_when_the_first_run_comes_and_why_none_yet(
    tmp_path: Path,
) -> None:
    lake = tmp_path / "lake"
    registry = DeploymentRegistry(str(lake))
    registry.register(DeploymentRecord("demo", lake_root=str(lake), desired_state="running"), "make demo")
    registry.switch_live("demo", actor="make demo", reason="first deployment on this stack")
    went_live = live_since("demo", registry.events())
    assert went_live is not None

    # The moment it went live (the registry stamps the switch with the real clock): never past the hour.
    body = _quality(lake, went_live)

    assert body["latest"] is None
    assert body["deployment_id"] == "demo"
    assert datetime.fromisoformat(str(body["next_scheduled_at"])) == next_scheduled_quality_run(went_live)
    assert str(body["no_run_reason"]).startswith("demo went live at ")
    assert (body["dag_id"], body["dag_page"]) == ("revenue_quality_checks", "dags/revenue_quality_checks")
    assert body["data_docs_url"] == "data-docs/index.html"
