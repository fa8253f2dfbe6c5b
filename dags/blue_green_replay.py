"""
Blue-green replay of the streaming app. It starts three ways: by hand (this form or the REST API), when
a version is published (`publish_app_version` / `make release` emits the `streaming_app_release` asset
event this DAG is scheduled on; version, config and approval come from the registry's release row,
approval required by default) or periodically when `REPLAY_SCHEDULE` (a cron expression, off by
default) is set: the live version is rebuilt from the earliest offsets and, with a zero diff, recorded
`replay_reproduced` and retired, live untouched (`REPLAY_SCHEDULE_ACTION=switch` makes it live instead).
`check_no_replay_in_flight` skips the run, with the reason in its log, while another replay runs or
waits for approval (Airflow's run states and the registry's audit trail).
SETUP `deploy_green` registers and launches a new deployment (colour green, version label, config
overrides over blue's registered config) from the EARLIEST Kafka offsets (or blue's bronze archive,
then Kafka, when retention has deleted history) with a fresh checkpoint, its own tables, consumer
group and revenue topic `<revenue_topic>_<green id>`. BODY:
`wait_for_catch_up` defers to the triggerer, which polls green's lag (offsets behind, rate, ETA in the
log) until it is at most `max_offsets_behind`, bounded by `catch_up_timeout_s`; `check_quality` runs
the Great Expectations revenue checks on green's output; `diff_against_blue` compares per-window count
and revenue over the closed windows both cover (tolerances are per window, absolute); with
`require_approval` a human approves in the UI (HITL); `switch_live` flips the registry's live pointer to
green in one Delta commit (audited: run id and triggering user); `retire_blue` keeps blue for
`grace_period_s`, then stops it. TEARDOWN `abort_green` always runs: if green is not live it is stopped
and the reason recorded in the registry; blue stays live. In `reproduce` mode `record_reproduced`
replaces approval, switch and retirement. `fail_if_any_failed` makes the run fail when any task
failed, even though the teardown succeeded. Every input is validated before anything is
touched. See docs/blue-green.md.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowException, AirflowSkipException

from revenue_platform.assets import app_release_asset
from revenue_platform.bluegreen import ReplayGateFailed
from revenue_platform.bluegreen.request import ReplayRequest
from revenue_platform.connections import KAFKA_CONN_ID, SPARK_CONN_ID
from revenue_platform.dag_defaults import actor_from_context, platform_default_args
from revenue_platform.errors import ConfigError
from revenue_platform.forms import params_from_model
from revenue_platform.kafka_connection import KafkaConnectionConfigError, optional_client_config
from revenue_platform.quality import QualityCheckFailed, QualityInputMissing
from revenue_platform.registry import DeploymentNotFoundError, RegistryConflictError, ReleaseNotFoundError
from revenue_platform.streaming.deploy import DeploymentFailedError

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
    default_args=platform_default_args(
        timedelta(seconds=30),
        non_retryable=(
            ConfigError,
            DeploymentFailedError,
            DeploymentNotFoundError,
            ReleaseNotFoundError,
            RegistryConflictError,
            KafkaConnectionConfigError,
            ReplayGateFailed,
            QualityCheckFailed,
            QualityInputMissing,
        ),
    ),
    params=params_from_model(ReplayRequest),
)
def blue_green_replay() -> None:
    @task
    def check_no_replay_in_flight() -> None:
        from revenue_platform.bluegreen.replay import precheck
        from revenue_platform.registry import DeploymentRegistry
        from revenue_platform.trigger_conf import refuse_unknown_conf

        context = get_current_context()
        refuse_unknown_conf(context)  # first task: a misspelled conf key fails before anything runs
        # The Task SDK's own calls (the execution API): tasks never open the metadata DB themselves.
        ti: Any = context["ti"]
        dag_id = context["dag"].dag_id
        others = ti.get_dr_count(dag_id=dag_id, states=["running"]) - 1  # this run is running too
        awaiting = ti.get_ti_count(dag_id=dag_id, task_ids=["request_approval"], states=["awaiting_input"])
        kind, _ = _trigger()
        reason = precheck(DeploymentRegistry(), kind, others, awaiting)
        if reason:
            print(f"[replay] {reason}")
            raise AirflowSkipException(reason)
        print(f"[replay] {kind} run: no other replay in flight")

    @task(multiple_outputs=False)
    def validate_request() -> dict[str, Any]:
        from revenue_platform.bluegreen.tasks import validate_request
        from revenue_platform.registry import DeploymentRegistry

        context = get_current_context()
        kind, releases = _trigger()
        return validate_request(
            DeploymentRegistry(),
            kind,
            context["params"],
            releases,
            context["dag_run"].run_after,
            os.environ.get("REPLAY_SCHEDULE_ACTION"),
            optional_client_config(KAFKA_CONN_ID),
        )

    # No retry: a failed setup has already stopped the green it registered, and a replay needs a fresh
    # namespace, so a second attempt would only be refused by validation.
    @task(multiple_outputs=False, retries=0)
    def deploy_green(request: dict[str, Any]) -> dict[str, Any]:
        from revenue_platform.bluegreen.tasks import setup_green
        from revenue_platform.registry import DeploymentRegistry
        from revenue_platform.streaming.launcher import spark_target_from_connection

        return setup_green(
            DeploymentRegistry(),
            request,
            spark_target_from_connection(SPARK_CONN_ID),
            _actor(),
            optional_client_config(KAFKA_CONN_ID),
        )

    @task(multiple_outputs=False)
    def check_quality(request: dict[str, Any]) -> dict[str, Any]:
        from revenue_platform.bluegreen.tasks import check_quality
        from revenue_platform.registry import DeploymentRegistry

        return check_quality(DeploymentRegistry(), request, str(get_current_context()["run_id"]), _actor())

    @task(multiple_outputs=False)
    def diff_against_blue(request: dict[str, Any]) -> dict[str, Any]:
        from revenue_platform.bluegreen.tasks import diff_against_blue
        from revenue_platform.registry import DeploymentRegistry

        return diff_against_blue(DeploymentRegistry(), request, _actor())

    @task.branch
    def choose_next_step(request: dict[str, Any]) -> str:
        from revenue_platform.bluegreen.replay import mark_awaiting_approval
        from revenue_platform.bluegreen.triggers import next_step
        from revenue_platform.registry import DeploymentRegistry

        step = next_step(request["mode"], request["require_approval"])
        if step == "request_approval":
            mark_awaiting_approval(DeploymentRegistry(), request["green_deployment_id"], _actor())
        return step

    @task(multiple_outputs=False)
    def record_reproduced(request: dict[str, Any], diff: dict[str, Any]) -> dict[str, Any]:
        from revenue_platform.bluegreen.tasks import confirm_reproduced
        from revenue_platform.registry import DeploymentRegistry

        return confirm_reproduced(DeploymentRegistry(), request, diff, _actor())

    @task(multiple_outputs=False, trigger_rule="none_failed_min_one_success")
    def switch_live(
        request: dict[str, Any], caught_up: dict[str, Any], quality: dict[str, Any], diff: dict[str, Any]
    ) -> dict[str, Any]:
        from revenue_platform.bluegreen.tasks import switch_live
        from revenue_platform.registry import DeploymentRegistry

        if request["mode"] != "promote":
            # Both approval paths were skipped, but the gates' success alone would satisfy the trigger rule.
            raise AirflowSkipException(f"{request['mode']} mode: live is never switched")
        approval = get_current_context()["ti"].xcom_pull(task_ids="request_approval")
        return switch_live(DeploymentRegistry(), request, caught_up, quality, diff, approval, _actor())

    @task(multiple_outputs=False)
    def retire_blue(request: dict[str, Any]) -> dict[str, Any]:
        from revenue_platform.bluegreen.replay import retire_blue
        from revenue_platform.registry import DeploymentRegistry

        return retire_blue(
            DeploymentRegistry(),
            request["blue_deployment_id"],
            request["green_deployment_id"],
            float(request["grace_period_s"]),
            float(request["stop_timeout_s"]),
            _actor(),
        )

    @task(multiple_outputs=False)
    def abort_green() -> dict[str, Any]:
        from revenue_platform.bluegreen.tasks import teardown
        from revenue_platform.registry import DeploymentRegistry

        # The validated request names green (a release or periodic run derives its id); it exists
        # whenever the setup ran, which is the only case in which a teardown runs.
        request = get_current_context()["ti"].xcom_pull(task_ids="validate_request")
        return teardown(DeploymentRegistry(), request, _actor())

    @task(trigger_rule="one_failed", retries=0)
    def fail_if_any_failed() -> None:
        # A successful teardown must not turn a failed replay into a green run.
        raise AirflowException("a task of the replay failed; green was not promoted (see abort_green's log)")

    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.providers.standard.operators.hitl import ApprovalOperator

    from revenue_platform.bluegreen.catch_up import WaitForCatchUpOperator

    precheck = check_no_replay_in_flight()
    request: Any = validate_request()
    setup = deploy_green(request)
    # At parse time these are XComArgs standing in for the tasks' result dicts.
    # Deferrable: the wait runs in the triggerer, logging offsets behind, rate and ETA on each poll.
    caught_up: Any = WaitForCatchUpOperator(task_id="wait_for_catch_up", request=request).output
    quality: Any = check_quality(request)
    diff: Any = diff_against_blue(request)
    branch = choose_next_step(request)
    request_approval = ApprovalOperator(
        task_id="request_approval",
        subject="Promote the blue-green replay?",
        body="Green passed catch-up, quality and diff; see the task logs of this run before approving.",
        # Rejecting must end in the teardown stopping green, and a failed run says so. A human's "Reject"
        # (or the timeout) is an answer, not a glitch: a retry would only park the task and ask again.
        fail_on_reject=True,
        retries=0,
        response_timeout=timedelta(hours=24),
    )
    no_approval_required = EmptyOperator(task_id="no_approval_required")
    reproduced = record_reproduced(request, diff)
    switch = switch_live(request, caught_up, quality, diff)
    retire = retire_blue(request)
    teardown = abort_green().as_teardown(setups=setup)  # type: ignore[arg-type]  # XComArg works at runtime
    # A skipped pre-check skips everything, the teardown included (its setup never ran).
    precheck >> request
    setup >> caught_up >> quality >> diff >> branch >> [request_approval, no_approval_required, reproduced]
    [request_approval, no_approval_required] >> switch >> retire >> teardown
    reproduced >> teardown
    # Not downstream of the setup itself (Airflow wants ALL_SUCCESS there); a failed setup shows up as
    # upstream_failed in the body, which one_failed counts.
    [caught_up, quality, diff, switch, retire, request_approval, reproduced, teardown] >> fail_if_any_failed()


def _trigger() -> tuple[str, list[Any]]:
    """This run's kind (manual / release / periodic) and the release events it consumed."""
    from revenue_platform.bluegreen.triggers import ReleaseEvent, trigger_kind

    context = get_current_context()
    consumed = (context.get("triggering_asset_events") or {}).get(app_release_asset(), [])
    releases = [ReleaseEvent.from_extra(event.extra, event.timestamp) for event in consumed]
    run_type = context["dag_run"].run_type
    return trigger_kind(str(getattr(run_type, "value", run_type)), len(releases)), releases


def _actor() -> str:
    return actor_from_context(get_current_context())


blue_green_replay()
