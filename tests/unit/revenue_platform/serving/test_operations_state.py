"""What the operations view concludes: current, idle or stale rates, roles through a switch, approvals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from revenue_platform.airflow.dag_defaults import actor_from_context
from revenue_platform.bluegreen.triggers import AWAITING_APPROVAL, PROMOTE, choose_next_step
from revenue_platform.registry import DeploymentRecord, RegistryEvent
from revenue_platform.serving.operations_state import (
    APPROVAL_TASK_ID,
    SwitchApproval,
    approval_page,
    batch_rates,
    dag_run_of_actor,
    deployment_role,
    pending_approvals,
    rates_current_for_s,
    switch_approval,
)

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
ACTOR = "airflow:blue_green_replay/manual__2026-11-22T10:00:00+00:00 (user alice)"


def _progress(**fields: Any) -> dict[str, Any]:
    """A progress document as spark_apps.engine.observability writes it: a batch that ran 2 s from T0."""
    return {
        "batch_id": 7,
        "batch_timestamp": "2026-11-22T10:00:00.000Z",
        "batch_duration_ms": 2000,
        "num_input_rows": 300,
        "input_rows_per_second": 150.0,
        "processed_rows_per_second": 221.7,
        "caught_up_at": None,
        **fields,
    }


@pytest.mark.parametrize(("trigger_s", "current_for_s"), [(2, 30.0), (10, 30.0), (20, 60.0), (300, 900.0)])
def test_rates_are_current_for_three_trigger_intervals_and_at_least_30_s(
    trigger_s: float, current_for_s: float
) -> None:
    assert rates_current_for_s(trigger_s) == current_for_s


def test_a_recent_batchs_input_and_processed_rates_are_shown_together() -> None:
    rates = batch_rates(_progress(), 2, T0 + timedelta(seconds=12))

    assert (rates.state, rates.batch_id, rates.age_s) == ("current", 7, 10.0)
    assert rates.batch_ended_at == T0 + timedelta(seconds=2)
    assert (rates.input_rows_per_second, rates.processed_rows_per_second, rates.input_rows) == (
        150.0,
        221.7,
        300,
    )


def test_rates_of_a_batch_older_than_the_bound_are_stale_and_not_shown() -> None:
    at_bound = batch_rates(_progress(), 2, T0 + timedelta(seconds=32))
    past_it = batch_rates(_progress(), 2, T0 + timedelta(seconds=32.5))

    assert at_bound.state == "current"
    assert (past_it.state, past_it.age_s, past_it.batch_id) == ("stale", 30.5, 7)
    assert (past_it.input_rows_per_second, past_it.processed_rows_per_second) == (None, None)


def test_an_idle_report_after_the_batch_makes_the_app_idle_at_once() -> None:
    idle = batch_rates(_progress(caught_up_at="2026-11-22T10:00:12+00:00"), 2, T0 + timedelta(minutes=16))
    soon = batch_rates(_progress(caught_up_at="2026-11-22T10:00:12+00:00"), 2, T0 + timedelta(seconds=13))

    assert (idle.state, idle.age_s) == ("idle", 16 * 60 - 2)
    assert (idle.input_rows_per_second, idle.processed_rows_per_second) == (None, None)
    assert soon.state == "idle", "Spark said it found nothing new after the batch: the rates are over"


def test_times_without_an_offset_are_utc_and_compare_with_the_others() -> None:
    rates = batch_rates(_progress(caught_up_at="2026-11-22T10:00:12"), 2, T0 + timedelta(seconds=13))
    assert rates.state == "idle"


def test_an_idle_report_from_before_the_batch_does_not_count() -> None:
    rates = batch_rates(_progress(caught_up_at="2026-11-22T09:59:00+00:00"), 2, T0 + timedelta(seconds=5))
    assert rates.state == "current"


def test_the_first_batch_after_a_start_has_no_measured_input_rate() -> None:
    """Spark reports input 0.0 next to a real processed rate when no trigger came before the batch."""
    first = batch_rates(_progress(input_rows_per_second=0.0, processed_rows_per_second=109.9), 2, T0)
    empty = batch_rates(
        _progress(num_input_rows=0, input_rows_per_second=0.0, processed_rows_per_second=0.0), 2, T0
    )

    assert (first.input_rows_per_second, first.processed_rows_per_second) == (None, 109.9)
    assert (empty.input_rows_per_second, empty.processed_rows_per_second) == (0.0, 0.0)


@pytest.mark.parametrize("progress", [{}, {"batch_id": 1}, {"batch_timestamp": "garbage", "batch_id": 1}])
def test_no_batch_means_no_rates(progress: dict[str, Any]) -> None:
    assert batch_rates(progress, 2, T0).state == "none"


# --- roles ---------------------------------------------------------------------------------------
def _record(deployment_id: str, *, live: bool = False, desired: str = "running") -> DeploymentRecord:
    return DeploymentRecord(deployment_id, is_live=live, desired_state=desired)


def _switch(minutes: int, to: str, before: str | None, actor: str = ACTOR) -> RegistryEvent:
    return RegistryEvent(to, "live_switched", actor, before, to, "why", at=T0 + timedelta(minutes=minutes))


def _deployed(minutes: int, deployment_id: str) -> RegistryEvent:
    at = T0 + timedelta(minutes=minutes)
    return RegistryEvent(deployment_id, "desired_state", "deploy", "stopped", "running", "deploy", at=at)


def _promoted(minutes: int, green: str, details: dict[str, Any]) -> RegistryEvent:
    at = T0 + timedelta(minutes=minutes)
    return RegistryEvent(green, "replay_promoted", ACTOR, None, green, "promoted", details, at=at)


def test_the_live_deployment_says_since_when() -> None:
    role = deployment_role(
        _record("green", live=True), [_switch(0, "blue", None), _switch(5, "green", "blue")]
    )
    assert (role.role, role.note) == ("live", "live since 2026-11-22 10:05:00 UTC")


def test_the_deployment_a_replay_replaced_is_outgoing_during_the_grace_period_not_a_candidate() -> None:
    events = [
        _deployed(0, "blue"),
        _switch(1, "blue", None, "make demo"),
        _deployed(2, "green"),
        _switch(5, "green", "blue"),
        _promoted(5, "green", {"approved_by": {"id": "bob", "name": "bob"}, "require_approval": True}),
    ]

    blue = deployment_role(_record("blue"), events)
    green_before = deployment_role(_record("green"), events[:3])

    assert blue.role == "outgoing"
    assert blue.note == (
        "live until 2026-11-22 10:05:00 UTC, now green; kept running for the replay's grace period, "
        "then stopped"
    )
    assert green_before.role == "candidate"
    assert deployment_role(_record("blue", desired="stopped"), events).role == "stopped"


def test_a_deployment_rolled_back_from_is_outgoing_and_must_be_stopped_by_hand() -> None:
    events = [_switch(0, "blue", None), _switch(5, "green", "blue"), _switch(9, "blue", "green", "rollback")]
    green = deployment_role(_record("green"), events)
    assert green.role == "outgoing"
    assert green.note is not None
    assert "stop_streaming_app" in green.note


def test_a_deployment_deployed_again_after_it_lost_live_is_a_candidate_again() -> None:
    events = [_switch(0, "blue", None), _switch(5, "green", "blue"), _deployed(20, "blue")]
    assert deployment_role(_record("blue"), events).role == "candidate"


# --- approvals -----------------------------------------------------------------------------------
def test_the_dag_run_is_read_back_from_the_actor_the_tasks_write() -> None:
    context = {
        "dag_run": SimpleNamespace(triggering_user_name="alice"),
        "dag": SimpleNamespace(dag_id="blue_green_replay"),
        "run_id": "manual__2026-11-22T10:00:00+00:00",
    }
    unattended = {**context, "dag_run": SimpleNamespace(triggering_user_name=None)}

    assert dag_run_of_actor(actor_from_context(context)) == ("blue_green_replay", context["run_id"])
    assert dag_run_of_actor(actor_from_context(unattended)) == ("blue_green_replay", context["run_id"])
    assert dag_run_of_actor("make demo") is None


def test_the_approval_page_is_the_approval_tasks_required_actions_tab() -> None:
    assert choose_next_step(PROMOTE, require_approval=True) == APPROVAL_TASK_ID
    assert approval_page("blue_green_replay", "manual__2026-11-22T10:00:00+00:00") == (
        "dags/blue_green_replay/runs/manual__2026-11-22T10:00:00+00:00/tasks/request_approval/required_actions"
    )
    assert approval_page("d", "a/b c") == "dags/d/runs/a%2Fb%20c/tasks/request_approval/required_actions"


def test_a_replay_waiting_for_approval_is_pending_until_it_ends() -> None:
    started = RegistryEvent("green", "replay_started", ACTOR, None, "1.1", "replay", at=T0)
    waiting = RegistryEvent(
        "green", AWAITING_APPROVAL, ACTOR, None, None, "waiting", at=T0 + timedelta(minutes=3)
    )

    [pending] = pending_approvals([started, waiting], running=["blue", "green"])
    assert (pending.green_deployment_id, pending.since, pending.requested_by) == (
        "green",
        T0 + timedelta(minutes=3),
        ACTOR,
    )
    assert pending.approval_page is not None
    assert pending.approval_page.startswith("dags/blue_green_replay/runs/")
    assert pending_approvals([started], running=["green"]) == [], "still in its gates"
    assert pending_approvals([started, waiting, _promoted(4, "green", {})], running=["green"]) == []
    assert pending_approvals([started, waiting], running=["blue"]) == [], "green was stopped"


def test_who_approved_a_switch_comes_from_its_promotion_evidence() -> None:
    switch = _switch(5, "green", "blue")
    approved = _promoted(5, "green", {"approved_by": {"id": "7", "name": "bob"}, "require_approval": True})
    unattended = _promoted(5, "green", {"approved_by": None, "require_approval": False})
    other_run = RegistryEvent(
        "green", "replay_promoted", "another run", None, "green", "", {"approved_by": "eve"}
    )

    assert switch_approval(switch, [switch, approved]) == SwitchApproval("bob", True)
    assert switch_approval(switch, [switch, unattended]) == SwitchApproval(None, False)
    assert switch_approval(switch, [switch, other_run]) == SwitchApproval(None, None), "not this run's"
    assert switch_approval(_switch(9, "blue", "green", "rollback"), [approved]) == SwitchApproval(None, None)
