"""The steps of a blue-green replay and of a rollback, named like the tasks that run them
(`airflow/replay_tasks.py` for blue_green_replay; rollback_live_deployment calls `rollback`).

A run first checks that no other replay is in flight, then resolves what it stands for (by hand,
release or periodic: see `triggers`), and after the gates either promotes green or, when it only
reproduces live, records `replay_reproduced` and retires green with live untouched.

Green is deployed through the same deploy machinery as any deployment (registry, lease,
detached driver), from EARLIEST offsets with a fresh checkpoint, its own tables, consumer
group and revenue topic (all named by spark_apps/contract/naming.py). Each step writes what it
decided to the registry's audit log (`replay_*` events, actor = DAG run and triggering
user), so the trail answers who promoted what, when and on which evidence. The live pointer
only ever moves through `DeploymentRegistry.switch_live` (one Delta commit).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from revenue_platform.bluegreen.logic import (
    OffsetBounds,
    green_overrides,
    plan_replay_history,
    previous_live,
)
from revenue_platform.bluegreen.request import ReplayRequest
from revenue_platform.bluegreen.triggers import (
    AWAITING_APPROVAL,
    MANUAL,
    PERIODIC,
    RELEASE,
    ReleaseEvent,
    chosen_release,
    effective_params,
    overlap_skip_reason,
    replays_in_flight,
)
from revenue_platform.bluegreen.window_diff import gold_rows
from revenue_platform.errors import ConfigError, PlatformError
from revenue_platform.kafka_connection import bootstrap_servers, client_security
from revenue_platform.lake_storage import open_lake_table
from revenue_platform.registry import DeploymentRegistry, RegistryEvent
from revenue_platform.streaming.deploy import deploy, resolve_config
from revenue_platform.streaming.launcher import SparkTarget
from revenue_platform.streaming.request import DeployRequest
from revenue_platform.streaming.stop import stop_deployment
from spark_apps.contract.delta_reads import read_delta
from spark_apps.contract.kafka_config import KafkaConfig
from spark_apps.contract.naming import DeploymentNames

LOG = logging.getLogger(__name__)

# Used where blue's stored config lacks a field (a record written before the field existed).
_KAFKA_DEFAULTS = KafkaConfig()


class ReplayGateFailed(PlatformError):
    """Green did not pass a gate (catch-up, quality, diff): it must not go live."""


def check_no_replay_in_flight(
    registry: DeploymentRegistry, kind: str, other_runs_active: int, other_runs_awaiting_approval: int
) -> str | None:
    """Why this run must not start a replay (None: go ahead): another replay in flight, or nothing to do.

    Airflow's counts (other running runs of the DAG, runs parked at request_approval) cover replays
    of this Airflow; the registry covers a replay another Airflow on the same lake runs, or one whose
    run died before its teardown.
    """
    running = [r.deployment_id for r in registry.deployments() if r.desired_state == "running"]
    reason = overlap_skip_reason(
        other_runs_active, other_runs_awaiting_approval, replays_in_flight(registry.events(), running)
    )
    if reason is None and kind == PERIODIC and registry.live_deployment() is None:
        reason = "skipped: a periodic run reproduces the live deployment, and no deployment is live yet"
    return reason


def resolve_request(
    registry: DeploymentRegistry,
    kind: str,
    params: Mapping[str, Any],
    release_events: list[ReleaseEvent],
    when: Any,
    periodic_action: str | None,
    progress: Callable[[str], None] = print,
) -> ReplayRequest:
    """The validated request this run stands for: its form (manual) or derived from the run.

    A release run replays the newest release it consumed, with the version and config of the registry
    row that release wrote (the event only names it; a hash mismatch means the event was not written
    by publish_app_version for that row, and is refused).
    """
    if kind == RELEASE:
        newest, superseded = chosen_release(release_events)
        for older in superseded:
            progress(
                f"[replay] release {older.version} ({older.at.isoformat()}) is superseded by {newest.version}"
            )
        release = registry.get_release(newest.version)
        if newest.config_hash is not None and newest.config_hash != release.config_hash:
            raise ConfigError(
                f"the release event for {newest.version} carries config hash {newest.config_hash}, but "
                f"the registry's release has {release.config_hash}: publish releases with "
                "publish_app_version only"
            )
        derived = effective_params(
            kind,
            params,
            when,
            release={
                "version": release.version,
                "config_overrides": release.config_overrides,
                "require_approval": release.require_approval,
            },
        )
    elif kind == PERIODIC:
        live = registry.live_deployment()
        version = registry.get(live).app_version if live else None
        derived = effective_params(kind, params, when, live_version=version, periodic_action=periodic_action)
    elif kind == MANUAL:
        derived = effective_params(kind, params, when)
    else:
        raise ConfigError(f"unknown trigger kind {kind!r}")
    request = ReplayRequest.from_params(derived)
    progress(
        f"[replay] {request.trigger} run: {request.mode} {request.green} (version "
        f"{request.version}, overrides {dict(request.config_overrides)}, approval "
        f"{'required' if request.require_approval else 'not required'})"
    )
    return request


def resolve_blue(registry: DeploymentRegistry, request: ReplayRequest) -> str:
    """The deployment green is compared with and replaces: the form's, else the live one."""
    blue = request.blue_deployment_id or registry.live_deployment()
    if blue is None:
        raise ConfigError(
            "no live deployment to replace: set blue_deployment_id, or make one live first "
            "(DeploymentRegistry.switch_live)"
        )
    registry.get(blue)
    return blue


