"""The blue_green_replay DAG's gated steps, against a real registry (Delta tables in a temp lake)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from revenue_platform.airflow.replay_tasks import ReplayRun, gated, switch_live
from revenue_platform.bluegreen import ReplayGateFailed
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry

ACTOR = "airflow:blue_green_replay/run-1 (user ann)"
REQUEST = {
    "green_deployment_id": "green",
    "blue_deployment_id": "blue",
    "require_approval": True,
    "mode": "promote",
}
PASSED_DIFF = {"passed": True, "windows_compared": 4, "mismatched_windows": 0, "sample": []}
EMPTY_DIFF = {"passed": True, "windows_compared": 0, "mismatched_windows": 0, "sample": []}
APPROVED = {"chosen_options": ["Approve"], "responded_by_user": "ann"}


APPROVERS_ENV = "AIRFLOW__REVENUE_PLATFORM__APPROVERS"


@pytest.fixture(autouse=True)
def no_approver_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test stack names an approver group; these tests name their own, or none."""
    monkeypatch.delenv(APPROVERS_ENV, raising=False)


@pytest.fixture
def registry(tmp_path: Path) -> DeploymentRegistry:
    registry = DeploymentRegistry(str(tmp_path / "lake"))
    for deployment_id in ("blue", "green"):
        registry.register(DeploymentRecord(deployment_id, desired_state="running"), "tester")
    registry.switch_live("blue", "tester", "first live")
    return registry


class _TaskInstance:
    """The one thing the steps ask of Airflow's task instance here: another task's XCom."""

    def __init__(self, xcoms: dict[str, Any]) -> None:
        self.xcoms = xcoms

    def xcom_pull(self, task_ids: str) -> Any:
        return self.xcoms.get(task_ids)


def _run(registry: DeploymentRegistry, approval: dict[str, Any] | None = None) -> ReplayRun:
    return ReplayRun(registry, ACTOR, {"ti": _TaskInstance({"request_approval": approval})})


def _gate_failures(registry: DeploymentRegistry) -> list[str | None]:
    return [e.reason for e in registry.events("green") if e.kind == "replay_gate_failed"]


def test_a_failing_step_is_recorded_as_its_gate_and_re_raised(registry: DeploymentRegistry) -> None:
    def step() -> dict[str, Any]:
        raise ReplayGateFailed("no gold output")

    with pytest.raises(ReplayGateFailed, match="no gold output"):
        gated(_run(registry), "green", "quality", step)
    assert _gate_failures(registry) == ["quality: no gold output"]
    assert gated(_run(registry), "green", "diff", lambda: {"ok": True}) == {"ok": True}


def test_switch_promotes_only_with_every_gate_passed_and_approval(registry: DeploymentRegistry) -> None:
    rejected = {"chosen_options": ["Reject"], "responded_by_user": "bob"}
    with pytest.raises(ReplayGateFailed, match="approval required and not given"):
        switch_live(_run(registry, rejected), REQUEST, {"behind": 0}, {"success": True}, PASSED_DIFF)
    with pytest.raises(ReplayGateFailed, match="no final window covered"):
        switch_live(
            _run(registry, APPROVED), REQUEST, {"behind": 0}, {"success": True}, {"windows_compared": 0}
        )
    assert registry.live_deployment() == "blue"
    assert [reason.split(":")[0] for reason in _gate_failures(registry) if reason] == ["switch", "switch"]

    result = switch_live(_run(registry, APPROVED), REQUEST, {"behind": 0}, {"success": True}, PASSED_DIFF)

    assert result == {"previous": "blue", "live": "green"}
    assert registry.live_deployment() == "green"
    [promoted] = [e for e in registry.events("green") if e.kind == "replay_promoted"]
    assert (promoted.actor, promoted.details["approved_by"]) == (ACTOR, "ann")


