"""When a running deployment's windows are final, and how long the hourly checks wait for that."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from revenue_platform.airflow import quality_tasks as airflow_tasks
from revenue_platform.registry import DeploymentRecord
from revenue_platform.streaming.finality import final_through, wait_for_final_windows, windows_final
from tests.registry_helpers import register_deployment

THROUGH = datetime(2026, 11, 22, 9, 59, 30, tzinfo=UTC)
LATENESS = timedelta(seconds=30)


def publish(progress_file: Path, watermark: str | None, caught_up_at: str | None = None) -> None:
    progress_file.write_text(json.dumps({"watermark": watermark, "caught_up_at": caught_up_at}))


def test_final_by_watermark_or_by_an_idle_app_that_read_all_of_kafka_a_watermark_delay_later(
    tmp_path: Path,
) -> None:
    progress = tmp_path / "blue__revenue.json"
    assert not windows_final(str(progress), THROUGH, LATENESS).final
    publish(progress, "2026-11-22T09:59:29.999Z")
    assert not windows_final(str(progress), THROUGH, LATENESS).final
    publish(progress, "2026-11-22T09:59:30.000Z")
    assert windows_final(str(progress), THROUGH, LATENESS).final
    publish(progress, "2026-11-22T09:41:00.000Z", "2026-11-22T09:59:59+00:00")
    finality = windows_final(str(progress), THROUGH, LATENESS)
    assert not finality.final
    assert "2026-11-22T09:41:00+00:00" in finality.why
    publish(progress, "2026-11-22T09:41:00.000Z", "2026-11-22T10:00:00+00:00")
    assert windows_final(str(progress), THROUGH, LATENESS).final
    # Without the deployment's watermark delay only the watermark counts.
    assert not windows_final(str(progress), THROUGH, None).final


def test_final_through_is_the_later_of_the_watermark_and_a_watermark_delay_before_the_app_was_idle(
    tmp_path: Path,
) -> None:
    progress = tmp_path / "blue__revenue.json"
    assert final_through(str(progress), LATENESS) is None
    publish(progress, "2026-11-22T09:41:00.000Z")
    assert final_through(str(progress), LATENESS) == datetime(2026, 11, 22, 9, 41, tzinfo=UTC)
    # A quiet stream: the watermark stands at 09:41, the app had read all of Kafka at 10:00.
    publish(progress, "2026-11-22T09:41:00.000Z", "2026-11-22T10:00:00+00:00")
    through = final_through(str(progress), LATENESS)
    assert through == THROUGH
    assert windows_final(str(progress), THROUGH, LATENESS).final
    assert not windows_final(str(progress), THROUGH + timedelta(microseconds=1), LATENESS).final
    assert final_through(str(progress), None) == datetime(2026, 11, 22, 9, 41, tzinfo=UTC)


def test_the_wait_returns_when_the_app_catches_up_and_gives_up_at_its_timeout(tmp_path: Path) -> None:
    progress = tmp_path / "blue__revenue.json"
    publish(progress, "2026-11-22T09:58:00.000Z")
    said: list[str] = []
    assert not wait_for_final_windows(str(progress), THROUGH, LATENESS, 0.3, 0.05, said.append)
    assert said[0].startswith("Waiting up to")
    assert said[-1].startswith("Gave up waiting after 0 s: its event-time watermark (2026-11-22T09:58:00")

    later = threading.Timer(0.3, publish, (progress, "2026-11-22T10:00:05.000Z"))
    later.start()
    said.clear()
    assert wait_for_final_windows(str(progress), THROUGH, LATENESS, 30, 0.05, said.append)
    later.join()
    assert said[-1].startswith("Windows through 2026-11-22T09:59:30+00:00 are final: its watermark")


def test_the_checks_wait_only_for_a_running_app_that_publishes_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = register_deployment(tmp_path, deployment_id="blue")
    waits: list[datetime] = []
    monkeypatch.setattr(
        "revenue_platform.streaming.finality.wait_for_final_windows",
        lambda progress_file, through, lateness, timeout_s: waits.append(through) or True,
    )
    end = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
    stopped = DeploymentRecord(deployment_id="blue", desired_state="stopped", observed_state="stopped")
    running = DeploymentRecord(deployment_id="blue", desired_state="running", observed_state="running")
    dead = DeploymentRecord(deployment_id="blue", desired_state="running", observed_state="failed")
    airflow_tasks.wait_for_the_app(stopped, config, end)
    airflow_tasks.wait_for_the_app(running, config, end)  # nothing published yet
    assert waits == []
    progress = Path(config.names.progress_file("revenue"))
    progress.parent.mkdir(parents=True, exist_ok=True)
    publish(progress, "2026-11-22T09:58:00.000Z")
    airflow_tasks.wait_for_the_app(stopped, config, end)
    airflow_tasks.wait_for_the_app(dead, config, end)  # the supervisor gave up: nothing will be written
    assert waits == []
    airflow_tasks.wait_for_the_app(running, config, end)
    assert waits == [end - timedelta(seconds=30)]


def test_an_airflow_data_interval_end_is_compared_as_an_aware_time(tmp_path: Path) -> None:
    """The hourly run's data_interval_end is a pendulum DateTime with the standard library's UTC: in
    arithmetic it lost its zone (DateTime - timedelta was naive) and the first hourly check of a
    running deployment failed with "can't compare offset-naive and offset-aware datetimes"."""
    import pendulum

    from revenue_platform.airflow.quality_tasks import resolve_interval

    end = pendulum.instance(datetime(2026, 11, 22, 10, 0, tzinfo=UTC))
    start, parsed_end = resolve_interval(
        {"data_interval_start": end.subtract(hours=1), "data_interval_end": end}
    )
    assert (parsed_end - LATENESS).tzinfo is not None
    assert start == datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    progress = tmp_path / "blue__revenue.json"
    publish(progress, "2026-11-22T09:59:30Z")
    assert windows_final(str(progress), parsed_end - LATENESS, LATENESS).final