def bronze_offset_bounds(table_path: str, topic: str) -> OffsetBounds:
    """(first, last) offset per partition of `topic` in a bronze archive; {} if there is none yet."""
    bronze = open_lake_table(table_path)
    if bronze is None:
        return {}
    offsets = read_delta(bronze, ["partition", "offset"], [("topic", "=", topic)])
    grouped = offsets.group_by("partition").aggregate([("offset", "min"), ("offset", "max")])
    return {row["partition"]: (row["offset_min"], row["offset_max"]) for row in grouped.to_pylist()}


@dataclass(frozen=True)
class GreenPlan:
    """What `plan_green` decided before anything was touched, all the setup needs: green's deploy
    request, the deployment green replaces, and what the replay's audit records of the request."""

    deploy_request: DeployRequest
    blue: str
    replay_source: str
    requested_overrides: Mapping[str, Any]
    stop_timeout_s: float

    @property
    def green(self) -> str:
        return self.deploy_request.deployment_id

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (the `validate_request` XCom carries it to the setup)."""
        return {
            "deploy_request": self.deploy_request.to_dict(),
            "blue": self.blue,
            "replay_source": self.replay_source,
            "requested_overrides": dict(self.requested_overrides),
            "stop_timeout_s": self.stop_timeout_s,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GreenPlan:
        return cls(
            DeployRequest(**data["deploy_request"]),
            str(data["blue"]),
            str(data["replay_source"]),
            dict(data["requested_overrides"]),
            float(data["stop_timeout_s"]),
        )


def plan_green(
    registry: DeploymentRegistry,
    request: ReplayRequest,
    kafka_bootstrap: str | None,
    kafka_client_config: Mapping[str, Any] | None = None,
) -> GreenPlan:
    """Validate everything before anything is touched; return green's deploy request and blue's id.

    With a Kafka client config, the history green will read is proven complete first (see
    `plan_replay_history`); without one (no kafka_default connection) only the config is checked.
    """
    blue = resolve_blue(registry, request)
    if registry.find(request.green) is not None:
        # A replay needs a fresh checkpoint and empty outputs; reusing an id would resume or mix them.
        raise ConfigError(
            f"green_deployment_id {request.green!r} is already registered: a replay needs a "
            "fresh namespace, pick a new id (e.g. green-<version>)"
        )
    blue_record = registry.get(blue)
    try:
        green_names = DeploymentNames(registry.lake_root, request.green)
    except ValueError as error:
        raise ConfigError(str(error)) from error
    green_topics = {
        f"kafka.{name}": green_names.own_topic(topic)
        for name, topic in blue_record.app_config().output_topics().items()
    }
    overrides = green_overrides(blue_record.config, request.config_overrides, green_topics)
    if kafka_client_config is not None or request.replay_source == "bronze":
        history = _plan_history(registry, request, blue, kafka_bootstrap, kafka_client_config)
        if history is not None:
            overrides["history"] = history
    deploy_request = DeployRequest(
        deployment_id=request.green,
        colour="green",
        app_version=request.version,
        config_overrides=overrides,
        starting_offsets="earliest",
        start_timeout_s=request.start_timeout_s,
    )
    resolve_config(deploy_request, registry.lake_root, kafka_bootstrap, registry)
    return GreenPlan(
        deploy_request, blue, request.replay_source, dict(request.config_overrides), request.stop_timeout_s
    )


def _plan_history(
    registry: DeploymentRegistry,
    request: ReplayRequest,
    blue: str,
    kafka_bootstrap: str | None,
    kafka_client_config: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """Green's `history` config (None: Kafka from earliest), after checking nothing would be lost."""
    from spark_apps.storage.kafka_ranges import partition_watermarks

    blue_config = registry.get(blue).config
    kafka = blue_config.get("kafka", {})
    orders_topic = str(kafka.get("orders_topic", _KAFKA_DEFAULTS.orders_topic))
    client = dict(kafka_client_config or {})
    client.setdefault("bootstrap.servers", kafka_bootstrap or str(kafka.get("bootstrap_servers")))
    bronze_table = DeploymentNames(
        str(blue_config.get("lake_root", registry.lake_root)), blue
    ).bronze_orders_table
    try:
        watermarks = partition_watermarks(client, orders_topic)
    except Exception as error:  # unreachable broker, missing topic: say which and stop here
        raise ConfigError(
            f"replay_source: cannot read {orders_topic!r} offsets from Kafka: {error}"
        ) from error
    return plan_replay_history(
        request.replay_source, bronze_offset_bounds(bronze_table, orders_topic), watermarks, bronze_table
    )