def test_switch_is_skipped_in_reproduce_mode(registry: DeploymentRegistry) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    with pytest.raises(AirflowSkipException, match="reproduce mode"):
        switch_live(_run(registry), {**REQUEST, "mode": "reproduce"}, {}, {"success": True}, PASSED_DIFF)
    assert registry.live_deployment() == "blue"


def test_the_branch_audits_a_request_for_approval(registry: DeploymentRegistry) -> None:
    from revenue_platform.airflow.replay_tasks import choose_next_step

    assert choose_next_step(_run(registry), {**REQUEST, "require_approval": False}) == "no_approval_required"
    assert choose_next_step(_run(registry), REQUEST) == "request_approval"
    assert [e.kind for e in registry.events("green")][-1] == "replay_awaiting_approval"


def test_the_teardown_without_a_validated_request_does_nothing(registry: DeploymentRegistry) -> None:
    from revenue_platform.airflow.replay_tasks import abort_green

    run = ReplayRun(registry, ACTOR, {"ti": _TaskInstance({})})
    assert abort_green(run) == {"action": "nothing"}


def test_a_run_knows_its_trigger_from_its_run_type_and_release_events(registry: DeploymentRegistry) -> None:
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from revenue_platform.airflow.assets import app_release_asset

    manual = ReplayRun(registry, ACTOR, {"dag_run": SimpleNamespace(run_type="manual")})
    assert manual.trigger() == ("manual", [])
    at = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
    event = SimpleNamespace(extra={"version": "2.1.0", "config_hash": "abc"}, timestamp=at)
    released = ReplayRun(
        registry,
        ACTOR,
        {
            "dag_run": SimpleNamespace(run_type="asset_triggered"),
            "triggering_asset_events": {app_release_asset(): [event]},
        },
    )
    kind, [release] = released.trigger()
    assert (kind, release.version, release.config_hash, release.at) == ("release", "2.1.0", "abc", at)


def test_the_diff_reads_each_deployments_final_windows_from_its_published_progress(tmp_path: Path) -> None:
    import json
    from datetime import datetime

    from revenue_platform.bluegreen.window_diff import final_windows_through
    from tests.registry_helpers import register_deployment

    lake = tmp_path / "lake"
    config = register_deployment(lake, deployment_id="blue")
    blue = replace(DeploymentRegistry(str(lake)).get("blue"), observed_state="running")
    assert final_windows_through(blue) is None
    progress = Path(config.names.progress_file("revenue"))
    progress.parent.mkdir(parents=True, exist_ok=True)
    # Idle and caught up long after its last order: every window up to a watermark delay (30 s) before.
    progress.write_text(
        json.dumps({"watermark": "2026-11-22T09:01:30Z", "caught_up_at": "2026-11-22T12:00:00+00:00"})
    )
    # Naive UTC, like gold's window times that it bounds.
    assert final_windows_through(blue) == datetime(2026, 11, 22, 11, 59, 30)
    # Retired: orders appended after it stopped are in none of its windows, so only its watermark counts
    # (a green replayed from its bronze archive reads them, and they are no difference to blame on it).
    retired = replace(blue, desired_state="stopped", observed_state="stopped")
    assert final_windows_through(retired) == datetime(2026, 11, 22, 9, 1, 30)


