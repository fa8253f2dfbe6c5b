"""Records of the deployment registry: one row per deployment, per audit event, per app release.

Plain dataclasses with an explicit Arrow schema each, so the Delta tables have stable,
typed columns no matter which writer (Airflow task, `make down`, a test) created them.
Structured fields that only the control plane reads (restart history, last progress)
are stored as JSON strings: they change shape more often than the table should.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from spark_apps.contract.config import StreamingAppConfig


class DesiredState(StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"


class ObservedState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    FAILED = "failed"
    STOPPED = "stopped"
    DEAD = "dead"


class RestartOutcome(StrEnum):
    """What became of one entry of a deployment's `restart_history`."""

    LAUNCHED = "launched"
    """The supervisor restarted it."""
    GAVE_UP = "gave_up"
    """The restart budget was spent: the supervisor stopped restarting it."""
    REFUSED = "refused"
    """Its driver refused to start, and would again: it is not restarted."""


# Outcomes that end supervision until a deploy resets the history; they are no restarts.
FINAL_RESTART_OUTCOMES = frozenset({RestartOutcome.GAVE_UP.value, RestartOutcome.REFUSED.value})


class Colour(StrEnum):
    BLUE = "blue"
    GREEN = "green"
    OTHER = "other"


def colour_for(deployment_id: str, colour: str | None) -> Colour:
    """The given colour, else blue/green when the id says so, else other."""
    if colour:
        return Colour(colour)
    return Colour(deployment_id) if deployment_id in (Colour.BLUE, Colour.GREEN) else Colour.OTHER


def utc_now() -> datetime:
    return datetime.now(UTC)


def deployment_schema() -> pa.Schema:
    """Arrow schema of `<lake>/_registry/deployments` (pyarrow is imported lazily: DAGs import this)."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return pa.schema(
        [
            ("deployment_id", pa.string()),
            ("app_version", pa.string()),
            ("colour", pa.string()),
            ("config_json", pa.string()),
            ("config_hash", pa.string()),
            ("lake_root", pa.string()),
            ("checkpoint_dir", pa.string()),
            ("gold_table", pa.string()),
            ("bronze_table", pa.string()),
            ("progress_dir", pa.string()),
            ("desired_state", pa.string()),
            ("observed_state", pa.string()),
            ("spark_master", pa.string()),
            ("driver_kind", pa.string()),
            ("driver_host", pa.string()),
            ("driver_pid", pa.int64()),
            ("driver_log_path", pa.string()),
            ("submission_id", pa.string()),
            ("lease_epoch", pa.int64()),
            ("lease_token", pa.string()),
            ("lease_acquired_at", ts),
            ("launched_at", ts),
            ("heartbeat_at", ts),
            ("last_progress_json", pa.string()),
            ("last_error", pa.string()),
            ("restart_history_json", pa.string()),
            ("is_live", pa.bool_()),
            ("registered_at", ts),
            ("updated_at", ts),
            ("updated_by", pa.string()),
            ("row_version", pa.int64()),
        ]
    )


def event_schema() -> pa.Schema:
    """Arrow schema of the append-only `<lake>/_registry/events`."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return pa.schema(
        [
            ("event_id", pa.string()),
            ("at", ts),
            ("deployment_id", pa.string()),
            ("kind", pa.string()),
            ("actor", pa.string()),
            ("from_value", pa.string()),
            ("to_value", pa.string()),
            ("reason", pa.string()),
            ("details_json", pa.string()),
        ]
    )


def release_schema() -> pa.Schema:
    """Arrow schema of `<lake>/_registry/releases`: one immutable row per published app version."""
    import pyarrow as pa

    return pa.schema(
        [
            ("version", pa.string()),
            ("config_overrides_json", pa.string()),
            ("config_hash", pa.string()),
            ("require_approval", pa.bool_()),
            ("notes", pa.string()),
            ("published_at", pa.timestamp("us", tz="UTC")),
            ("published_by", pa.string()),
        ]
    )


