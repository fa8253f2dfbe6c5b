"""The `blue_green_replay` DAG's steps, one function per task, in the DAG's order.

Each takes the validated request (the `validate_request` XCom, a dict), the registry, the audit
actor and the evidence of earlier tasks, and returns the task's XCom. The DAG file only reads its
context and wires tasks. Body steps run "gated": a failure is recorded in the registry as the gate
that stopped green (`replay_gate_failed`), which the teardown then writes into its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from revenue_platform.bluegreen.logic import approval_given, diff_blockers, promotion_blockers
from revenue_platform.bluegreen.replay import (
    ReplayGateFailed,
    abort_green,
    deploy_green,
    diff_green_against_blue,
    plan_green,
    promote,
    quality_interval,
    record,
    record_reproduced,
    resolve_request,
)
from revenue_platform.bluegreen.request import ReplayRequest
from revenue_platform.bluegreen.triggers import ReleaseEvent
from revenue_platform.kafka_connection import bootstrap_servers
from revenue_platform.registry import DeploymentRegistry
from revenue_platform.streaming.launcher import SparkTarget

# A body step: (registry, actor) -> the task's XCom.
Step = Callable[[DeploymentRegistry, str], dict[str, Any]]


def gated(registry: DeploymentRegistry, green: str, gate: str, actor: str, step: Step) -> dict[str, Any]:
    """Run a body step; on failure record which gate stopped green, then re-raise unchanged."""
    try:
        return step(registry, actor)
    except Exception as error:
        record(registry, green, "replay_gate_failed", actor, f"{gate}: {error}"[:2000])
        raise


def _bootstrap(kafka_client_config: Mapping[str, Any] | None) -> str | None:
    return None if kafka_client_config is None else bootstrap_servers(dict(kafka_client_config))


def validate_request(
    registry: DeploymentRegistry,
    kind: str,
    params: Mapping[str, Any],
    releases: list[ReleaseEvent],
    run_after: datetime,
    schedule_action: str | None,
    kafka_client_config: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The run's request (form, release row or schedule), checked against the registry and Kafka
    before anything is touched; the XCom every later task reads."""
    request = resolve_request(registry, kind, params, releases, run_after, schedule_action)
    deploy_request, blue = plan_green(registry, request, _bootstrap(kafka_client_config), kafka_client_config)
    print(f"[replay] green {request.green_deployment_id} replaces {blue}; overrides {deploy_request}")
    return {**request.to_dict(), "blue_deployment_id": blue}


def setup_green(
    registry: DeploymentRegistry,
    request: Mapping[str, Any],
    target: SparkTarget,
    actor: str,
    kafka_client_config: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """SETUP `deploy_green`; a green it left half-deployed is recorded and stopped before re-raising.

    Airflow runs the teardown only after a successful setup, so the setup cleans up after itself.
    """
    parsed = ReplayRequest.from_params(request)
    try:
        return deploy_green(
            registry, parsed, target, actor, _bootstrap(kafka_client_config), kafka_client_config
        )
    except Exception as error:
        if registry.find(parsed.green_deployment_id) is not None:
            record(registry, parsed.green_deployment_id, "replay_gate_failed", actor, f"deploy: {error}")
            abort_green(registry, parsed.green_deployment_id, parsed.stop_timeout_s, actor)
        raise


def check_quality(
    registry: DeploymentRegistry, request: Mapping[str, Any], run_id: str, actor: str
) -> dict[str, Any]:
    """Gate `quality`: the revenue checks over all of green's closed output."""
    from revenue_platform.quality.runner import run_revenue_checks

    green = request["green_deployment_id"]

    def step(registry: DeploymentRegistry, actor: str) -> dict[str, Any]:
        start, end, config = quality_interval(registry, green)
        config = config.with_overrides(request["quality_thresholds"])
        report = run_revenue_checks(
            green, registry.lake_root, start, end, config, run_name=f"{green}__replay__{run_id}"
        )
        record(registry, green, "replay_quality_passed", actor, "quality checks passed", report.stats)
        return report.to_dict()

    return gated(registry, green, "quality", actor, step)


def diff_against_blue(registry: DeploymentRegistry, request: Mapping[str, Any], actor: str) -> dict[str, Any]:
    """Gate `diff`: green's closed windows against blue's, with the promotion rule's own verdict."""
    green = request["green_deployment_id"]

    def step(registry: DeploymentRegistry, actor: str) -> dict[str, Any]:
        diff = diff_green_against_blue(
            registry, ReplayRequest.from_params(request), request["blue_deployment_id"]
        )
        summary = diff.summary()
        if blockers := diff_blockers(summary):
            sample = f"; sample: {summary['sample'][:3]}" if summary["sample"] else ""
            raise ReplayGateFailed(f"diff: {'; '.join(blockers)}{sample}")
        record(registry, green, "replay_diff_passed", actor, "diff within tolerance", summary)
        return summary

    return gated(registry, green, "diff", actor, step)


def confirm_reproduced(
    registry: DeploymentRegistry, request: Mapping[str, Any], diff: Mapping[str, Any], actor: str
) -> dict[str, Any]:
    """Gate `reproduce` (reproduce mode): record that green recomputed blue's numbers, retire green."""

    def step(registry: DeploymentRegistry, actor: str) -> dict[str, Any]:
        return record_reproduced(
            registry,
            request["green_deployment_id"],
            request["blue_deployment_id"],
            diff,
            float(request["stop_timeout_s"]),
            actor,
        )

    return gated(registry, request["green_deployment_id"], "reproduce", actor, step)


def switch_live(
    registry: DeploymentRegistry,
    request: Mapping[str, Any],
    caught_up: Mapping[str, Any] | None,
    quality: Mapping[str, Any] | None,
    diff: Mapping[str, Any] | None,
    approval: Mapping[str, Any] | None,
    actor: str,
) -> dict[str, Any]:
    """Gate `switch`: re-check every gate's evidence in one place, then point live at green."""
    green, blue = request["green_deployment_id"], request["blue_deployment_id"]
    approved, approved_by = approval_given(approval)

    def step(registry: DeploymentRegistry, actor: str) -> dict[str, Any]:
        blockers = promotion_blockers(
            bool(caught_up), bool((quality or {}).get("success")), diff, request["require_approval"], approved
        )
        if blockers:
            raise ReplayGateFailed(f"switch: not promoting {green}: {'; '.join(blockers)}")
        evidence = {
            "require_approval": request["require_approval"],
            "approved_by": approved_by,
            "diff": diff,
            "caught_up": caught_up,
        }
        return {"previous": promote(registry, green, blue, actor, evidence), "live": green}

    return gated(registry, green, "switch", actor, step)


def teardown(registry: DeploymentRegistry, request: Mapping[str, Any] | None, actor: str) -> dict[str, Any]:
    """TEARDOWN `abort_green`: stop green unless it went live or was retired as a reproduction."""
    if not request:
        print("[replay] no validated request: nothing was deployed, nothing to clean up")
        return {"action": "nothing"}
    return abort_green(registry, request["green_deployment_id"], float(request["stop_timeout_s"]), actor)
