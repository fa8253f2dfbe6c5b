"""The replay's setup (`replay.deploy_green`) against a real registry: it deploys the plan validation
made, refuses a green that is already registered before touching it, and stops a green it registered
but could not start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from revenue_platform.bluegreen import replay
from revenue_platform.errors import ConfigError
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry
from revenue_platform.streaming.launcher import SparkTarget
from revenue_platform.streaming.request import DeployRequest

ACTOR = "airflow:blue_green_replay/run-1"


def _plan(green: str = "green") -> replay.GreenPlan:
    overrides = {"kafka.revenue_topic": f"revenue_windows_{green}"}
    deploy_request = DeployRequest(green, "green", "2.0.0", overrides)
    return replay.GreenPlan(deploy_request, "blue", "kafka_earliest", {}, 5.0)


@pytest.fixture
def registry(tmp_path: Path) -> DeploymentRegistry:
    registry = DeploymentRegistry(str(tmp_path / "lake"))
    registry.register(DeploymentRecord("blue", desired_state="running"), "tester")
    registry.switch_live("blue", "tester", "first live")
    return registry


def test_a_green_already_registered_is_refused_and_left_alone(registry: DeploymentRegistry) -> None:
    """A cleared setup must not restart the green an earlier attempt stopped (its plan may be stale)."""
    registry.register(DeploymentRecord("green", desired_state="stopped"), "earlier attempt")
    events_before = registry.events("green")

    with pytest.raises(ConfigError, match="already registered"):
        replay.deploy_green(registry, _plan(), SparkTarget("local[1]"), ACTOR, None)

    assert registry.events("green") == events_before
    assert registry.get("green").desired_state == "stopped"


def test_a_green_registered_but_not_started_is_recorded_and_stopped(
    registry: DeploymentRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    def register_then_fail(registry: DeploymentRegistry, plan: replay.GreenPlan, *_: Any) -> None:
        registry.register(DeploymentRecord(plan.green, desired_state="running"), ACTOR)
        raise RuntimeError("the driver exited at start")

    monkeypatch.setattr(replay, "_deploy_planned_green", register_then_fail)

    with pytest.raises(RuntimeError, match="exited at start"):
        replay.deploy_green(registry, _plan(), SparkTarget("local[1]"), ACTOR, None)

    kinds = [(event.kind, event.reason) for event in registry.events("green")]
    assert ("replay_gate_failed", "deploy: the driver exited at start") in kinds
    assert "replay_aborted" in [kind for kind, _ in kinds]
    assert registry.get("green").desired_state == "stopped"


def test_a_plan_survives_the_xcom_s_json() -> None:
    import json

    plan = _plan()
    assert replay.GreenPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
