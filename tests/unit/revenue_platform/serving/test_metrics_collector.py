"""The Prometheus collector on a fixture lake: a registry with a live, an outgoing, a candidate and a
stopped deployment, progress files and heartbeats as the app writes them, and a quality run. Read back
through prometheus_client's own parser, as Prometheus would scrape it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from revenue_platform.registry import DeploymentRecord, DeploymentRegistry, RegistryEvent
from revenue_platform.serving.metrics import StreamingMetricsCollector, create_metrics_app
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, DeploymentNames, local_path
from spark_apps.contract.records import DLQ_REASON_KINDS

NOW = datetime(2026, 11, 26, 10, 0, 0, tzinfo=UTC)
BLUE_PROGRESS = {
    "batch_id": 41,
    "batch_timestamp": "2026-11-26T09:59:50.000Z",
    "input_rows_per_second": 250.0,
    "processed_rows_per_second": 1200.5,
    "batch_duration_ms": 1500,
    "max_offsets_behind_latest": 320,
    "history_pending": False,
    "watermark": "2026-11-26T09:58:00Z",
    "caught_up_at": None,
    "kafka_read_all_at": "2026-11-26T09:59:30Z",
    "state_open_windows": 96,
    "batch_steps_ms": {"validate_and_count": 250, "state": 4, "gold": 900},
    "counters": {
        "records_archived": 5000,
        "dead_letters": 7,
        "windows_updated": 800,
        "orders_late": 3,
        "orders_duplicate": 11,
        "dead_letters.invalid_json": 5,
        "dead_letters.missing_field": 2,
    },
}


def _write(path: str, document: dict[str, Any]) -> None:
    target = local_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document))


def _deployment(lake: str, deployment_id: str, desired: str, is_live: bool = False, **fields: Any) -> None:
    record = DeploymentRecord(
        deployment_id=deployment_id,
        lake_root=lake,
        desired_state=desired,
        observed_state=desired,
        is_live=is_live,
        **fields,
    )
    DeploymentRegistry(lake).register(record, actor="test")


@pytest.fixture
def lake(tmp_path: Path) -> str:
    """blue live (progress, heartbeat, two restarts), green outgoing (the live switch moved away from
    it), replica a candidate waiting for approval, without any file yet, old stopped."""
    root = str(tmp_path / "lake")
    restarts = json.dumps([{"outcome": "restarted"}, {"outcome": "restarted"}, {"outcome": "gave_up"}])
    _deployment(root, "blue", "running", is_live=True, colour="blue", app_version="2.1.0",
                restart_history_json=restarts)  # fmt: skip
    _deployment(root, "green", "running", colour="green", app_version="2.0.0")
    _deployment(root, "replica", "running", last_error=f"driver died: see {root}/logs/replica.log")
    _deployment(root, "old", "stopped")
    replay_started, awaiting = (datetime(2026, 11, 26, hour, tzinfo=UTC) for hour in (8, 9))
    DeploymentRegistry(root).append_events(
        [
            RegistryEvent("blue", "live_switched", "test", "green", "blue", "promoted"),
            # replica is a release's green that passed every gate at 09:00 and waits for a human since.
            RegistryEvent("replica", "replay_started", "test", at=replay_started),
            RegistryEvent("replica", "replay_awaiting_approval", "test", at=awaiting),
        ]
    )
    blue, green = DeploymentNames(root, "blue"), DeploymentNames(root, "green")
    _write(blue.progress_file(REVENUE_QUERY_ROLE), BLUE_PROGRESS)
    _write(blue.driver_status_file, {"heartbeat_at": "2026-11-26T09:59:55+00:00"})
    _write(green.progress_file(REVENUE_QUERY_ROLE), {"max_offsets_behind_latest": 0, "history_pending": True})
    _write(green.driver_status_file, {"heartbeat_at": "2026-11-26T09:50:00+00:00"})
    _write(DeploymentNames(root, "old").progress_file(REVENUE_QUERY_ROLE), BLUE_PROGRESS)
    return root


def _scrape(lake_root: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, from the app's /metrics as Prometheus reads it."""
    app = create_metrics_app(StreamingMetricsCollector(lake_root, clock=lambda: NOW))
    response = TestClient(app).get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def _value(samples: dict[Any, float], name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def test_every_running_deployment_is_labelled_with_its_role(lake: str) -> None:
    samples = _scrape(lake)
    running = {dict(labels)["deployment"]: dict(labels)["role"]
               for name, labels in samples if name == "revenue_stream_desired_running"}  # fmt: skip
    assert running == {"blue": "live", "green": "outgoing", "replica": "candidate"}
    info = {dict(labels)["deployment"]: dict(labels) for name, labels in samples
            if name == "revenue_stream_deployment_info"}  # fmt: skip
    assert info["blue"] == {
        "deployment": "blue",
        "role": "live",
        "colour": "blue",
        "app_version": "2.1.0",
        "observed_state": "running",
    }
    assert all(dict(labels).get("deployment") != "old" for _, labels in samples)


def test_values_come_from_the_progress_file_and_heartbeat(lake: str) -> None:
    samples = _scrape(lake)
    blue = {"deployment": "blue", "role": "live"}
    expected = {
        "revenue_stream_heartbeat_age_seconds": 5.0,
        "revenue_stream_consumer_lag_records": 320.0,
        "revenue_stream_consumer_lag_seconds": 30.0,
        "revenue_stream_input_rows_per_second": 250.0,
        "revenue_stream_processed_rows_per_second": 1200.5,
        "revenue_stream_batch_duration_seconds": 1.5,
        "revenue_stream_last_batch_timestamp_seconds": datetime(
            2026, 11, 26, 9, 59, 50, tzinfo=UTC
        ).timestamp(),
        "revenue_stream_watermark_timestamp_seconds": datetime(2026, 11, 26, 9, 58, tzinfo=UTC).timestamp(),
        "revenue_stream_event_time_delay_seconds": 120.0,
        "revenue_stream_history_pending": 0.0,
        "revenue_stream_state_open_windows": 96.0,
        "revenue_stream_restarts": 2.0,
        "revenue_stream_records_archived_total": 5000.0,
        "revenue_stream_dead_letters_total": 7.0,
        "revenue_stream_windows_updated_total": 800.0,
    }
    assert {name: _value(samples, name, **blue) for name in expected} == expected
    dropped = {
        r: _value(samples, "revenue_stream_orders_dropped_total", **blue, reason=r)
        for r in ("late", "duplicate")
    }
    assert dropped == {"late": 3, "duplicate": 11}
    by_reason = {
        dict(labels)["reason"]: value
        for (name, labels), value in samples.items()
        if name == "revenue_stream_dead_letters_by_reason_total" and dict(labels)["deployment"] == "blue"
    }
    steps = {
        dict(labels)["step"]: value
        for (name, labels), value in samples.items()
        if name == "revenue_stream_batch_step_seconds" and dict(labels)["deployment"] == "blue"
    }
    assert steps == {"validate_and_count": 0.25, "state": 0.004, "gold": 0.9}
    # Every kind, 0 included, so that rate() sees the first dead letter of a kind.
    assert by_reason == {
        kind: {"invalid_json": 5, "missing_field": 2}.get(kind, 0) for kind in DLQ_REASON_KINDS
    }
    green = {"deployment": "green", "role": "outgoing"}
    assert [
        _value(samples, name, **green)
        for name in ("revenue_stream_heartbeat_age_seconds", "revenue_stream_history_pending")
    ] == [600, 1]


def test_what_no_file_says_is_left_out_not_made_up(lake: str) -> None:
    samples = _scrape(lake)
    replica = {"deployment": "replica", "role": "candidate"}
    assert [_value(samples, "revenue_stream_desired_running", **replica)] == [1]
    for name in ("revenue_stream_heartbeat_age_seconds", "revenue_stream_consumer_lag_records",
                 "revenue_stream_watermark_timestamp_seconds", "revenue_stream_history_pending"):  # fmt: skip
        assert _value(samples, name, **replica) is None, name
    # A driver that counts dead letters only in total (or not yet) has no series per reason.
    assert not [labels for name, labels in samples if name == "revenue_stream_dead_letters_by_reason_total"
                and dict(labels)["deployment"] != "blue"]  # fmt: skip
    # green's file has no watermark yet (a replay reading its history): no delay is reported for it.
    green = {"deployment": "green", "role": "outgoing"}
    assert _value(samples, "revenue_stream_event_time_delay_seconds", **green) is None


@pytest.mark.parametrize(
    ("batch_started", "caught_up_at", "rates"),
    [
        # Ended 8.5 s ago (within 3 trigger intervals, at least 30 s): the batch's own rates.
        ("2026-11-26T09:59:50Z", None, (250.0, 1200.5)),
        # Spark reported the query idle after that batch: nothing arrives, nothing is processed.
        ("2026-11-26T09:44:00Z", "2026-11-26T09:59:55Z", (0.0, 0.0)),
        # 16 minutes without a batch or an idle report (a driver that stopped publishing): no rate at all.
        ("2026-11-26T09:44:00Z", None, (None, None)),
    ],
)
def test_rates_are_served_only_while_they_describe_the_app(
    lake: str, batch_started: str, caught_up_at: str | None, rates: tuple[float | None, float | None]
) -> None:
    progress = {**BLUE_PROGRESS, "batch_timestamp": batch_started, "caught_up_at": caught_up_at}
    _write(DeploymentNames(lake, "blue").progress_file(REVENUE_QUERY_ROLE), progress)
    samples = _scrape(lake)
    blue = {"deployment": "blue", "role": "live"}
    assert (
        _value(samples, "revenue_stream_input_rows_per_second", **blue),
        _value(samples, "revenue_stream_processed_rows_per_second", **blue),
    ) == rates


def test_the_latest_quality_run_of_each_deployment(lake: str) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from revenue_platform.quality.results import results_table_path

    def run(run_id: str, at: datetime, outcomes: list[bool]) -> list[dict[str, Any]]:
        row = {"run_id": run_id, "deployment_id": "blue", "checked_at": at}
        return [{**row, "success": ok} for ok in outcomes]

    rows = run("r1", datetime(2026, 11, 26, 8, tzinfo=UTC), [True, True, True]) + run(
        "r2", datetime(2026, 11, 26, 9, tzinfo=UTC), [True, False, False]
    )
    write_deltalake(results_table_path(lake), pa.Table.from_pylist(rows))
    samples = _scrape(lake)
    blue = {"deployment": "blue", "role": "live"}
    quality = {name: _value(samples, f"revenue_quality_{name}", **blue)
               for name in ("checks_failed", "checks_passed", "last_run_timestamp_seconds")}  # fmt: skip
    at = datetime(2026, 11, 26, 9, tzinfo=UTC).timestamp()
    assert quality == {"checks_failed": 2, "checks_passed": 1, "last_run_timestamp_seconds": at}
    assert [_value(samples, "revenue_metrics_source_up", source="quality")] == [1]


def test_an_unreadable_registry_still_answers_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "lake" / "_registry").mkdir(parents=True)
    (tmp_path / "lake" / "_registry" / "deployments").write_text("not a Delta table")
    samples = _scrape(str(tmp_path / "lake"))
    assert [_value(samples, "revenue_metrics_source_up", source="registry")] == [0]
    assert not [name for name, _ in samples if name.startswith("revenue_stream_")]