def test_the_diff_waits_for_what_arrived_before_it_only_a_bounded_time(tmp_path: Path) -> None:
    import json
    import time
    from datetime import UTC, datetime, timedelta

    from revenue_platform.bluegreen.window_diff import wait_until_final
    from tests.registry_helpers import register_deployment

    lake = tmp_path / "lake"
    configs = [register_deployment(lake, deployment_id=name) for name in ("blue", "green")]
    registry = DeploymentRegistry(str(lake))
    records = [replace(registry.get(name), observed_state="running") for name in ("blue", "green")]
    started = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    said: list[str] = []
    # Neither app has published anything: the wait ends at its bound, however many apps it waits for.
    began = time.monotonic()
    wait_until_final(records, started, 0.4, 0.05, said.append)
    assert time.monotonic() - began < 2
    assert said[-1].startswith("[replay] green: Gave up waiting after 0 s")
    # Both idle with all of Kafka read after the diff started: nothing to wait for.
    for config in configs:
        progress = Path(config.names.progress_file("revenue"))
        progress.parent.mkdir(parents=True, exist_ok=True)
        caught_up = started + timedelta(seconds=2)
        progress.write_text(json.dumps({"watermark": None, "caught_up_at": caught_up.isoformat()}))
    said.clear()
    wait_until_final(records, started, 30, 0.05, said.append)
    assert [line.split(":")[0] for line in said] == ["[replay] blue", "[replay] green"]
    assert all("is idle and had read all of Kafka" in line for line in said)
    # A stopped app publishes nothing more: no wait for it.
    said.clear()
    wait_until_final(
        [replace(records[0], observed_state="stopped")], started + timedelta(hours=1), 30, 0.05, said.append
    )
    assert said == ["[replay] blue is not running: its windows are final by its watermark"]


def test_bronze_offset_bounds_are_per_partition_of_the_one_topic(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from revenue_platform.bluegreen.replay import bronze_offset_bounds

    bronze = str(tmp_path / "bronze")
    assert bronze_offset_bounds(bronze, "orders") == {}
    rows = [("orders", 0, 5), ("orders", 0, 9), ("orders", 1, 2), ("orders_eu", 0, 1), ("orders_eu", 2, 70)]
    schema = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64())])
    write_deltalake(
        bronze, pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema)
    )

    assert bronze_offset_bounds(bronze, "orders") == {0: (5, 9), 1: (2, 2)}
    assert bronze_offset_bounds(bronze, "orders' OR TRUE --") == {}


def test_a_rollback_returns_only_to_a_deployment_that_was_live(registry: DeploymentRegistry) -> None:
    """A rollback skips catch-up, quality, diff and approval: it made any registered deployment live
    (one registered with a 1 s dedupe horizon and no amount cap served at once)."""
    from revenue_platform.bluegreen.replay import rollback
    from revenue_platform.errors import ConfigError

    registry.register(DeploymentRecord("rogue", desired_state="running"), "mallory")
    with pytest.raises(ConfigError, match="'rogue' was never live"):
        rollback(registry, "rogue", "trust me", "airflow:rollback_live_deployment/x", lambda _: None)
    assert registry.live_deployment() == "blue"
    # green was live once: returning to it, and back to blue, are rollbacks.
    registry.switch_live("green", "tester", "promoted")
    registry.switch_live("blue", "tester", "back")
    assert rollback(registry, "green", "blue is off", "airflow:x", lambda _: None)["to"] == "green"
    assert rollback(registry, None, "green is off too", "airflow:x", lambda _: None)["to"] == "blue"


def test_the_user_who_asked_for_a_replay_cannot_approve_its_switch(registry: DeploymentRegistry) -> None:
    """The approval task named no assigned users, so the requester approved their own switch."""
    from types import SimpleNamespace

    def run_by(user: str | None, approval: dict[str, Any]) -> ReplayRun:
        ti = _TaskInstance({"request_approval": approval})
        return ReplayRun(registry, ACTOR, {"ti": ti, "dag_run": SimpleNamespace(triggering_user_name=user)})

    for own in (
        {**APPROVED, "responded_by_user": "ann"},
        {**APPROVED, "responded_by_user": {"id": "7", "name": "ann"}},
    ):
        with pytest.raises(ReplayGateFailed, match="approved by ann, who requested it"):
            switch_live(run_by("ann", own), REQUEST, {"behind": 0}, {"success": True}, PASSED_DIFF)
    assert registry.live_deployment() == "blue"
    # A release's publisher asked for it too.
    from revenue_platform.registry.models import ReleaseRecord

    # published_by is the publishing run's audit actor, as actor_from_context writes it.
    publisher = "airflow:publish_app_version/manual__2026-12-01T10:00:00+00:00 (user carol)"
    registry.publish_release(ReleaseRecord.create("2.1.0", {}, True, "", publisher))
    released = {**REQUEST, "trigger": "release", "version": "2.1.0"}
    by_carol = {**APPROVED, "responded_by_user": "carol"}
    with pytest.raises(ReplayGateFailed, match="approved by carol, who requested it"):
        switch_live(run_by(None, by_carol), released, {"behind": 0}, {"success": True}, PASSED_DIFF)
    # Another person's approval switches.
    result = switch_live(run_by("bob", APPROVED), REQUEST, {"behind": 0}, {"success": True}, PASSED_DIFF)
    assert result == {"previous": "blue", "live": "green"}


