"""What a run stands for, read from a real registry (Delta tables in a temp lake): releases, live, overlap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from revenue_platform.bluegreen.replay import check_no_replay_in_flight, resolve_request
from revenue_platform.bluegreen.triggers import ReleaseEvent
from revenue_platform.errors import ConfigError
from revenue_platform.registry import (
    DeploymentRecord,
    DeploymentRegistry,
    RegistryEvent,
    ReleaseNotFoundError,
    ReleaseRecord,
)

WHEN = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
FORM = {"green_deployment_id": "green", "version": "dev", "config_overrides": {}, "require_approval": False}


@pytest.fixture
def registry(tmp_path: Path) -> DeploymentRegistry:
    registry = DeploymentRegistry(str(tmp_path / "lake"))
    registry.register(DeploymentRecord("blue", app_version="1.4.0", desired_state="running"), "tester")
    registry.switch_live("blue", "tester", "first live")
    return registry


def test_a_release_run_replays_the_newest_release_from_the_registry(registry: DeploymentRegistry) -> None:
    old, _ = registry.publish_release(ReleaseRecord.create("2.0.0", {}, True, "", "alice"))
    new, _ = registry.publish_release(
        ReleaseRecord.create("2.1.0", {"shuffle_partitions": 4}, False, "", "bob")
    )
    events = [
        ReleaseEvent("2.1.0", new.config_hash, WHEN),
        ReleaseEvent("2.0.0", old.config_hash, WHEN - timedelta(minutes=5)),
    ]
    said: list[str] = []

    request = resolve_request(registry, "release", FORM, events, WHEN, None, said.append)

    assert (request.version, request.require_approval, request.mode) == ("2.1.0", False, "promote")
    assert request.config_overrides == {"shuffle_partitions": 4}
    assert request.green_deployment_id == "green-2-1-0-20261122093000"
    assert any("2.0.0" in line and "superseded" in line for line in said)


def test_a_release_event_must_match_a_published_release(registry: DeploymentRegistry) -> None:
    registry.publish_release(ReleaseRecord.create("2.1.0", {"shuffle_partitions": 4}, True, "", "alice"))

    with pytest.raises(ConfigError, match="config hash"):
        resolve_request(registry, "release", FORM, [ReleaseEvent("2.1.0", "forged", WHEN)], WHEN, None)
    with pytest.raises(ReleaseNotFoundError, match="publish_app_version"):
        resolve_request(registry, "release", FORM, [ReleaseEvent("9.0.0", None, WHEN)], WHEN, None)


def test_a_periodic_run_reproduces_the_live_version(registry: DeploymentRegistry) -> None:
    request = resolve_request(registry, "periodic", FORM, [], WHEN, "record")
    assert (request.version, request.mode, request.trigger) == ("1.4.0", "reproduce", "periodic")
    assert request.green_deployment_id == "repro-20261122093000"


def test_check_no_replay_in_flight_reads_airflow_counts_and_the_registry(
    registry: DeploymentRegistry, tmp_path: Path
) -> None:
    assert check_no_replay_in_flight(registry, "manual", 0, 0) is None
    assert "1 other blue_green_replay run(s) are running" in (
        check_no_replay_in_flight(registry, "manual", 1, 0) or ""
    )

    registry.register(DeploymentRecord("green-x", desired_state="running"), "tester")
    registry.append_events(
        [
            RegistryEvent("green-x", "replay_started", "airflow:blue_green_replay/run-1"),
            RegistryEvent("green-x", "replay_awaiting_approval", "airflow:blue_green_replay/run-1"),
        ]
    )
    reason = check_no_replay_in_flight(registry, "manual", 0, 0)
    assert reason is not None
    assert "replay of green-x" in reason
    assert "waiting for approval" in reason

    empty = DeploymentRegistry(str(tmp_path / "empty-lake"))
    assert "no deployment is live" in (check_no_replay_in_flight(empty, "periodic", 0, 0) or "")
    assert check_no_replay_in_flight(empty, "manual", 0, 0) is None
