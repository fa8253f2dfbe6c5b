"""Keep every deployment whose desired state is `running` running, within a restart budget.

Liveness is judged from what the driver shows, not from what the registry last said: the
process (for a local driver on this machine) and the age of the driver's own heartbeat. A
dead driver is restarted from its checkpoint through the deploy path with a new lease,
after an exponential back-off; after `max_restarts` restarts within `window_s` the
supervisor stops trying, marks the deployment failed and raises GaveUpError with the
app's last error. A driver that refused to start (exit status `DRIVER_REFUSED`: another Kafka
cluster's checkpoints, a config or topic refusal) would refuse again: the supervisor stops at
once, with the driver's own message, and never restarts it. A fresh deploy resets the budget.
Each pass also copies heartbeat and progress (lag, rates, last batch) into the registry and
returns them as a report, and rotates each local driver's log past
`launcher.DRIVER_LOG_MAX_BYTES` (keeping `DRIVER_LOG_BACKUPS` copies).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from revenue_platform import processes
from revenue_platform.errors import PlatformError
from revenue_platform.registry import (
    FINAL_RESTART_OUTCOMES,
    DeploymentRecord,
    DeploymentRegistry,
    DesiredState,
    ObservedState,
    RegistryConflictError,
    RegistryEvent,
    RestartOutcome,
)
from revenue_platform.streaming.deploy import DeploymentFailedError, DriverRefusedError, launch_and_wait
from revenue_platform.streaming.launcher import (
    DriverObservation,
    SparkTarget,
    log_tail,
    observe_driver,
    read_query_progress,
    rotate_driver_log,
)
from spark_apps.contract.kafka_security import KafkaClientSecurity
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, query_role

LOG = logging.getLogger(__name__)


class GaveUpError(PlatformError):
    """A deployment kept dying, or its driver refused to start: the supervisor stopped restarting it."""


@dataclass(frozen=True)
class RestartPolicy:
    """When a dead deployment is restarted, and when the supervisor gives up on it."""

    max_restarts: int = 3
    """Restarts allowed within `window_s`; one more death after that and the supervisor gives up."""
    window_s: float = 600.0
    backoff_base_s: float = 30.0
    """Wait after the first recent restart; doubles with each further one, capped at backoff_max_s."""
    backoff_max_s: float = 300.0
    heartbeat_stale_s: float = 60.0
    """A driver heartbeat older than this means dead (the driver writes one every 5 s, idle or not)."""
    start_timeout_s: float = 180.0
    """Bound on waiting for a (re)started driver's first heartbeat."""


def recent_restarts(history: Iterable[dict[str, Any]], now: datetime, window_s: float) -> list[datetime]:
    """Times of restarts within the window ending `now`, oldest first."""
    since = now - timedelta(seconds=window_s)
    times = [
        datetime.fromisoformat(entry["at"])
        for entry in history
        if entry.get("outcome") not in FINAL_RESTART_OUTCOMES
    ]
    return sorted(t for t in times if t >= since)


def backoff_s(recent: int, policy: RestartPolicy) -> float:
    """Seconds to wait after the last restart when `recent` restarts happened in the window."""
    if recent <= 0:
        return 0.0
    return float(min(policy.backoff_base_s * 2 ** (recent - 1), policy.backoff_max_s))


@dataclass(frozen=True)
class Verdict:
    action: str
    """healthy | starting | restart | backoff | give_up | gave_up | refused"""
    reason: str


def judge(
    record: DeploymentRecord, observation: DriverObservation, now: datetime, policy: RestartPolicy
) -> Verdict:
    """What to do about one deployment whose desired state is running."""
    history = record.restart_history
    last_outcome = history[-1].get("outcome") if history else None
    if last_outcome == RestartOutcome.GAVE_UP:
        return Verdict("gave_up", "restart budget exhausted; redeploy to try again")
    if last_outcome == RestartOutcome.REFUSED:
        return Verdict("refused", "its driver refused to start; do what it said, then redeploy")
    if observation.alive(policy.heartbeat_stale_s):
        return Verdict("healthy", f"heartbeat {observation.heartbeat_age_s:.0f}s old")
    launched = record.launched_at
    if (
        record.observed_state == ObservedState.STARTING.value
        and observation.process_alive is not False
        and launched is not None
        and (now - launched).total_seconds() < policy.start_timeout_s
    ):
        return Verdict("starting", "waiting for the first heartbeat")
    if observation.process_alive is False:
        why = "driver process is gone"
    elif observation.heartbeat_age_s is None:
        why = "driver never reported a heartbeat for its lease"
    else:
        why = f"driver heartbeat is {observation.heartbeat_age_s:.0f}s old"
    recent = recent_restarts(history, now, policy.window_s)
    if len(recent) >= policy.max_restarts:
        return Verdict(
            "give_up", f"{why}; {len(recent)} restarts within {policy.window_s / 60:.0f} min already"
        )
    if recent:
        due = recent[-1] + timedelta(seconds=backoff_s(len(recent), policy))
        if now < due:
            return Verdict("backoff", f"{why}; next restart not before {due.isoformat(timespec='seconds')}")
    return Verdict("restart", why)


