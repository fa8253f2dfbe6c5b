"""What the operations view concludes from the registry and a deployment's progress file, as pure functions.

Whether a batch's rates are still current (or the app is idle, or its numbers stale), each deployment's
role through a blue-green switch and its grace period (live, candidate, outgoing, stopped), who approved
a switch of the live pointer, which blue-green replay waits for approval, with the Airflow UI page
where a human answers it, and, before a deployment's first quality run, when the next one is due and
why there is none yet. The view (`serving.operations_view`) reads the registry and the files and
calls these with the clock; tests call them with made-up events and times.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal
from urllib.parse import quote

from revenue_platform.bluegreen.triggers import APPROVAL_TASK_ID, replays_in_flight
from revenue_platform.quality.request import QUALITY_DAG_ID
from revenue_platform.registry import DeploymentRecord, DesiredState, RegistryEvent

RATES_CURRENT_TRIGGERS: Final = 3
"""A batch's rates are current for this many trigger intervals after the batch ended..."""
RATES_CURRENT_MIN_S: Final = 30.0
"""...and for at least this long: a batch on a busy 2-core machine takes several seconds, and Spark
reports an idle query only every 10 s (`spark.sql.streaming.noDataProgressEventInterval`)."""
LIVE_SWITCH_EVENT: Final = "live_switched"
"""Registry event kind written by `DeploymentRegistry.switch_live` (promotions and rollbacks)."""
PROMOTION_EVENT: Final = "replay_promoted"
"""Written by the blue-green replay right after its switch, with the evidence (`approved_by` among it)."""

RatesState = Literal["current", "idle", "stale", "none"]
Role = Literal["live", "candidate", "outgoing", "stopped"]
ROLE_ORDER: Final[dict[str, int]] = {"live": 0, "outgoing": 1, "candidate": 2, "stopped": 3}


def parse_time(value: Any) -> datetime | None:
    """A UTC datetime from ISO text (a trailing Z too) or a datetime; None for nothing or garbage. Without
    an offset it is UTC (what the app writes), so times from different files always compare."""
    if value in (None, ""):
        return None
    try:
        moment = (
            value
            if isinstance(value, datetime)
            else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        )
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def rates_current_for_s(trigger_interval_s: float) -> float:
    """How long after a batch ended its rates still describe the app: 3 trigger intervals, at least 30 s."""
    return max(RATES_CURRENT_TRIGGERS * trigger_interval_s, RATES_CURRENT_MIN_S)


@dataclass(frozen=True)
class BatchRates:
    """The rates of the revenue query's last batch, and whether they still say what the app does now."""

    state: RatesState
    """current: the batch ended within `rates_current_for_s`; idle: Spark reported the query found nothing
    new to read after it; stale: neither (a long batch, or a driver that stopped publishing); none: no
    batch yet."""
    batch_id: int | None = None
    batch_ended_at: datetime | None = None
    age_s: float | None = None
    """Seconds from the batch's end to now."""
    input_rows: int | None = None
    input_rows_per_second: float | None = None
    """Of that one batch, and only while current; None also when Spark could not measure it (see below)."""
    processed_rows_per_second: float | None = None


def _batch_end(progress: Mapping[str, Any]) -> datetime | None:
    """When the batch ended: Spark's timestamp is the trigger's start; the progress comes after the commit."""
    started = parse_time(progress.get("batch_timestamp"))
    if started is None:
        return None
    return started + timedelta(milliseconds=float(progress.get("batch_duration_ms") or 0))


def _input_rate(progress: Mapping[str, Any]) -> float | None:
    rate, rows = progress.get("input_rows_per_second"), progress.get("num_input_rows")
    # Spark divides a batch's rows by the time since the previous trigger; the first batch after the
    # query (re)started has none and reports 0.0 next to a real processed rate. That is "unknown", not 0.
    if rate is None or (rows and not float(rate)):
        return None
    return float(rate)


