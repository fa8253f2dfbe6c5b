"""The shape of blue_green_replay: setup/teardown pairing, the watcher, the approval branch."""

from __future__ import annotations

from typing import Any

import pytest

from tests.streaming_helpers import load_dags


@pytest.fixture(scope="module")
def dag() -> Any:
    return load_dags("blue_green_replay")["blue_green_replay"]


def test_green_is_deployed_as_setup_and_cleaned_up_by_a_teardown(dag: Any) -> None:
    setup, teardown = dag.get_task("deploy_green"), dag.get_task("abort_green")
    assert setup.is_setup
    assert teardown.is_teardown
    assert "deploy_green" in teardown.upstream_task_ids
    # The teardown runs after the last body step, whatever its outcome.
    assert "retire_blue" in teardown.upstream_task_ids


def test_a_watcher_fails_the_run_when_any_task_failed(dag: Any) -> None:
    watcher = dag.get_task("fail_if_any_failed")
    assert watcher.trigger_rule == "one_failed"
    assert {"wait_for_catch_up", "check_quality", "diff_against_blue", "switch_live", "abort_green"} <= set(
        watcher.upstream_task_ids
    )
    assert watcher.downstream_task_ids == set()
    # The task that failed alerts, with its error; the watcher only restating it would be a second message.
    assert not watcher.on_failure_callback


def test_switch_live_follows_every_gate_and_either_approval_path(dag: Any) -> None:
    switch = dag.get_task("switch_live")
    assert {"request_approval", "no_approval_required", "wait_for_catch_up", "check_quality"} <= set(
        switch.upstream_task_ids
    )
    assert switch.trigger_rule == "none_failed_min_one_success"
    assert dag.get_task("request_approval").fail_on_reject
    # A rejection fails the run; retrying would only ask the same question again.
    assert dag.get_task("request_approval").retries == 0
    assert dag.get_task("validate_request").downstream_task_ids >= {"deploy_green"}


def test_a_pre_check_runs_before_anything_and_its_skip_skips_the_teardown_too(dag: Any) -> None:
    precheck = dag.get_task("check_no_replay_in_flight")
    assert precheck.upstream_task_ids == set()
    assert "validate_request" in precheck.downstream_task_ids
    # The teardown only runs for a setup that ran (Airflow's all_done_setup_success), so a skipped run
    # never stops the green of the replay it made way for.
    assert dag.get_task("abort_green").trigger_rule == "all_done_setup_success"


def test_a_reproduction_replaces_approval_and_switch_and_ends_in_the_teardown(dag: Any) -> None:
    branch = dag.get_task("choose_next_step")
    assert branch.downstream_task_ids == {"request_approval", "no_approval_required", "record_reproduced"}
    reproduced = dag.get_task("record_reproduced")
    assert "diff_against_blue" in reproduced.upstream_task_ids
    assert "abort_green" in reproduced.downstream_task_ids
    assert "record_reproduced" in dag.get_task("fail_if_any_failed").upstream_task_ids
    assert dag.max_active_runs == 1


def test_releases_schedule_the_replay_and_only_a_cron_setting_adds_periodic_runs(
    dag: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable

    from revenue_platform.airflow.assets import app_release_asset

    assert list(dag.timetable.asset_condition.objects) == [app_release_asset()]
    assert not isinstance(dag.timetable, AssetOrTimeSchedule)

    monkeypatch.setenv("REPLAY_SCHEDULE", "0 3 * * 0")
    periodic = load_dags("blue_green_replay")["blue_green_replay"]

    assert isinstance(periodic.timetable, AssetOrTimeSchedule)
    assert isinstance(periodic.timetable.timetable, CronTriggerTimetable)
    assert periodic.timetable.timetable.expression == "0 3 * * 0"
    assert list(periodic.timetable.asset_condition.objects) == [app_release_asset()]


def test_publishing_a_version_emits_the_release_asset() -> None:
    from revenue_platform.airflow.assets import app_release_asset

    publish = load_dags("publish_app_version")["publish_app_version"]
    assert publish.get_task("record_release").outlets == [app_release_asset()]
    assert publish.params["require_approval"] is True


def test_the_approval_shows_the_gates_numbers_and_alerts_the_channels(dag: Any) -> None:
    from revenue_platform.airflow.approval import PromotionApprovalOperator
    from revenue_platform.airflow.notify import ApprovalRequestNotifier

    approval = dag.get_task("request_approval")
    assert isinstance(approval, PromotionApprovalOperator)
    # The prompt is built from these tasks' results, so they feed it directly.
    assert {"validate_request", "wait_for_catch_up", "check_quality", "diff_against_blue"} <= set(
        approval.upstream_task_ids
    )
    assert [type(notifier) for notifier in approval.notifiers] == [ApprovalRequestNotifier]
