"""
Blue-green replay of the streaming app. It starts three ways: by hand (this form or the REST API), when a
version is published (`publish_app_version` / `make release` emits the `streaming_app_release` asset event
this DAG is scheduled on; version, config and approval come from the registry's release row, approval
required by default) or periodically when `REPLAY_SCHEDULE` (a cron expression, off by default) is set: the
live version is rebuilt from the earliest offsets and, with a zero diff, recorded `replay_reproduced` and
retired, live untouched (`REPLAY_SCHEDULE_ACTION=switch` makes it live instead). `check_no_replay_in_flight`
skips the run, with the reason in its log, while another replay runs or waits for approval.

SETUP `deploy_green` registers and launches a new deployment (colour green, version label, config overrides
over blue's registered config) from the EARLIEST Kafka offsets (or blue's bronze archive, then Kafka, when
retention has deleted history) with a fresh checkpoint, its own tables, consumer group and revenue topic
`<revenue_topic>_<green id>`. BODY: `wait_for_catch_up` defers to the triggerer, which polls green's lag
(offsets behind, rate, ETA in the log) until it is at most `max_offsets_behind`, bounded by
`catch_up_timeout_s`; `check_quality` runs the Great Expectations revenue checks on green's output;
`diff_against_blue` compares per-window count and revenue over the windows both have made final (by the
watermark, or once caught up with Kafka; tolerances per window, absolute); with `require_approval` a human
approves in the UI (HITL), shown the gates' numbers and alerted through the `platform_alerts` connection;
`switch_live` flips the registry's live pointer to green in one Delta commit (audited); `retire_blue` keeps
blue for `grace_period_s`, then stops it. TEARDOWN `abort_green` always runs: if green is not live it is
stopped and the reason recorded in the registry; blue stays live. In `reproduce` mode `record_reproduced`
replaces approval, switch and retirement. `fail_if_any_failed` makes the run fail when any task failed, even
though the teardown succeeded; it sends no alert of its own (the task that failed sent one, with its error).

Every input is checked before anything is touched (the form is `ReplayRequest`, bluegreen/request.py); each
task calls the function of its name in airflow/replay_tasks.py. See docs/blue-green.md.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, dag, task

from revenue_platform.airflow import replay_tasks as tasks
from revenue_platform.airflow.approval import PromotionApprovalOperator
from revenue_platform.airflow.assets import app_release_asset
from revenue_platform.airflow.catch_up import WaitForCatchUpOperator
from revenue_platform.airflow.dag_defaults import platform_default_args
from revenue_platform.airflow.failure_watcher import FailureWatcherOperator
from revenue_platform.airflow.params import params_from_model
from revenue_platform.airflow.replay_tasks import ReplayRun
from revenue_platform.bluegreen.request import ReplayRequest

# A cron expression (UTC) for periodic rebuilds of the live version; empty = no periodic replays.
REPLAY_SCHEDULE = os.environ.get("REPLAY_SCHEDULE", "").strip()


def _schedule() -> Any:
    """Every release starts a replay; with REPLAY_SCHEDULE, so does every cron tick (one timetable)."""
    if not REPLAY_SCHEDULE:
        return [app_release_asset()]
    return AssetOrTimeSchedule(
        timetable=CronTriggerTimetable(REPLAY_SCHEDULE, timezone="UTC"), assets=[app_release_asset()]
    )


@dag(
    schedule=_schedule(),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    # One replay at a time: two greens racing for the live pointer would make promotion ambiguous.
    max_active_runs=1,
    doc_md=__doc__,
    tags=["streaming", "deployment", "blue-green"],
    default_args=platform_default_args(timedelta(seconds=30), non_retryable=tasks.NOT_RETRYABLE),
    params=params_from_model(ReplayRequest),
)
def blue_green_replay() -> None:
    @task
    def check_no_replay_in_flight() -> None:
        tasks.check_no_replay_in_flight(ReplayRun.current())

    @task(multiple_outputs=False)
    def validate_request() -> dict[str, Any]:
        return tasks.validate_request(ReplayRun.current())

    # No retry: a failed setup has already stopped the green it registered, and a replay needs a fresh
    # namespace, so a second attempt would only be refused (green is already registered).
    @task(multiple_outputs=False, retries=0)
    def deploy_green(request: dict[str, Any]) -> dict[str, Any]:
        return tasks.deploy_green(ReplayRun.current(), request)

    @task(multiple_outputs=False)
    def check_quality(request: dict[str, Any]) -> dict[str, Any]:
        return tasks.check_quality(ReplayRun.current(), request)

    @task(multiple_outputs=False)
    def diff_against_blue(request: dict[str, Any]) -> dict[str, Any]:
        return tasks.diff_against_blue(ReplayRun.current(), request)

    @task.branch
    def choose_next_step(request: dict[str, Any]) -> str:
        return tasks.choose_next_step(ReplayRun.current(), request)

    @task(multiple_outputs=False)
    def record_reproduced(request: dict[str, Any], diff: dict[str, Any]) -> dict[str, Any]:
        return tasks.record_reproduced(ReplayRun.current(), request, diff)

    @task(multiple_outputs=False, trigger_rule="none_failed_min_one_success")
    def switch_live(request: dict[str, Any], caught_up: Any, quality: Any, diff: Any) -> dict[str, Any]:
        return tasks.switch_live(ReplayRun.current(), request, caught_up, quality, diff)

    @task(multiple_outputs=False)
    def retire_blue(request: dict[str, Any]) -> dict[str, Any]:
        return tasks.retire_blue(ReplayRun.current(), request)

    @task(multiple_outputs=False)
    def abort_green() -> dict[str, Any]:
        return tasks.abort_green(ReplayRun.current())

    precheck = check_no_replay_in_flight()
    request: Any = validate_request()
    setup = deploy_green(request)
    # At parse time these are XComArgs standing in for the tasks' result dicts.
    # Deferrable: the wait runs in the triggerer, logging offsets behind, rate and ETA on each poll.
    caught_up: Any = WaitForCatchUpOperator(task_id="wait_for_catch_up", request=request).output
    quality: Any = check_quality(request)
    diff: Any = diff_against_blue(request)
    branch = choose_next_step(request)
    # The prompt shows the gates' numbers (diff, totals on both sides, quality, catch-up), sent through the
    # platform_alerts connection; a rejection (or no answer in a day) fails the run.
    request_approval = PromotionApprovalOperator(
        request=request, caught_up=caught_up, quality=quality, diff=diff
    )
    no_approval_required = EmptyOperator(task_id="no_approval_required")
    reproduced = record_reproduced(request, diff)
    switch = switch_live(request, caught_up, quality, diff)
    retire = retire_blue(request)
    teardown = abort_green().as_teardown(setups=setup)  # type: ignore[arg-type]  # XComArg works at runtime
    # A successful teardown must not turn a failed replay into a green run; the task that failed alerts.
    fail_if_any_failed = FailureWatcherOperator(
        task_id="fail_if_any_failed",
        message="a task of the replay failed; green was not promoted (see abort_green's log)",
    )
    # A skipped pre-check skips everything, the teardown included (its setup never ran).
    precheck >> request
    setup >> caught_up >> quality >> diff >> branch >> [request_approval, no_approval_required, reproduced]
    [request_approval, no_approval_required] >> switch >> retire >> teardown
    reproduced >> teardown
    # Not downstream of the setup itself (Airflow wants ALL_SUCCESS there); a failed setup shows up as
    # upstream_failed in the body, which one_failed counts.
    [caught_up, quality, diff, switch, retire, request_approval, reproduced, teardown] >> fail_if_any_failed


blue_green_replay()