def test_openmetrics_when_the_scraper_asks_for_it(lake: str) -> None:
    app = create_metrics_app(StreamingMetricsCollector(lake, clock=lambda: NOW))
    response = TestClient(app).get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.rstrip().endswith("# EOF")


def test_no_path_or_error_is_served(lake: str) -> None:
    # The endpoint answers without a login: the lake's location and a driver's error stay out of it.
    app = create_metrics_app(StreamingMetricsCollector(lake, clock=lambda: NOW))
    text = TestClient(app).get("/metrics").text
    assert 'deployment="replica"' in text
    assert lake not in text
    assert "driver died" not in text


def test_a_release_waiting_for_approval_says_since_when(lake: str) -> None:
    samples = _scrape(lake)
    waiting = {
        dict(labels)["deployment"]: value
        for (name, labels), value in samples.items()
        if name == "revenue_release_awaiting_approval_seconds"
    }
    assert waiting == {"replica": 3600}


def test_with_a_token_only_a_scrape_that_presents_it_is_answered(lake: str) -> None:
    """The endpoint answered anonymous requests with deployment ids, versions, volumes and rates; a
    platform that sets REVENUE_METRICS_TOKEN answers only Prometheus' `authorization` credentials."""
    from revenue_platform.serving.metrics import METRICS_TOKEN_ENV, scrape_token

    token = scrape_token({METRICS_TOKEN_ENV: " s3cret-scrape-token\n"})
    assert token == "s3cret-scrape-token"
    assert scrape_token({}) is None
    assert scrape_token({METRICS_TOKEN_ENV: " "}) is None
    client = TestClient(create_metrics_app(StreamingMetricsCollector(lake, clock=lambda: NOW), token=token))
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-scrape-token"}):
        refused = client.get("/metrics", headers=headers)
        assert (refused.status_code, refused.headers["www-authenticate"]) == (401, "Bearer")
        assert "revenue_stream" not in refused.text
    answered = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert answered.status_code == 200
    assert "revenue_metrics_source_up" in answered.text


def test_the_last_lake_maintenance_and_what_each_table_holds(lake: str) -> None:
    """Nothing before maintain_lake's first success; after it, when it finished and each table's size."""
    from revenue_platform.lake_maintenance import maintain_lake

    finished = "revenue_lake_maintenance_last_success_timestamp_seconds"
    assert _value(_scrape(lake), finished) is None, "no run yet: no value made up"

    before = datetime.now(UTC).timestamp()
    reports = maintain_lake(lake, ["blue"])
    samples = _scrape(lake)
    assert before <= (_value(samples, finished) or 0) <= datetime.now(UTC).timestamp()
    deployments = next(r for r in reports if r.kind == "registry_deployments")
    labels = {"table": "registry_deployments", "deployment": ""}
    assert _value(samples, "revenue_lake_table_files", **labels) == deployments.files_after > 0
    assert _value(samples, "revenue_lake_table_bytes", **labels) == deployments.bytes_after > 0
    # blue's gold and bronze do not exist in this lake: no size is served for them.
    assert _value(samples, "revenue_lake_table_files", table="gold", deployment="blue") is None
