"""How a blue_green_replay run was started, what it may do, and whether it may start at all.

A replay starts three ways (docs/blue-green.md): by hand (trigger form or REST API), by a release
(publish_app_version records the version in the registry and emits the `streaming_app_release`
asset event the DAG is scheduled on) or periodically (the `REPLAY_SCHEDULE` cron). The kind is read
from the run itself (its run type and triggering asset events), never from free text; the release's
version and config come from the registry row the release wrote. A run either *promotes* green
(switch live when every gate passes) or *reproduces* live (a periodic rebuild that only proves the
live numbers can be recomputed from the earliest offsets, then retires the replica).

Pure rules only (no Airflow, Kafka or Delta), unit-tested in tests/unit/revenue_platform/bluegreen/.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal, get_args

from revenue_platform.bluegreen.logic import NOT_INHERITED
from revenue_platform.errors import ConfigError
from revenue_platform.forms import VERSION_PATTERN

# How a run was started (derived from the run) and what it does after the gates: promote = switch
# live to green; reproduce = only prove green recomputes live's numbers, then retire it.
TriggerKind = Literal["manual", "release", "periodic"]
Mode = Literal["promote", "reproduce"]
TRIGGER_KINDS: Final[tuple[TriggerKind, ...]] = get_args(TriggerKind)
MODES: Final[tuple[Mode, ...]] = get_args(Mode)
MANUAL, RELEASE, PERIODIC = TRIGGER_KINDS
PROMOTE, REPRODUCE = MODES
# REPLAY_SCHEDULE_ACTION: what a periodic run does once green reproduced live with a zero diff.
PERIODIC_ACTIONS: Final = {"record": REPRODUCE, "switch": PROMOTE}
DEFAULT_PERIODIC_ACTION: Final = "record"

# Release notes (free text for the audit trail) are bounded like every other form value.
MAX_NOTES: Final = 4000
RELEASE_EXTRA_VERSION: Final = "version"
RELEASE_EXTRA_CONFIG_HASH: Final = "config_hash"

AWAITING_APPROVAL: Final = "replay_awaiting_approval"
APPROVAL_TASK_ID: Final = "request_approval"
"""The approval task of dags/blue_green_replay.py (`approval.PromotionApprovalOperator`)."""
TERMINAL_REPLAY_EVENTS: Final = frozenset({"replay_promoted", "replay_aborted", "replay_reproduced"})
_MAX_ID = 63


def trigger_kind(run_type: str, release_events: int) -> str:
    """manual / release / periodic from the run's type and how many release events triggered it."""
    if run_type == "asset_triggered":
        if not release_events:
            raise ConfigError(
                "this asset-triggered run consumed no streaming_app_release event: nothing says which "
                "version to replay; publish one with the publish_app_version DAG (make release VERSION=...)"
            )
        return RELEASE
    if run_type == "scheduled":
        return PERIODIC
    if run_type in ("manual", "operator_triggered"):
        return MANUAL
    raise ConfigError(
        f"run type {run_type!r} cannot start a replay: trigger it by hand, publish a release, or set "
        "REPLAY_SCHEDULE (a backfill of replays has no meaning: each one rebuilds from the earliest offsets)"
    )


def validate_version(version: Any) -> str:
    text = version if isinstance(version, str) else ""
    if not re.fullmatch(VERSION_PATTERN, text):
        raise ConfigError(
            f"version: {version!r} must match {VERSION_PATTERN} (letters, digits, '.', '_', '+', '-'; "
            "e.g. 2.1.0)"
        )
    return text