def test_with_an_approver_group_only_its_members_approve_a_switch(
    registry: DeploymentRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow's HITL API refuses an unassigned user's answer, except under the simple auth manager's
    `all_admins` mode: the switch checks the group again."""
    monkeypatch.setenv(APPROVERS_ENV, "bob, dora")
    by_ann = {**APPROVED, "responded_by_user": {"id": "ann", "name": "Ann"}}
    outside = r"approved by ann, who is not one of the approvers \(\[revenue_platform\] approvers\)"
    with pytest.raises(ReplayGateFailed, match=outside):
        switch_live(_run(registry, by_ann), REQUEST, {"behind": 0}, {"success": True}, PASSED_DIFF)
    assert registry.live_deployment() == "blue"

    by_dora = {**APPROVED, "responded_by_user": {"id": "dora", "name": "Dora"}}
    result = switch_live(_run(registry, by_dora), REQUEST, {"behind": 0}, {"success": True}, PASSED_DIFF)
    assert result == {"previous": "blue", "live": "green"}


def test_a_malformed_approver_group_fails_the_switch_naming_the_option(
    registry: DeploymentRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from revenue_platform.errors import ConfigError

    monkeypatch.setenv(APPROVERS_ENV, "bob, $(id)")
    with pytest.raises(ConfigError, match=r"\[revenue_platform\] approvers: '\$\(id\)' is not a user id"):
        switch_live(_run(registry, APPROVED), REQUEST, {"behind": 0}, {"success": True}, PASSED_DIFF)
    assert registry.live_deployment() == "blue"


def test_the_setup_deploys_the_plan_the_validation_made_without_planning_again(
    registry: DeploymentRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`plan_green` reads Kafka's offsets and bronze's and resolves green's config: once, in
    `validate_request`, whose XCom carries the plan to the setup. Planning again there would also
    refuse a retry of the setup ("green is already registered")."""
    from revenue_platform.airflow import replay_tasks
    from revenue_platform.bluegreen import replay
    from revenue_platform.streaming import launcher
    from revenue_platform.streaming.request import DeployRequest

    deploy_request = DeployRequest("green", "green", "2.0.0", {"window.size": "1 minute"})
    plan = replay.GreenPlan(deploy_request, "blue", "kafka_earliest", {"window.size": "1 minute"}, 60.0)
    request = {"green_deployment_id": "green", "version": "2.0.0", replay_tasks.GREEN_PLAN: plan.to_dict()}
    deployed: list[replay.GreenPlan] = []

    def refuse_to_plan(*_: Any) -> None:
        raise AssertionError("the setup planned green again")

    monkeypatch.setattr(replay, "plan_green", refuse_to_plan)
    monkeypatch.setattr(launcher, "spark_target_from_connection", lambda _: launcher.SparkTarget("local[1]"))
    monkeypatch.setattr(replay_tasks, "optional_client_config", lambda _: None)
    monkeypatch.setattr(replay, "deploy_green", lambda _registry, planned, *_: deployed.append(planned) or {})

    replay_tasks.deploy_green(_run(registry), request)

    assert deployed == [plan]
    assert replay.GreenPlan.from_dict(plan.to_dict()) == plan