def progress_summary(record: DeploymentRecord) -> dict[str, Any]:
    """Lag, rates and last batch of the deployment's queries, from the progress files the app writes."""
    queries = read_query_progress(record)
    summary: dict[str, Any] = {"queries": {}}
    for name, document in queries.items():
        summary["queries"][name] = {
            key: document.get(key)
            for key in (
                "batch_id",
                "batch_timestamp",
                "heartbeat_at",
                "max_offsets_behind_latest",
                "history_pending",
                "input_rows_per_second",
                "processed_rows_per_second",
            )
        }
    revenue: dict[str, Any] = next(
        (q for n, q in summary["queries"].items() if query_role(n) == REVENUE_QUERY_ROLE), {}
    )
    summary["offsets_behind_latest"] = revenue.get("max_offsets_behind_latest")
    summary["input_rows_per_second"] = revenue.get("input_rows_per_second")
    summary["processed_rows_per_second"] = revenue.get("processed_rows_per_second")
    summary["last_batch_at"] = revenue.get("batch_timestamp")
    return summary


def _restart(
    registry: DeploymentRegistry,
    record: DeploymentRecord,
    verdict: Verdict,
    observation: DriverObservation,
    target: SparkTarget,
    policy: RestartPolicy,
    actor: str,
    now: datetime,
    progress: Callable[[str], None],
    kafka_security: KafkaClientSecurity | None = None,
) -> tuple[DeploymentRecord, str | None]:
    """Clear what is left of the old driver and launch a new one; return the row and any start error."""
    if observation.process_alive and record.driver_pid is not None:
        # Alive but silent (hung): free its checkpoint before a successor takes over.
        processes.terminate(record.driver_pid, 15.0)
    history = [
        *record.restart_history,
        {"at": now.isoformat(), "reason": verdict.reason, "outcome": RestartOutcome.LAUNCHED.value},
    ]
    dead = registry.update(
        record.deployment_id,
        {"observed_state": ObservedState.DEAD.value},
        actor,
        expected_version=record.row_version,
        events=[
            RegistryEvent(
                record.deployment_id,
                "dead",
                actor,
                record.observed_state,
                ObservedState.DEAD.value,
                verdict.reason,
            ),
            RegistryEvent(
                record.deployment_id,
                "restart",
                actor,
                record.lease_token,
                None,
                verdict.reason,
                {"restart_number_in_window": len(recent_restarts(history, now, policy.window_s))},
            ),
        ],
    )
    progress(f"[supervise] {record.deployment_id}: {verdict.reason}; restarting from its checkpoint")
    try:
        started = launch_and_wait(
            registry,
            dead,
            target,
            actor,
            f"restart: {verdict.reason}",
            policy.start_timeout_s,
            progress,
            extra_changes={"restart_history_json": json.dumps(history)},
            kafka_security=kafka_security,
        )
    except DriverRefusedError:
        raise  # not a start error to retry: the pass stops supervising it
    except DeploymentFailedError as error:
        return registry.get(record.deployment_id), str(error)
    return started, None


def _give_up(
    registry: DeploymentRegistry, record: DeploymentRecord, verdict: Verdict, actor: str, now: datetime
) -> tuple[DeploymentRecord, str]:
    """Mark the deployment failed with its last error (no more restarts); return the row and that
    error's tail for the report."""
    error = record.last_error or log_tail(record) or "(no error captured)"
    history = [
        *record.restart_history,
        {"at": now.isoformat(), "reason": verdict.reason, "outcome": RestartOutcome.GAVE_UP.value},
    ]
    failed = registry.update(
        record.deployment_id,
        {
            "observed_state": ObservedState.FAILED.value,
            "restart_history_json": json.dumps(history),
            "last_error": error[-4000:],
        },
        actor,
        expected_version=record.row_version,
        events=[
            RegistryEvent(
                record.deployment_id,
                "gave_up",
                actor,
                record.observed_state,
                ObservedState.FAILED.value,
                verdict.reason,
                {"last_error": error[-2000:]},
            )
        ],
    )
    return failed, error[-3000:]