def validate_release_overrides(overrides: Any) -> dict[str, Any]:
    """A release's config: dotted app-config fields; nothing that is per deployment or per environment."""
    from revenue_platform.streaming.request import overridden_fields, refuse_connection_overrides
    from spark_apps.contract.kafka_config import OUTPUT_TOPIC_FIELDS

    if not isinstance(overrides, Mapping):
        raise ConfigError("config_overrides: must be an object of dotted config field -> value")
    refuse_connection_overrides(overrides)
    per_deployment = {*NOT_INHERITED, *(f"kafka.{name}" for name in OUTPUT_TOPIC_FIELDS)}
    refused = sorted(
        str(key)
        for key in overridden_fields(overrides)
        if key in per_deployment or key == "history" or key.startswith("history.")
    )
    if refused:
        raise ConfigError(
            f"config_overrides: {refused} are not part of an app version's config (identity, where to "
            "connect, the starting position, the output topics (a green writes its own) and the replay "
            "history come from the deployment); remove them"
        )
    return dict(overrides)


@dataclass(frozen=True)
class ReleaseEvent:
    """What a `streaming_app_release` asset event says: which version, with which config hash."""

    version: str
    config_hash: str | None
    at: datetime

    @classmethod
    def from_extra(cls, extra: Mapping[str, Any] | None, at: datetime) -> ReleaseEvent:
        extra = extra or {}
        if RELEASE_EXTRA_VERSION not in extra:
            raise ConfigError(
                f"a streaming_app_release event of {at.isoformat()} names no version (extra {dict(extra)}); "
                "emit release events with the publish_app_version DAG only"
            )
        config_hash = extra.get(RELEASE_EXTRA_CONFIG_HASH)
        version = validate_version(extra[RELEASE_EXTRA_VERSION])
        return cls(version, str(config_hash) if config_hash else None, at)


def chosen_release(events: Sequence[ReleaseEvent]) -> tuple[ReleaseEvent, list[ReleaseEvent]]:
    """The newest release an asset-triggered run consumed, and the older ones it supersedes.

    Airflow folds every event queued since the previous run into one run; replaying anything but the
    newest version would only be replaced again.
    """
    if not events:
        raise ConfigError("no release event to replay")
    ordered = sorted(events, key=lambda e: e.at)
    return ordered[-1], ordered[:-1]


def periodic_mode(action: str | None) -> str:
    """The mode of a periodic run from REPLAY_SCHEDULE_ACTION (record = reproduce, switch = promote)."""
    chosen = (action or DEFAULT_PERIODIC_ACTION).strip().lower()
    if chosen not in PERIODIC_ACTIONS:
        raise ConfigError(
            f"REPLAY_SCHEDULE_ACTION={action!r} must be one of {sorted(PERIODIC_ACTIONS)}: 'record' records "
            "'replay_reproduced' and retires the replica, 'switch' makes it live"
        )
    return PERIODIC_ACTIONS[chosen]


def _slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text.lower())).strip("-")


def derived_green_id(kind: str, version: str, when: datetime) -> str:
    """A fresh deployment id for a release or a by-hand run whose form left it empty
    (`green-<version>-<UTC time>`), or for a periodic run (`repro-<time>`)."""
    stamp = when.strftime("%Y%m%d%H%M%S")
    if kind in (RELEASE, MANUAL):
        label = _slug(version)[: _MAX_ID - len("green--") - len(stamp)].strip("-")
        return f"green-{label}-{stamp}" if label else f"green-{stamp}"
    if kind == PERIODIC:
        return f"repro-{stamp}"
    raise ConfigError(f"unknown trigger kind {kind!r}; expected one of {TRIGGER_KINDS}")