def record(
    registry: DeploymentRegistry,
    deployment_id: str,
    kind: str,
    actor: str,
    reason: str,
    details: Mapping[str, Any] | None = None,
    to_value: str | None = None,
) -> None:
    registry.append_events(
        [RegistryEvent(deployment_id, kind, actor, None, to_value, reason, dict(details or {}))]
    )


def deploy_green(
    registry: DeploymentRegistry,
    plan: GreenPlan,
    target: SparkTarget,
    actor: str,
    kafka_client_config: Mapping[str, Any] | None,
    progress: Callable[[str], None] = print,
) -> dict[str, Any]:
    """SETUP: create green's own output topics, register and launch green from earliest offsets, as
    `plan_green` planned it before anything was touched (not planned again: the plan is what was
    checked). A green already registered is refused, as planning refuses it: a replay needs a fresh
    namespace, and a second attempt (a cleared task) must not restart the green an earlier one
    stopped on a plan that may have gone stale.

    A green it left half-deployed is recorded and stopped before the error is re-raised: Airflow
    runs the teardown only after a successful setup, so the setup cleans up after itself."""
    if registry.find(plan.green) is not None:
        # Before the cleanup below: what this run did not register, it never stops.
        raise ConfigError(
            f"green_deployment_id {plan.green!r} is already registered (an earlier attempt of this setup "
            "registered it): a replay needs a fresh namespace, start a new blue_green_replay run"
        )
    try:
        return _deploy_planned_green(registry, plan, target, actor, kafka_client_config, progress)
    except Exception as error:
        if registry.find(plan.green) is not None:
            record(registry, plan.green, "replay_gate_failed", actor, f"deploy: {error}")
            abort_green(registry, plan.green, plan.stop_timeout_s, actor, progress)
        raise


