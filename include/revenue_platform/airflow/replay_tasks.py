"""The `blue_green_replay` DAG's tasks: one function per task, named like it, in the DAG's order.

Each takes the run (`ReplayRun`: the registry, the audit actor and the task's Airflow context), the
validated request (the `validate_request` XCom, a dict) and the evidence of earlier tasks, reads
what else the task needs from Airflow (the run's trigger, connections, an XCom) and calls the step
of the same name in `replay`; it returns the task's XCom. The DAG file only wires tasks. Body steps
run "gated": a failure is recorded in the registry as the gate that stopped green
(`replay_gate_failed`), which the teardown then writes into its reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from revenue_platform.airflow.assets import app_release_asset
from revenue_platform.airflow.dag_defaults import actor_from_context
from revenue_platform.bluegreen import replay, triggers, window_diff
from revenue_platform.bluegreen.logic import (
    APPROVERS_OPTION,
    approval_given,
    approved_by_a_requester,
    approver_outside_group,
    diff_blockers,
    parse_approvers,
    promotion_blockers,
)
from revenue_platform.bluegreen.replay import ReplayGateFailed, record
from revenue_platform.bluegreen.request import ReplayRequest
from revenue_platform.bluegreen.triggers import APPROVAL_TASK_ID
from revenue_platform.connections import KAFKA_CONN_ID, SPARK_CONN_ID
from revenue_platform.errors import ConfigError
from revenue_platform.kafka_connection import (
    KafkaConnectionConfigError,
    bootstrap_servers,
    optional_client_config,
)
from revenue_platform.quality import QualityCheckFailed, QualityInputMissing
from revenue_platform.registry import (
    DeploymentNotFoundError,
    DeploymentRegistry,
    RegistryConflictError,
    ReleaseNotFoundError,
)
from revenue_platform.streaming.deploy import DeploymentFailedError

# What a retry cannot fix: a refused request, a missing deployment or release, a failed gate.
NOT_RETRYABLE: Final = (
    ConfigError,
    DeploymentFailedError,
    DeploymentNotFoundError,
    ReleaseNotFoundError,
    RegistryConflictError,
    KafkaConnectionConfigError,
    ReplayGateFailed,
    QualityCheckFailed,
    QualityInputMissing,
)


# The key of `validate_request`'s XCom holding green's plan (`replay.GreenPlan`), planned once there.
GREEN_PLAN: Final = "green_plan"


@dataclass(frozen=True)
class ReplayRun:
    """What a task needs of its run: the registry it works on, who acts (audit) and the context."""

    registry: DeploymentRegistry
    actor: str
    context: Mapping[str, Any] = field(default_factory=dict)
    """The task's Airflow context (run type, asset events, params, XComs); tests pass what they use."""

    @classmethod
    def current(cls) -> ReplayRun:
        """The running task's run."""
        from airflow.sdk import get_current_context

        context = get_current_context()
        return cls(DeploymentRegistry(), actor_from_context(context), context)

    def trigger(self) -> tuple[str, list[triggers.ReleaseEvent]]:
        """This run's kind (manual / release / periodic) and the release events it consumed."""
        consumed = (self.context.get("triggering_asset_events") or {}).get(app_release_asset(), [])
        releases = [triggers.ReleaseEvent.from_extra(event.extra, event.timestamp) for event in consumed]
        run_type = self.context["dag_run"].run_type
        return triggers.trigger_kind(str(getattr(run_type, "value", run_type)), len(releases)), releases

    def xcom(self, task_id: str) -> Any:
        """The result of another task of this run (None if it was skipped)."""
        return self.context["ti"].xcom_pull(task_ids=task_id)

    def requesters(self, request: Mapping[str, Any]) -> list[str]:
        """Who asked for this replay: the user who triggered the run, and for a release run the
        release's publisher. None of them may approve its switch."""
        from revenue_platform.airflow.dag_defaults import user_of_actor

        who = [getattr(self.context.get("dag_run"), "triggering_user_name", None)]
        if request.get("trigger") == triggers.RELEASE and request.get("version"):
            release = self.registry.find_release(str(request["version"]))
            # published_by is the publishing run's audit actor: "airflow:<dag>/<run> (user <name>)".
            who.append(user_of_actor(release.published_by) if release is not None else None)
        return [str(name) for name in who if name]