def effective_params(
    kind: str,
    params: Mapping[str, Any],
    when: datetime,
    *,
    live_version: str | None = None,
    release: Mapping[str, Any] | None = None,
    periodic_action: str | None = None,
) -> dict[str, Any]:
    """The replay request a run stands for: the form for a manual run (an empty green id derived like
    a release's, from the version and the run's time), else derived from the run.

    Release and periodic runs keep the form's gate settings (tolerances, timeouts, source) at their
    defaults and derive what the form would otherwise say: green's id, blue (= live), version,
    config, approval and mode. `release` is the registry's release row (version, config_overrides,
    require_approval); `live_version` the live deployment's app version.
    """
    if kind == MANUAL:
        mode = params.get("mode")
        manual = {**params, "trigger": MANUAL, "mode": PROMOTE if mode in (None, "") else mode}
        if params.get("green_deployment_id") in (None, ""):
            # The form's default: a fresh id per run, so a second replay from the defaults is not refused.
            manual["green_deployment_id"] = derived_green_id(MANUAL, str(params.get("version") or ""), when)
        return manual
    derived: dict[str, Any] = {"trigger": kind, "blue_deployment_id": None}
    if kind == RELEASE:
        if release is None:
            raise ConfigError("a release run needs the registry's release record")
        version = validate_version(release["version"])
        derived |= {
            "version": version,
            "config_overrides": validate_release_overrides(release["config_overrides"]),
            "require_approval": bool(release["require_approval"]),
            "mode": PROMOTE,
        }
    elif kind == PERIODIC:
        if live_version is None:
            raise ConfigError("a periodic run reproduces the live deployment, and none is live")
        version = live_version
        derived |= {"version": version, "config_overrides": {}, "mode": periodic_mode(periodic_action)}
    else:
        raise ConfigError(f"unknown trigger kind {kind!r}; expected one of {TRIGGER_KINDS}")
    derived["green_deployment_id"] = derived_green_id(kind, version, when)
    return {**params, **derived}


def choose_next_step(mode: str, require_approval: bool) -> str:
    """Task id the branch after the diff follows: record a reproduction, ask a human, or switch."""
    if mode == REPRODUCE:
        return "record_reproduced"
    return APPROVAL_TASK_ID if require_approval else "no_approval_required"


@dataclass(frozen=True)
class ReplayInFlight:
    """A replay whose green is still running and that has not ended (promoted, aborted, reproduced)."""

    green: str
    started_at: datetime
    started_by: str
    last_step: str
    last_at: datetime

    @property
    def awaiting_approval(self) -> bool:
        return self.last_step == AWAITING_APPROVAL

    def describe(self) -> str:
        what = "is waiting for approval" if self.awaiting_approval else f"is at {self.last_step}"
        return (
            f"replay of {self.green} (started {self.started_at:%Y-%m-%d %H:%M:%S} UTC by {self.started_by}) "
            f"{what} since {self.last_at:%H:%M:%S} UTC"
        )


def replays_in_flight(events: Iterable[Any], running: Iterable[str]) -> list[ReplayInFlight]:
    """Replays not ended yet, from the registry's audit events and the deployments desired running.

    A green stopped by hand (desired stopped) no longer counts, so a replay whose run died without its
    teardown blocks new replays only until someone stops that green (stop_streaming_app).
    """
    wanted = set(running)
    by_green: dict[str, list[Any]] = {}
    for event in sorted(events, key=lambda e: e.at):
        if str(event.kind).startswith("replay_"):
            by_green.setdefault(event.deployment_id, []).append(event)
    found = []
    for green, replay_events in sorted(by_green.items()):
        kinds = {e.kind for e in replay_events}
        started = [e for e in replay_events if e.kind == "replay_started"]
        if not started or kinds & TERMINAL_REPLAY_EVENTS or green not in wanted:
            continue
        last = replay_events[-1]
        found.append(ReplayInFlight(green, started[0].at, started[0].actor, last.kind, last.at))
    return found


def overlap_skip_reason(
    other_runs_active: int, other_runs_awaiting_approval: int, in_flight: Sequence[ReplayInFlight]
) -> str | None:
    """Why this run must not replay now (None: go ahead). Airflow's view and the registry's both count."""
    reasons = []
    if other_runs_awaiting_approval:
        reasons.append(
            f"{other_runs_awaiting_approval} other blue_green_replay run(s) are waiting for approval at "
            "request_approval (approve or reject it first)"
        )
    elif other_runs_active:
        reasons.append(f"{other_runs_active} other blue_green_replay run(s) are running")
    reasons.extend(replay.describe() for replay in in_flight)
    if not reasons:
        return None
    return (
        "skipped: never two replays at once, never one while another waits for approval: "
        + "; ".join(reasons)
        + ". Trigger again when it has ended; if no run is working on a listed green any more, stop it "
        "with stop_streaming_app."
    )