def batch_rates(progress: Mapping[str, Any], trigger_interval_s: float, now: datetime) -> BatchRates:
    """The last batch's rates (input and processed of the same batch) with how current they are."""
    ended = _batch_end(progress)
    if ended is None or progress.get("batch_id") is None:
        return BatchRates("none")
    age_s = max((now - ended).total_seconds(), 0.0)
    idle_since = parse_time(progress.get("caught_up_at"))
    state: RatesState
    if idle_since is not None and idle_since >= ended:
        state = "idle"
    elif age_s > rates_current_for_s(trigger_interval_s):
        state = "stale"
    else:
        state = "current"
    rows = progress.get("num_input_rows")
    facts = BatchRates(state, int(progress["batch_id"]), ended, age_s, None if rows is None else int(rows))
    if state != "current":
        return facts
    processed = progress.get("processed_rows_per_second")
    return replace(
        facts,
        input_rows_per_second=_input_rate(progress),
        processed_rows_per_second=None if processed is None else float(processed),
    )


# --- roles through a switch ---------------------------------------------------------------------
@dataclass(frozen=True)
class RoleView:
    role: Role
    note: str | None = None


def _utc(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def _promotion_of(switch: RegistryEvent, events: Sequence[RegistryEvent]) -> RegistryEvent | None:
    """The blue-green replay's record of `switch`: its `replay_promoted` event (same run, same green)."""
    return next(
        (
            e
            for e in events
            if e.kind == PROMOTION_EVENT
            and e.deployment_id == switch.to_value
            and e.actor == switch.actor
            and e.at >= switch.at
        ),
        None,
    )


def _outgoing_note(lost: RegistryEvent, events: Sequence[RegistryEvent]) -> str:
    until = f"live until {_utc(lost.at)}, now {lost.to_value}"
    if _promotion_of(lost, events) is not None:
        return f"{until}; kept running for the replay's grace period, then stopped"
    return f"{until}; still running: stop it (stop_streaming_app) once no reader needs it"


def deployment_role(record: DeploymentRecord, events: Sequence[RegistryEvent]) -> RoleView:
    """live; outgoing: was live and has run on since the pointer moved away (a replay's grace period, or
    after a rollback); candidate: meant to run, not live (a replay's green, a fresh deploy); stopped."""
    deployment_id = record.deployment_id
    own = [e for e in events if deployment_id in (e.deployment_id, e.from_value)]
    switches = [e for e in own if e.kind == LIVE_SWITCH_EVENT]
    if record.is_live:
        since = [e for e in switches if e.to_value == deployment_id]
        return RoleView("live", f"live since {_utc(since[-1].at)}" if since else None)
    if record.desired_state != DesiredState.RUNNING.value:
        return RoleView("stopped")
    lost = [e for e in switches if e.from_value == deployment_id]
    deployed = [
        e
        for e in own
        if e.deployment_id == deployment_id and e.kind == "desired_state" and e.to_value == "running"
    ]
    # A deployment stopped after it lost live and deployed again is a candidate again.
    if lost and (not deployed or deployed[-1].at <= lost[-1].at):
        return RoleView("outgoing", _outgoing_note(lost[-1], events))
    return RoleView("candidate")


# --- approvals ----------------------------------------------------------------------------------
# revenue_platform.airflow.dag_defaults.actor_from_context: "airflow:<dag_id>/<run_id>[ (user <name>)]".
_AIRFLOW_ACTOR = re.compile(r"airflow:(?P<dag_id>[^/\s]+)/(?P<run_id>\S+?)(?: \(user (?P<user>.*)\))?")


def dag_run_of_actor(actor: str) -> tuple[str, str] | None:
    """(dag_id, run_id) of an audit actor a DAG task wrote; None for any other actor (make demo, a test)."""
    match = _AIRFLOW_ACTOR.fullmatch(actor)
    return (match["dag_id"], match["run_id"]) if match else None


def approval_page(dag_id: str, run_id: str) -> str:
    """The Airflow UI's page (relative to its base URL) where a human approves or rejects the run's
    `request_approval` (Airflow 3's HITL "Required Actions" tab of the task instance)."""
    run = f"dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe=':+')}"
    return f"{run}/tasks/{APPROVAL_TASK_ID}/required_actions"


@dataclass(frozen=True)
class PendingApproval:
    green_deployment_id: str
    since: datetime
    requested_by: str
    dag_id: str | None
    run_id: str | None

    @property
    def approval_page(self) -> str | None:
        return approval_page(self.dag_id, self.run_id) if self.dag_id and self.run_id else None


def pending_approvals(events: Sequence[RegistryEvent], running: Sequence[str]) -> list[PendingApproval]:
    """Blue-green replays whose green passed every gate and waits for a human (the registry's view, which
    also sees a replay another Airflow on the same lake runs)."""
    found = []
    for replay in replays_in_flight(events, running):
        if replay.awaiting_approval:
            dag_id, run_id = dag_run_of_actor(replay.started_by) or (None, None)
            found.append(PendingApproval(replay.green, replay.last_at, replay.started_by, dag_id, run_id))
    return found


@dataclass(frozen=True)
class SwitchApproval:
    approved_by: str | None
    """Who approved the switch in the replay's approval step."""
    approval_required: bool | None
    """None: not a blue-green promotion (a rollback, the demo's first deployment): nobody was asked."""


def _user_name(user: Any) -> str | None:
    # Airflow's HITL answer names the user as {"id": ..., "name": ...}.
    if isinstance(user, Mapping):
        return str(user.get("name") or user.get("id") or "") or None
    return str(user) if user else None


def switch_approval(switch: RegistryEvent, events: Sequence[RegistryEvent]) -> SwitchApproval:
    """Who approved a live switch, from the evidence its blue-green replay recorded with it."""
    promotion = _promotion_of(switch, events)
    if promotion is None:
        return SwitchApproval(None, None)
    required = promotion.details.get("require_approval")
    return SwitchApproval(
        _user_name(promotion.details.get("approved_by")), None if required is None else bool(required)
    )


# --- before the first quality run ---------------------------------------------------------------


def last_scheduled_quality_run(now: datetime) -> datetime:
    """When the hourly run at or before `now` was due."""
    return now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def next_scheduled_quality_run(now: datetime) -> datetime:
    """When the next hourly run is due (strictly after `now`)."""
    return last_scheduled_quality_run(now) + timedelta(hours=1)


def live_since(deployment_id: str, events: Sequence[RegistryEvent]) -> datetime | None:
    """When the live pointer last moved to `deployment_id` (None: it never did)."""
    switches = [e.at for e in events if e.kind == LIVE_SWITCH_EVENT and e.to_value == deployment_id]
    return max(switches, default=None)


def why_no_quality_run(
    now: datetime, deployment_id: str | None, live_deployment_id: str | None, went_live_at: datetime | None
) -> str:
    """Why the quality history holds no run of `deployment_id` yet (the view asks when it holds none), in
    the words of someone who runs the platform: what schedules the checks and what to do meanwhile."""
    last = last_scheduled_quality_run(now)
    if deployment_id is None:
        return (
            "Nothing is live yet, so the hourly run skips: there is no deployment to check. Deploy one and "
            f"make it live (make demo does both), or trigger {QUALITY_DAG_ID} naming a deployment_id."
        )
    if deployment_id != live_deployment_id:
        return (
            f"Scheduled runs check the live deployment ({live_deployment_id or 'none'}), not "
            f"{deployment_id}: a blue-green replay's quality gate checks its green, or trigger "
            f"{QUALITY_DAG_ID} with deployment_id {deployment_id}."
        )
    if went_live_at is not None and went_live_at < last:
        return (
            f"{deployment_id} has been live since {_utc(went_live_at)}, so the {last:%H:%M} UTC run should "
            f"have checked it, unless it is still running: look at {QUALITY_DAG_ID}'s runs in Airflow "
            "(paused? failed? skipped?)."
        )
    if went_live_at is None:
        return f"No run has checked {deployment_id} yet: the next hourly run checks it."
    return (
        f"{deployment_id} went live at {_utc(went_live_at)}, after the last hourly run ({last:%H:%M} UTC): "
        "the next one checks it."
    )