def configured_approvers() -> tuple[str, ...]:
    """The approver group of this Airflow (`logic.APPROVERS_OPTION`; empty: none configured)."""
    from airflow.configuration import conf

    return parse_approvers(conf.get(*APPROVERS_OPTION, fallback=""))


def gated(run: ReplayRun, green: str, gate: str, step: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a body step; on failure record which gate stopped green, then re-raise unchanged."""
    try:
        return step()
    except Exception as error:
        record(run.registry, green, "replay_gate_failed", run.actor, f"{gate}: {error}"[:2000])
        raise


def _validated(request: Mapping[str, Any]) -> ReplayRequest:
    """The request of `validate_request`'s XCom, read back (Airflow hands tasks JSON); the model
    ignores the keys it does not have (the plan)."""
    return ReplayRequest.from_params(request)


def _bootstrap(kafka_client_config: Mapping[str, Any] | None) -> str | None:
    return None if kafka_client_config is None else bootstrap_servers(dict(kafka_client_config))


def check_no_replay_in_flight(run: ReplayRun) -> None:
    """First task: refuse unknown conf keys; skip the run (every task, the teardown too) while another
    replay runs or waits for approval, with the reason in the log."""
    from airflow.sdk.exceptions import AirflowSkipException

    from revenue_platform.airflow.trigger_conf import refuse_unknown_conf

    refuse_unknown_conf(run.context)  # a misspelled conf key fails before anything runs
    # The Task SDK's own calls (the execution API): tasks never open the metadata DB themselves.
    ti, dag_id = run.context["ti"], run.context["dag"].dag_id
    others = ti.get_dr_count(dag_id=dag_id, states=["running"]) - 1  # this run is running too
    awaiting = ti.get_ti_count(dag_id=dag_id, task_ids=[APPROVAL_TASK_ID], states=["awaiting_input"])
    kind, _ = run.trigger()
    reason = replay.check_no_replay_in_flight(run.registry, kind, others, awaiting)
    if reason:
        print(f"[replay] {reason}")
        raise AirflowSkipException(reason)
    print(f"[replay] {kind} run: no other replay in flight")


def validate_request(run: ReplayRun) -> dict[str, Any]:
    """The run's request (form, release row or schedule), checked against the registry and Kafka
    before anything is touched; the XCom every later task reads."""
    kind, releases = run.trigger()
    request = replay.resolve_request(
        run.registry,
        kind,
        run.context["params"],
        releases,
        run.context["dag_run"].run_after,
        os.environ.get("REPLAY_SCHEDULE_ACTION"),
    )
    kafka = optional_client_config(KAFKA_CONN_ID)
    plan = replay.plan_green(run.registry, request, _bootstrap(kafka), kafka)
    print(f"[replay] green {request.green} replaces {plan.blue}; overrides {plan.deploy_request}")
    return {**request.to_dict(), "blue_deployment_id": plan.blue, GREEN_PLAN: plan.to_dict()}


def deploy_green(run: ReplayRun, request: Mapping[str, Any]) -> dict[str, Any]:
    """SETUP: green as `validate_request` planned it (`replay.deploy_green`, which cleans up a green
    it left half-deployed)."""
    from revenue_platform.streaming.launcher import spark_target_from_connection

    if GREEN_PLAN not in request:
        # A run validated by a version before the plan travelled in this XCom (an upgrade mid-run).
        raise ConfigError(
            "validate_request's result holds no plan of green (it ran under an earlier version of the "
            "platform): start a new blue_green_replay run"
        )
    plan = replay.GreenPlan.from_dict(request[GREEN_PLAN])
    target, kafka = spark_target_from_connection(SPARK_CONN_ID), optional_client_config(KAFKA_CONN_ID)
    return replay.deploy_green(run.registry, plan, target, run.actor, kafka)


def check_quality(run: ReplayRun, request: Mapping[str, Any]) -> dict[str, Any]:
    """Gate `quality`: the revenue checks over all of green's closed output."""
    from revenue_platform.quality.runner import run_revenue_checks

    green, run_id = request["green_deployment_id"], str(run.context["run_id"])

    def step() -> dict[str, Any]:
        start, end, config = replay.quality_interval(run.registry, green)
        config = config.with_overrides(request["quality_thresholds"])
        report = run_revenue_checks(
            green, run.registry.lake_root, start, end, config, run_name=f"{green}__replay__{run_id}"
        )
        record(run.registry, green, "replay_quality_passed", run.actor, "quality checks passed", report.stats)
        return report.to_dict()

    return gated(run, green, "quality", step)


def diff_against_blue(run: ReplayRun, request: Mapping[str, Any]) -> dict[str, Any]:
    """Gate `diff`: green's final windows against blue's, with the promotion rule's own verdict."""
    green = request["green_deployment_id"]

    def step() -> dict[str, Any]:
        summary = window_diff.diff_against_blue(
            run.registry, _validated(request), request["blue_deployment_id"]
        ).summary()
        if blockers := diff_blockers(summary):
            sample = f"; sample: {summary['sample'][:3]}" if summary["sample"] else ""
            raise ReplayGateFailed(f"diff: {'; '.join(blockers)}{sample}")
        record(run.registry, green, "replay_diff_passed", run.actor, "diff within tolerance", summary)
        return summary

    return gated(run, green, "diff", step)


def choose_next_step(run: ReplayRun, request: Mapping[str, Any]) -> str:
    """The branch after the gates (a task id); a request for approval is audited first, so other
    replays are skipped until a human decides."""
    step = triggers.choose_next_step(request["mode"], request["require_approval"])
    if step == APPROVAL_TASK_ID:
        replay.mark_awaiting_approval(run.registry, request["green_deployment_id"], run.actor)
    return step


def record_reproduced(run: ReplayRun, request: Mapping[str, Any], diff: Mapping[str, Any]) -> dict[str, Any]:
    """Gate `reproduce` (reproduce mode): record that green recomputed blue's numbers, retire green."""
    green = request["green_deployment_id"]

    def step() -> dict[str, Any]:
        blue, stop_timeout_s = request["blue_deployment_id"], float(request["stop_timeout_s"])
        return replay.record_reproduced(run.registry, green, blue, diff, stop_timeout_s, run.actor)

    return gated(run, green, "reproduce", step)


def switch_live(
    run: ReplayRun,
    request: Mapping[str, Any],
    caught_up: Mapping[str, Any] | None,
    quality: Mapping[str, Any] | None,
    diff: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Gate `switch`: re-check every gate's evidence and the approval in one place, then point live
    at green. Skipped in reproduce mode."""
    from airflow.sdk.exceptions import AirflowSkipException

    if request["mode"] != triggers.PROMOTE:
        # Both approval paths were skipped, but the gates' success alone would satisfy the trigger rule.
        raise AirflowSkipException(f"{request['mode']} mode: live is never switched")
    green, blue = request["green_deployment_id"], request["blue_deployment_id"]
    approved, approved_by = approval_given(run.xcom(APPROVAL_TASK_ID))

    def step() -> dict[str, Any]:
        blockers = promotion_blockers(
            bool(caught_up),
            bool((quality or {}).get("success")),
            diff,
            request["require_approval"],
            approved,
            approved_by_a_requester(approved_by, run.requesters(request)),
            approver_outside_group(approved_by, configured_approvers()),
        )
        if blockers:
            raise ReplayGateFailed(f"switch: not promoting {green}: {'; '.join(blockers)}")
        evidence = {
            "require_approval": request["require_approval"],
            "approved_by": approved_by,
            "diff": diff,
            "caught_up": caught_up,
        }
        return {"previous": replay.switch_live(run.registry, green, blue, run.actor, evidence), "live": green}

    return gated(run, green, "switch", step)


def retire_blue(run: ReplayRun, request: Mapping[str, Any]) -> dict[str, Any]:
    """Keep blue for the grace period (readers move over), then stop it unless it went live again."""
    return replay.retire_blue(
        run.registry,
        request["blue_deployment_id"],
        request["green_deployment_id"],
        float(request["grace_period_s"]),
        float(request["stop_timeout_s"]),
        run.actor,
    )


def abort_green(run: ReplayRun) -> dict[str, Any]:
    """TEARDOWN: stop green unless it went live or was retired as a reproduction."""
    # The validated request names green (a release or periodic run derives its id); it exists
    # whenever the setup ran, which is the only case in which a teardown runs.
    request = run.xcom("validate_request")
    if not request:
        print("[replay] no validated request: nothing was deployed, nothing to clean up")
        return {"action": "nothing"}
    return replay.abort_green(
        run.registry, request["green_deployment_id"], float(request["stop_timeout_s"]), run.actor
    )
