"""
Blue-green replay of the streaming app. SETUP `deploy_green` registers and launches a new deployment
(colour green, version label, config overrides over blue's registered config) from the EARLIEST Kafka
offsets (or blue's bronze archive, then Kafka, when retention has deleted history) with a fresh
checkpoint, its own tables, consumer group and revenue topic `<revenue_topic>_<green id>`. BODY:
`wait_for_catch_up` defers to the triggerer, which polls green's lag (offsets behind, rate, ETA in the
log) until it is at most `max_offsets_behind`, bounded by `catch_up_timeout_s`; `check_quality` runs
the Great Expectations revenue checks on green's output; `diff_against_blue` compares per-window count
and revenue over the closed windows both cover (tolerances are per window, absolute); with
`require_approval` a human approves in the UI (HITL); `switch_live` flips the registry's live pointer to
green in one Delta commit (audited: run id and triggering user); `retire_blue` keeps blue for
`grace_period_s`, then stops it. TEARDOWN `abort_green` always runs: if green is not live it is stopped
and the reason recorded in the registry; blue stays live. `fail_if_any_failed` makes the run fail when
any task failed, even though the teardown succeeded. Every input is validated before anything is
touched. See docs/blue-green.md.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowException

from revenue_platform.bluegreen import ReplayGateFailed
from revenue_platform.dag_defaults import actor_from_context, platform_default_args
from revenue_platform.errors import ConfigError
from revenue_platform.kafka_connection import KafkaConnectionConfigError
from revenue_platform.quality import QualityCheckFailed, QualityInputMissing
from revenue_platform.registry import DeploymentNotFoundError, RegistryConflictError
from revenue_platform.streaming.deploy import DeploymentFailedError

SPARK_CONN_ID = "spark_default"
KAFKA_CONN_ID = "kafka_default"


@dag(
    schedule=None,
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
            RegistryConflictError,
            KafkaConnectionConfigError,
            ReplayGateFailed,
            QualityCheckFailed,
            QualityInputMissing,
        ),
    ),
    params={
        "green_deployment_id": Param(
            "green", type="string", pattern="^[a-z][a-z0-9_-]{0,62}$", description="A NEW deployment id."
        ),
        "blue_deployment_id": Param(
            None, type=["null", "string"], description="Deployment to replace; empty = the live one."
        ),
        "version": Param("dev", type="string", description="Version label of green."),
        "config_overrides": Param(
            {}, type="object", description="Dotted config field -> value applied over blue's config."
        ),
        "replay_source": Param(
            "kafka_earliest",
            type="string",
            enum=["kafka_earliest", "bronze"],
            description=(
                "kafka_earliest: green reads the orders topic from its first offset. bronze: green reads "
                "blue's bronze archive, then Kafka from the first offset bronze lacks (use when Kafka's "
                "retention has deleted history). Validation refuses a source that would lose records."
            ),
        ),
        "max_offsets_behind": Param(
            0, type="integer", minimum=0, description="Lag that counts as caught up."
        ),
        "catch_up_timeout_s": Param(
            900, type="number", minimum=0, description="Bound on waiting to catch up."
        ),
        "poll_interval_s": Param(
            5, type="number", minimum=0.1, description="Seconds between two looks at green's lag."
        ),
        "revenue_tolerance": Param(
            "0.00", type="string", description="Allowed absolute revenue difference per closed window."
        ),
        "count_tolerance": Param(0, type="integer", minimum=0, description="Allowed order-count difference."),
        "quality_thresholds": Param(
            {}, type="object", description='Quality threshold overrides, e.g. {"revenue_ceiling": "5000.00"}.'
        ),
        "require_approval": Param(False, type="boolean", description="Ask a human before switching live."),
        "grace_period_s": Param(300, type="number", minimum=0, description="Blue keeps running this long."),
        "start_timeout_s": Param(
            180, type="number", minimum=10, description="Bound on waiting for green's first heartbeat."
        ),
        "stop_timeout_s": Param(
            60,
            type="number",
            minimum=1,
            description="Bound on a driver's stop (blue after the switch, green on abort).",
        ),
    },
)
def blue_green_replay() -> None:
    @task(multiple_outputs=False)
    def validate_request() -> dict[str, Any]:
        from revenue_platform.bluegreen import ReplayRequest
        from revenue_platform.bluegreen.replay import plan_green
        from revenue_platform.registry import DeploymentRegistry
        from revenue_platform.trigger_conf import refuse_unknown_conf

        refuse_unknown_conf(get_current_context())
        request = ReplayRequest.from_params(get_current_context()["params"])
        deploy_request, blue = plan_green(
            DeploymentRegistry(), request, _kafka_bootstrap(), _kafka_client_config()
        )
        print(f"[replay] green {request.green_deployment_id} replaces {blue}; overrides {deploy_request}")
        return {**request.to_dict(), "blue_deployment_id": blue}

    # No retry: a failed setup has already stopped the green it registered, and a replay needs a fresh
    # namespace, so a second attempt would only be refused by validation.
    @task(multiple_outputs=False, retries=0)
    def deploy_green(request: dict[str, Any]) -> dict[str, Any]:
        from revenue_platform.bluegreen import ReplayRequest
        from revenue_platform.bluegreen.replay import abort_green, deploy_green, record
        from revenue_platform.registry import DeploymentRegistry
        from revenue_platform.streaming.launcher import spark_target_from_connection

        parsed = ReplayRequest.from_params(request)
        registry, actor = DeploymentRegistry(), _actor()
        client_config = _kafka_client_config()
        try:
            return deploy_green(
                registry,
                parsed,
                spark_target_from_connection(SPARK_CONN_ID),
                actor,
                _kafka_bootstrap(),
                client_config,
            )
        except Exception as error:
            # Any failure (re-raised unchanged): the teardown only runs after a successful setup, so a
            # half-deployed green is cleaned up here.
            if registry.find(parsed.green_deployment_id) is not None:
                record(registry, parsed.green_deployment_id, "replay_gate_failed", actor, f"deploy: {error}")
                abort_green(registry, parsed.green_deployment_id, parsed.stop_timeout_s, actor)
            raise

    @task(multiple_outputs=False)
    def check_quality(request: dict[str, Any]) -> dict[str, Any]:
        from revenue_platform.bluegreen.replay import quality_interval, record
        from revenue_platform.quality.runner import run_revenue_checks

        def run(registry: Any, actor: str) -> dict[str, Any]:
            green = request["green_deployment_id"]
            start, end, config = quality_interval(registry, green)
            config = config.with_overrides(request["quality_thresholds"])
            report = run_revenue_checks(
                green, registry.lake_root, start, end, config, run_name=f"{green}__replay__{_run_id()}"
            )
            record(registry, green, "replay_quality_passed", actor, "quality checks passed", report.stats)
            return report.to_dict()

        return _gated(request, "quality", run)

    @task(multiple_outputs=False)
    def diff_against_blue(request: dict[str, Any]) -> dict[str, Any]:
        from revenue_platform.bluegreen.replay import diff_green_against_blue, record

        def run(registry: Any, actor: str) -> dict[str, Any]:
            green = request["green_deployment_id"]
            from revenue_platform.bluegreen import ReplayRequest

            diff = diff_green_against_blue(
                registry, ReplayRequest.from_params(request), request["blue_deployment_id"]
            )
            summary = diff.summary()
            if diff.windows_compared == 0:
                raise ReplayGateFailed("diff: no closed window covered by both blue and green to compare")
            if not diff.passed:
                raise ReplayGateFailed(
                    f"diff: {len(diff.mismatches)} of {diff.windows_compared} closed windows differ beyond "
                    f"tolerance; sample: {summary['sample'][:3]}"
                )
            record(registry, green, "replay_diff_passed", actor, "diff within tolerance", summary)
            return summary

        return _gated(request, "diff", run)

    @task.branch
    def approval_needed(request: dict[str, Any]) -> str:
        return "request_approval" if request["require_approval"] else "no_approval_required"

    @task(multiple_outputs=False, trigger_rule="none_failed_min_one_success")
    def switch_live(
        request: dict[str, Any], caught_up: dict[str, Any], quality: dict[str, Any], diff: dict[str, Any]
    ) -> dict[str, Any]:
        from revenue_platform.bluegreen import ReplayGateFailed, promotion_blockers
        from revenue_platform.bluegreen.replay import promote

        green, blue = request["green_deployment_id"], request["blue_deployment_id"]
        approval = get_current_context()["ti"].xcom_pull(task_ids="request_approval")
        approved = bool(approval) and approval.get("chosen_options") == ["Approve"]

        def run(registry: Any, actor: str) -> dict[str, Any]:
            # Re-check the evidence in one place before the one irreversible-looking step.
            blockers = promotion_blockers(
                bool(caught_up), bool(quality.get("success")), diff, request["require_approval"], approved
            )
            if blockers:
                raise ReplayGateFailed(f"switch: not promoting {green}: {'; '.join(blockers)}")
            evidence = {
                "require_approval": request["require_approval"],
                "approved_by": (approval or {}).get("responded_by_user"),
                "diff": diff,
                "caught_up": caught_up,
            }
            return {"previous": promote(registry, green, blue, actor, evidence), "live": green}

        return _gated(request, "switch", run)

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
        from revenue_platform.bluegreen.replay import abort_green
        from revenue_platform.registry import DeploymentRegistry

        # Read the raw params: the validated request may not exist if validation itself failed.
        params = get_current_context()["params"]
        return abort_green(
            DeploymentRegistry(), params["green_deployment_id"], float(params["stop_timeout_s"]), _actor()
        )

    @task(trigger_rule="one_failed", retries=0)
    def fail_if_any_failed() -> None:
        # A successful teardown must not turn a failed replay into a green run.
        raise AirflowException("a task of the replay failed; green was not promoted (see abort_green's log)")

    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.providers.standard.operators.hitl import ApprovalOperator

    from revenue_platform.bluegreen.catch_up import WaitForCatchUpOperator

    request: Any = validate_request()
    setup = deploy_green(request)
    # At parse time these are XComArgs standing in for the tasks' result dicts.
    # Deferrable: the wait runs in the triggerer, logging offsets behind, rate and ETA on each poll.
    caught_up: Any = WaitForCatchUpOperator(task_id="wait_for_catch_up", request=request).output
    quality: Any = check_quality(request)
    diff: Any = diff_against_blue(request)
    branch = approval_needed(request)
    request_approval = ApprovalOperator(
        task_id="request_approval",
        subject="Promote the blue-green replay?",
        body="Green passed catch-up, quality and diff; see the task logs of this run before approving.",
        # Rejecting must end in the teardown stopping green, and a failed run says so.
        fail_on_reject=True,
        response_timeout=timedelta(hours=24),
    )
    no_approval_required = EmptyOperator(task_id="no_approval_required")
    switch = switch_live(request, caught_up, quality, diff)
    retire = retire_blue(request)
    teardown = abort_green().as_teardown(setups=setup)  # type: ignore[arg-type]  # XComArg works at runtime
    setup >> caught_up >> quality >> diff >> branch >> [request_approval, no_approval_required]
    [request_approval, no_approval_required] >> switch >> retire >> teardown
    # Not downstream of the setup itself (Airflow wants ALL_SUCCESS there); a failed setup shows up as
    # upstream_failed in the body, which one_failed counts.
    [caught_up, quality, diff, switch, retire, request_approval, teardown] >> fail_if_any_failed()


def _run_id() -> str:
    return str(get_current_context()["run_id"])


def _actor() -> str:
    return actor_from_context(get_current_context())


def _gated(request: dict[str, Any], gate: str, step: Any) -> dict[str, Any]:
    """Run a body step; on failure record in the registry which gate stopped green, then fail the task."""
    from revenue_platform.bluegreen.replay import record
    from revenue_platform.registry import DeploymentRegistry

    registry, actor = DeploymentRegistry(), _actor()
    try:
        result: dict[str, Any] = step(registry, actor)
    except Exception as error:
        record(
            registry, request["green_deployment_id"], "replay_gate_failed", actor, f"{gate}: {error}"[:2000]
        )
        raise
    return result


def _kafka_client_config() -> dict[str, Any] | None:
    """Client settings of the kafka_default connection (None without one)."""
    from revenue_platform.kafka_connection import client_config_from_airflow

    try:
        return client_config_from_airflow(KAFKA_CONN_ID)
    except KafkaConnectionConfigError:
        return None


def _kafka_bootstrap() -> str | None:
    """Bootstrap servers of the kafka_default connection (None without one: the config file's default)."""
    from revenue_platform.kafka_connection import bootstrap_servers, client_config_from_airflow

    try:
        return bootstrap_servers(client_config_from_airflow(KAFKA_CONN_ID))
    except KafkaConnectionConfigError:
        return None


blue_green_replay()