def _deploy_planned_green(
    registry: DeploymentRegistry,
    plan: GreenPlan,
    target: SparkTarget,
    actor: str,
    kafka_client_config: Mapping[str, Any] | None,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    deploy_request = plan.deploy_request
    kafka_bootstrap = None if kafka_client_config is None else bootstrap_servers(dict(kafka_client_config))
    topic = str(deploy_request.config_overrides["kafka.revenue_topic"])
    history = deploy_request.config_overrides.get("history")
    # Green's driver authenticates like blue's: with the connection's security settings. The deploy
    # creates green's own output topics (DLQ, split topics, compacted revenue topic) when Kafka is known.
    security = client_security(dict(kafka_client_config)) if kafka_client_config is not None else None
    outcome = deploy(
        deploy_request,
        target,
        registry,
        actor,
        kafka_bootstrap,
        progress,
        kafka_client_config,
        kafka_security=security,
    )
    record(
        registry,
        plan.green,
        "replay_started",
        actor,
        f"blue-green replay of {plan.blue} from "
        + (f"bronze {history['bronze_table']}, then Kafka" if history else "earliest Kafka offsets"),
        {
            "blue": plan.blue,
            "replay_source": plan.replay_source,
            "history": history,
            "version": deploy_request.app_version,
            "overrides": dict(plan.requested_overrides),
            "topic": topic,
        },
        to_value=deploy_request.app_version,
    )
    return {**outcome, "blue": plan.blue, "revenue_topic": topic}


def quality_interval(registry: DeploymentRegistry, green: str) -> tuple[Any, Any, Any]:
    """Quality-check interval: all of green's output, closed by the watermark after its last window."""
    from revenue_platform.quality.config import QualityConfig

    record = registry.get(green)
    rows = gold_rows(record.gold_table)
    if not rows:
        raise ReplayGateFailed(f"green {green!r} has no gold output to check")
    # Window geometry and dedupe horizon as green registered them.
    quality = QualityConfig.from_app_config(record.app_config())
    start = min(r["window_start"] for r in rows)
    end = max(r["window_end"] for r in rows) + timedelta(seconds=quality.watermark_seconds)
    return start, end, quality


def switch_live(
    registry: DeploymentRegistry, green: str, blue: str, actor: str, evidence: Mapping[str, Any]
) -> str | None:
    """Atomically point live at green (one Delta commit), unless live moved meanwhile, and audit why."""
    if registry.live_deployment() not in (blue, None):
        raise ReplayGateFailed(
            f"live moved to {registry.live_deployment()!r} during the replay (expected {blue!r}); "
            "not switching"
        )
    previous = registry.switch_live(green, actor, f"blue-green replay passed every gate (was {blue})")
    record(registry, green, "replay_promoted", actor, "promoted", {"previous": previous, **evidence}, green)
    return previous


def retire_blue(
    registry: DeploymentRegistry,
    blue: str,
    green: str,
    grace_period_s: float,
    stop_timeout_s: float,
    actor: str,
    progress: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Keep blue running for the grace period (readers move over), then stop it unless it went live again."""
    if grace_period_s > 0:
        progress(f"[replay] keeping {blue} running for {grace_period_s:.0f}s before retiring it")
        time.sleep(grace_period_s)
    if registry.live_deployment() == blue:
        progress(f"[replay] {blue} is live again (rolled back during the grace period): not stopping it")
        return {"deployment_id": blue, "how": "kept: live again"}
    return stop_deployment(
        registry, blue, stop_timeout_s, actor, f"retired after promotion of {green}", progress
    )


def mark_awaiting_approval(registry: DeploymentRegistry, green: str, actor: str) -> None:
    """Audit that green waits for a human: other replays are skipped until it is decided."""
    record(
        registry, green, AWAITING_APPROVAL, actor, "passed every gate; waiting for approval to switch live"
    )


def record_reproduced(
    registry: DeploymentRegistry,
    green: str,
    blue: str,
    diff: Mapping[str, Any],
    stop_timeout_s: float,
    actor: str,
    progress: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Reproduce mode: green recomputed blue's final windows; retire green, leave the live pointer alone."""
    # The diff task already failed the run otherwise; re-check the evidence before recording it.
    if missing := [name for name in ("passed", "windows_compared") if not diff.get(name)]:
        raise ReplayGateFailed(f"reproduce: the diff evidence lacks {missing}; not recording a reproduction")
    live = registry.live_deployment()
    if live == green:
        raise ReplayGateFailed(f"reproduce: {green} is live, a reproduction never switches live")
    stopped = stop_deployment(
        registry,
        green,
        stop_timeout_s,
        actor,
        f"retired: reproduced {blue}'s numbers from the earliest offsets",
    )
    details = {"blue": blue, "live": live, "diff": dict(diff), "stop": stopped}
    record(
        registry,
        green,
        "replay_reproduced",
        actor,
        f"reproduced {blue}: {diff['windows_compared']} final windows, zero diff beyond tolerance; "
        "replica retired, live untouched",
        details,
    )
    progress(
        f"[replay] {green} reproduced {blue} over {diff['windows_compared']} windows; retired, live is {live}"
    )
    return {"reproduced": blue, "live": live, "retired": green, "stop": stopped}


def abort_green(
    registry: DeploymentRegistry,
    green: str,
    stop_timeout_s: float,
    actor: str,
    progress: Callable[[str], None] = print,
) -> dict[str, Any]:
    """TEARDOWN: unless green went live or was retired as a reproduction, stop it and record why."""
    if registry.find(green) is None:
        progress(f"[replay] {green} was never registered: nothing to clean up")
        return {"action": "nothing"}
    if registry.live_deployment() == green:
        progress(f"[replay] {green} is live: nothing to clean up")
        return {"action": "kept_live"}
    if any(e.kind == "replay_reproduced" and e.actor == actor for e in registry.events(green)):
        progress(f"[replay] {green} reproduced live and was retired: nothing to clean up")
        return {"action": "retired_reproduced"}
    failures = [e for e in registry.events(green) if e.kind == "replay_gate_failed" and e.actor == actor]
    reason = failures[-1].reason if failures else "replay ended without promotion"
    stopped = stop_deployment(registry, green, stop_timeout_s, actor, f"replay aborted: {reason}", progress)
    record(registry, green, "replay_aborted", actor, reason or "aborted", {"stop": stopped})
    return {"action": "stopped", "reason": reason, **stopped}


def rollback(
    registry: DeploymentRegistry,
    target: str | None,
    reason: str,
    actor: str,
    progress: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Point live back at `target` (default: the deployment live before the current one); outputs are kept.

    Only to a deployment that was live before (a `live_switched` event to it in the audit trail): a
    rollback skips catch-up, quality, diff and approval, which a deployment that never served has
    not passed. A new one goes live through blue_green_replay's gates.
    """
    current = registry.live_deployment()
    chosen = target or previous_live(registry.events(), current)
    if chosen is None:
        raise ConfigError(
            f"no previous live deployment in the audit trail (live is {current!r}); name a target"
        )
    # The previous live one was live by definition; a named target must show it in its own events.
    if target and not any(
        e.kind == "live_switched" and e.to_value == chosen for e in registry.events(chosen)
    ):
        raise ConfigError(
            f"target_deployment_id {chosen!r} was never live: a rollback returns only to a deployment "
            "that served before, since it skips catch-up, quality, diff and approval; promote a new "
            "one with blue_green_replay"
        )
    record_ = registry.get(chosen)
    if record_.desired_state != "running":
        progress(
            f"[rollback] WARNING {chosen} is {record_.observed_state}: its outputs are kept but frozen; "
            "deploy it again (deploy_streaming_app) to resume it from its checkpoint"
        )
    previous = registry.switch_live(chosen, actor, f"rollback: {reason}")
    record(registry, chosen, "rollback", actor, reason, {"from": previous}, chosen)
    progress(f"[rollback] live: {previous} -> {chosen} ({reason})")
    return {"from": previous, "to": chosen, "reason": reason}
