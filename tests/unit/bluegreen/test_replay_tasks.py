"""The blue_green_replay DAG's gated steps, against a real registry (Delta tables in a temp lake)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from revenue_platform.bluegreen import ReplayGateFailed
from revenue_platform.bluegreen.tasks import gated, switch_live
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry

ACTOR = "airflow:blue_green_replay/run-1 (user ann)"
REQUEST = {"green_deployment_id": "green", "blue_deployment_id": "blue", "require_approval": True}
PASSED_DIFF = {"passed": True, "windows_compared": 4, "mismatched_windows": 0, "sample": []}
EMPTY_DIFF = {"passed": True, "windows_compared": 0, "mismatched_windows": 0, "sample": []}
APPROVED = {"chosen_options": ["Approve"], "responded_by_user": "ann"}


@pytest.fixture
def registry(tmp_path: Path) -> DeploymentRegistry:
    registry = DeploymentRegistry(str(tmp_path / "lake"))
    for deployment_id in ("blue", "green"):
        registry.register(DeploymentRecord(deployment_id, desired_state="running"), "tester")
    registry.switch_live("blue", "tester", "first live")
    return registry


def _gate_failures(registry: DeploymentRegistry) -> list[str | None]:
    return [e.reason for e in registry.events("green") if e.kind == "replay_gate_failed"]


def test_a_failing_step_is_recorded_as_its_gate_and_re_raised(registry: DeploymentRegistry) -> None:
    def step(registry: DeploymentRegistry, actor: str) -> dict[str, Any]:
        raise ReplayGateFailed("no gold output")

    with pytest.raises(ReplayGateFailed, match="no gold output"):
        gated(registry, "green", "quality", ACTOR, step)
    assert _gate_failures(registry) == ["quality: no gold output"]
    assert gated(registry, "green", "diff", ACTOR, lambda registry, actor: {"ok": actor}) == {"ok": ACTOR}


def test_switch_promotes_only_with_every_gate_passed_and_approval(registry: DeploymentRegistry) -> None:
    rejected = {"chosen_options": ["Reject"], "responded_by_user": "bob"}
    with pytest.raises(ReplayGateFailed, match="approval required and not given"):
        switch_live(registry, REQUEST, {"behind": 0}, {"success": True}, PASSED_DIFF, rejected, ACTOR)
    with pytest.raises(ReplayGateFailed, match="no closed window covered"):
        switch_live(
            registry, REQUEST, {"behind": 0}, {"success": True}, {"windows_compared": 0}, APPROVED, ACTOR
        )
    assert registry.live_deployment() == "blue"
    assert [reason.split(":")[0] for reason in _gate_failures(registry) if reason] == ["switch", "switch"]

    result = switch_live(registry, REQUEST, {"behind": 0}, {"success": True}, PASSED_DIFF, APPROVED, ACTOR)

    assert result == {"previous": "blue", "live": "green"}
    assert registry.live_deployment() == "green"
    [promoted] = [e for e in registry.events("green") if e.kind == "replay_promoted"]
    assert (promoted.actor, promoted.details["approved_by"]) == (ACTOR, "ann")