def _record_healthy(
    registry: DeploymentRegistry,
    record: DeploymentRecord,
    verdict: Verdict,
    observation: DriverObservation,
    actor: str,
) -> DeploymentRecord:
    """Store a healthy driver's progress and heartbeat, and mark it running if it was not."""
    changes: dict[str, Any] = {"last_progress_json": json.dumps(progress_summary(record), default=str)}
    if observation.status is not None:
        changes["heartbeat_at"] = datetime.fromisoformat(observation.status["heartbeat_at"])
    events = []
    if record.observed_state != ObservedState.RUNNING.value:
        changes["observed_state"] = ObservedState.RUNNING.value
        events.append(
            RegistryEvent(
                record.deployment_id,
                "observed_state",
                actor,
                record.observed_state,
                "running",
                verdict.reason,
            )
        )
    return registry.update(
        record.deployment_id, changes, actor, expected_lease=record.lease_token, events=events
    )


def supervise(
    registry: DeploymentRegistry,
    target: SparkTarget,
    policy: RestartPolicy,
    actor: str,
    deployment_ids: Iterable[str] = (),
    progress: Callable[[str], None] = print,
    kafka_security: KafkaClientSecurity | None = None,
) -> dict[str, Any]:
    """One supervision pass over the running deployments; raises GaveUpError after reporting all of them.

    Restarted drivers get `kafka_security` (the Kafka connection's credentials) like deployed ones.
    """
    wanted = set(deployment_ids)
    report: dict[str, Any] = {"deployments": []}
    gave_up: list[str] = []
    for record in registry.deployments():
        if record.desired_state != DesiredState.RUNNING.value or (
            wanted and record.deployment_id not in wanted
        ):
            continue
        now = datetime.now(UTC)
        if rotate_driver_log(record):
            LOG.info("rotated the driver log of %s: %s", record.deployment_id, record.driver_log_path)
        observation = observe_driver(record, now)
        verdict = judge(record, observation, now, policy)
        start_error: str | None = None
        try:
            if verdict.action == "restart":
                record, start_error = _restart(
                    registry,
                    record,
                    verdict,
                    observation,
                    target,
                    policy,
                    actor,
                    now,
                    progress,
                    kafka_security,
                )
            elif verdict.action == "give_up":
                record, last_error = _give_up(registry, record, verdict, actor, now)
                gave_up.append(f"{record.deployment_id}: {verdict.reason}; last error:\n{last_error}")
            elif verdict.action == "healthy":
                record = _record_healthy(registry, record, verdict, observation, actor)
        except DriverRefusedError as error:
            # Restarting it again would be refused again: stop now, with the driver's own words.
            record = registry.get(record.deployment_id)
            verdict = Verdict(RestartOutcome.REFUSED.value, "its driver refused to start; not restarted")
            gave_up.append(f"{record.deployment_id}: {error}")
        except RegistryConflictError as error:
            # Someone (a deploy or stop) changed this deployment meanwhile; judge it again next pass.
            verdict = Verdict("skipped", f"changed concurrently: {error}")
        entry = _report_entry(record, verdict, observation, policy, start_error)
        report["deployments"].append(entry)
        progress(_render(entry))
    if gave_up:
        raise GaveUpError("the supervisor gave up on:\n" + "\n\n".join(gave_up))
    return report


def _report_entry(
    record: DeploymentRecord,
    verdict: Verdict,
    observation: DriverObservation,
    policy: RestartPolicy,
    start_error: str | None,
) -> dict[str, Any]:
    summary = progress_summary(record)
    now = datetime.now(UTC)
    return {
        "deployment_id": record.deployment_id,
        "action": verdict.action,
        "reason": verdict.reason,
        "observed_state": record.observed_state,
        "process_alive": observation.process_alive,
        "heartbeat_age_s": observation.heartbeat_age_s,
        "driver_pid": record.driver_pid,
        "lease_token": record.lease_token,
        "offsets_behind_latest": summary["offsets_behind_latest"],
        "input_rows_per_second": summary["input_rows_per_second"],
        "processed_rows_per_second": summary["processed_rows_per_second"],
        "last_batch_at": summary["last_batch_at"],
        "restarts_in_window": len(recent_restarts(record.restart_history, now, policy.window_s)),
        "restarts_total": len(record.restarts),
        "start_error": start_error[-2000:] if start_error else None,
    }


def _render(entry: dict[str, Any]) -> str:
    return (
        f"[supervise] {entry['deployment_id']}: {entry['action']} ({entry['reason']}); "
        f"state={entry['observed_state']} pid={entry['driver_pid']} lag={entry['offsets_behind_latest']} "
        f"in={entry['input_rows_per_second']}/s processed={entry['processed_rows_per_second']}/s "
        f"last_batch={entry['last_batch_at']} restarts={entry['restarts_in_window']} in window "
        f"({entry['restarts_total']} since deploy)"
        + (f"\n  restart failed at start: {entry['start_error']}" if entry["start_error"] else "")
    )