@dataclass
class DeploymentRecord:
    """The registry's current row for one deployment."""

    deployment_id: str
    app_version: str = "dev"
    colour: str = Colour.OTHER.value
    config_json: str = "{}"
    config_hash: str = ""
    lake_root: str = ""
    checkpoint_dir: str = ""
    gold_table: str = ""
    bronze_table: str = ""
    progress_dir: str = ""
    desired_state: str = DesiredState.STOPPED.value
    observed_state: str = ObservedState.STOPPED.value
    spark_master: str | None = None
    driver_kind: str | None = None
    """local (host + pid + log path) or cluster (submission id)."""
    driver_host: str | None = None
    driver_pid: int | None = None
    driver_log_path: str | None = None
    submission_id: str | None = None
    lease_epoch: int = 0
    """Increases with every lease: the fencing token's order."""
    lease_token: str | None = None
    lease_acquired_at: datetime | None = None
    launched_at: datetime | None = None
    heartbeat_at: datetime | None = None
    last_progress_json: str | None = None
    last_error: str | None = None
    restart_history_json: str = "[]"
    is_live: bool = False
    registered_at: datetime = field(default_factory=utc_now)
    updated_at: datetime = field(default_factory=utc_now)
    updated_by: str = ""
    row_version: int = 0

    @property
    def restart_history(self) -> list[dict[str, Any]]:
        """Supervisor restarts since the last deploy: [{at, reason, outcome}], oldest first."""
        history: list[dict[str, Any]] = json.loads(self.restart_history_json or "[]")
        return history

    @property
    def restarts(self) -> list[dict[str, Any]]:
        """The entries of `restart_history` that are restarts (not the supervisor's final word)."""
        return [entry for entry in self.restart_history if entry.get("outcome") not in FINAL_RESTART_OUTCOMES]

    @property
    def config(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.config_json or "{}")
        return loaded

    def app_config(self) -> StreamingAppConfig:
        """The config this deployment was registered with, validated: THE source of its topics, tables,
        window geometry and rules for every reader (reprocess, quality, blue-green, serving)."""
        from revenue_platform.errors import ConfigError
        from spark_apps.contract.config import AppConfigError, load_config

        try:
            return load_config(overrides=self.config)
        except AppConfigError as error:
            raise ConfigError(
                f"the registered config of {self.deployment_id!r} is invalid: {error}"
            ) from error

    def to_row(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> DeploymentRecord:
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in row.items() if key in names})


@dataclass
class RegistryEvent:
    """One audit entry: who/what changed which deployment, when, from what, to what, and why."""

    deployment_id: str
    kind: str
    actor: str
    from_value: str | None = None
    to_value: str | None = None
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    at: datetime = field(default_factory=utc_now)
    event_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def to_row(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "at": self.at,
            "deployment_id": self.deployment_id,
            "kind": self.kind,
            "actor": self.actor,
            "from_value": self.from_value,
            "to_value": self.to_value,
            "reason": self.reason,
            "details_json": json.dumps(self.details, default=str, sort_keys=True),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RegistryEvent:
        return cls(
            deployment_id=row["deployment_id"],
            kind=row["kind"],
            actor=row["actor"],
            from_value=row["from_value"],
            to_value=row["to_value"],
            reason=row["reason"],
            details=json.loads(row["details_json"] or "{}"),
            at=row["at"],
            event_id=row["event_id"],
        )


def config_overrides_hash(overrides: dict[str, Any]) -> str:
    """SHA-256 of a release's config overrides in canonical JSON (what a replay checks it got)."""
    document = json.dumps(overrides, sort_keys=True, default=str)
    return hashlib.sha256(document.encode()).hexdigest()


@dataclass
class ReleaseRecord:
    """A published version of the streaming app: the config it ships with, who published it and when.

    `config_overrides` are dotted config fields applied over the live deployment's config when the
    release is replayed (the same meaning as blue_green_replay's `config_overrides`).
    """

    version: str
    config_overrides_json: str = "{}"
    config_hash: str = ""
    require_approval: bool = True
    notes: str = ""
    published_at: datetime = field(default_factory=utc_now)
    published_by: str = ""

    @classmethod
    def create(
        cls, version: str, overrides: dict[str, Any], require_approval: bool, notes: str, actor: str
    ) -> ReleaseRecord:
        return cls(
            version=version,
            config_overrides_json=json.dumps(overrides, sort_keys=True, default=str),
            config_hash=config_overrides_hash(overrides),
            require_approval=require_approval,
            notes=notes,
            published_by=actor,
        )

    @property
    def config_overrides(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.config_overrides_json or "{}")
        return loaded

    def to_row(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ReleaseRecord:
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in row.items() if key in names})
