"""The trigger forms of the streaming app's DAGs as typed request models (the house pattern of
`revenue_platform.forms`): each field states the form's default, description, type and bounds once;
the DAG's Params are built from the model and its first task validates the run's params with it, so
a REST call or a test is held to the same checks as the form. A refused value is a ConfigError naming
the field."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, Field, WithJsonSchema, field_validator

from revenue_platform.errors import ConfigError
from revenue_platform.forms import (
    EMPTY_IS_NONE,
    FORM_MODEL_CONFIG,
    MAX_LIST_ITEMS,
    MAX_STOP_TIMEOUT_S,
    MIN_STOP_TIMEOUT_S,
    VERSION_PATTERN,
    DeploymentId,
    validated,
)
from revenue_platform.registry import Colour as RegistryColour
from spark_apps.contract.config import MAX_OVERRIDES
from spark_apps.contract.kafka_config import MAX_TIMESTAMP_MS
from spark_apps.contract.naming import validate_deployment_id

# Bounds of the deploy form's wait for a new driver's first heartbeat.
MIN_START_TIMEOUT_S: Final = 10
MAX_START_TIMEOUT_S: Final = 3600
STARTING_POSITIONS: Final = ("earliest", "latest")
# Fields a form never sets: identity and lease come from the request and the registry, where to
# connect and how to authenticate from the Airflow Kafka connection only (a form that could name the
# servers would have the driver log in there with the connection's credentials).
RESERVED_OVERRIDES = ("deployment_id", "app_version", "lease_token", "registry_root")
CONNECTION_FIELDS = ("kafka.bootstrap_servers", "kafka.security")
# Where a new checkpoint starts is the form's `starting_offsets` field, which would silently replace them.
STARTING_FIELDS = ("kafka.starting_offsets", "kafka.starting_timestamp_ms")


# The form offers the empty choice too (derive the colour from the deployment id); without labels,
# Airflow's form would show it as "null".
Colour = Annotated[
    Literal["blue", "green", "other"] | None,
    EMPTY_IS_NONE,
    WithJsonSchema(
        {
            "type": ["null", "string"],
            "enum": [None, "blue", "green", "other"],
            "values_display": {
                "null": "derive from the deployment id",
                "blue": "blue",
                "green": "green",
                "other": "other",
            },
        }
    ),
]


class DeployForm(BaseModel):
    """The deploy_streaming_app trigger form, validated; `to_request` is the `DeployRequest` it asks
    for (`deploy.resolve_config` then validates the config that request resolves to)."""

    model_config = FORM_MODEL_CONFIG

    deployment_id: DeploymentId = "blue"
    """Namespace of checkpoints, tables and consumer group (e.g. blue, green)."""
    colour: Colour = None
    """blue/green/other; empty derives it from the deployment id."""
    version: str = Field("dev", pattern=VERSION_PATTERN)
    """App version label recorded with the deployment (letters, digits, '._+-'; <= 63)."""
    config_overrides: dict[str, Any] = Field(
        default_factory=dict,
        max_length=MAX_OVERRIDES,
        description='Dotted config field -> value, e.g. {"window.size": "1 minute", "trigger.interval": '
        '"10 seconds"}; see spark_apps/contract/config.py.',
    )
    starting_offsets: str = Field("earliest", pattern=r"^(earliest|latest|[0-9]{1,15})$(?!\n)")
    """Where a NEW checkpoint starts: earliest, latest, or a timestamp in epoch ms."""
    start_timeout_s: int = Field(180, ge=MIN_START_TIMEOUT_S, le=MAX_START_TIMEOUT_S)
    """Bound on waiting for the app's first heartbeat (seconds)."""

    @field_validator("starting_offsets", mode="before")
    @classmethod
    def _epoch_ms_as_text(cls, value: Any) -> Any:
        # A REST caller may give the timestamp as a JSON number.
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> DeployForm:
        """The form in a run's params; ConfigError names each bad field."""
        return validated(cls, params)

    def to_request(self) -> DeployRequest:
        return DeployRequest(
            deployment_id=self.deployment_id,
            colour=self.colour,
            app_version=self.version,
            config_overrides=self.config_overrides,
            starting_offsets=self.starting_offsets,
            start_timeout_s=float(self.start_timeout_s),
        )


@dataclass(frozen=True)
class DeployRequest:
    """What the deploy_streaming_app DAG's trigger form asks for (or the blue-green replay, for its
    green), checked when it is made: a bad id, colour, override or starting point is a ConfigError
    naming the field before anything is touched, however the request was made (the form, XCom, code).
    The config it resolves to is checked by `deploy.resolve_config`."""

    deployment_id: str
    colour: str | None = None
    app_version: str = "dev"
    config_overrides: Mapping[str, Any] = field(default_factory=dict)
    starting_offsets: str = "earliest"
    """earliest, latest, or an epoch-millisecond timestamp; only used by a NEW checkpoint."""
    start_timeout_s: float = 180.0
    starting_config: Mapping[str, Any] = field(init=False, repr=False, compare=False)
    """The config overrides `starting_offsets` stands for (`starting_overrides`)."""

    def __post_init__(self) -> None:
        try:
            validate_deployment_id(self.deployment_id)
        except ValueError as error:
            raise ConfigError(f"invalid deployment request: {error}") from error
        if self.colour not in (None, "", *(colour.value for colour in RegistryColour)):
            raise ConfigError(
                f"colour: {str(self.colour)[:40]!r} must be blue, green, other or empty (derived from the id)"
            )
        if not isinstance(self.config_overrides, Mapping):
            raise ConfigError("config_overrides: must be an object of dotted config field -> value")
        refuse_connection_overrides(self.config_overrides)
        object.__setattr__(self, "starting_config", starting_overrides(self.starting_offsets))

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> DeployRequest:
        """The deploy_streaming_app trigger form as a request (`streaming.request.DeployForm`);
        ConfigError names a bad field (`resolve_config` then validates the config it asks for)."""
        return DeployForm.from_params(params).to_request()

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (XCom); `DeployRequest(**request.to_dict())` is the same request."""
        return {
            **{name: getattr(self, name) for name, spec in self.__dataclass_fields__.items() if spec.init},
            "config_overrides": dict(self.config_overrides),
        }


class StopRequest(BaseModel):
    """The stop_streaming_app trigger form, validated."""

    model_config = FORM_MODEL_CONFIG

    deployment_id: DeploymentId = "blue"
    """Deployment whose streaming app is stopped (its registry record is kept)."""
    timeout_s: int = Field(60, ge=MIN_STOP_TIMEOUT_S, le=MAX_STOP_TIMEOUT_S)
    """Graceful-stop budget before the driver is killed (seconds)."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> StopRequest:
        """The request in a run's params; ConfigError names each bad field."""
        return validated(cls, params)


class SuperviseRequest(BaseModel):
    """The supervise_streaming_apps trigger form (its schedule runs the defaults), validated: the
    deployments to look at and the restart policy, bounded."""

    model_config = FORM_MODEL_CONFIG

    deployment_ids: list[DeploymentId] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    """Only these deployments; empty = all."""
    max_restarts: int = Field(3, ge=0, le=100)
    """Restarts allowed within the window."""
    window_minutes: float = Field(10, ge=1, le=1440, allow_inf_nan=False)
    """Restart budget window (minutes)."""
    backoff_base_s: float = Field(30, ge=0, le=3600, allow_inf_nan=False)
    """Back-off after a restart; doubles per further restart."""
    heartbeat_stale_s: float = Field(60, ge=10, le=3600, allow_inf_nan=False)
    """A driver heartbeat older than this means dead."""
    start_timeout_s: int = Field(180, ge=10, le=3600)
    """Wait for a restarted driver."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> SuperviseRequest:
        """The request in a run's params; ConfigError names each bad field."""
        return validated(cls, params)

    @property
    def window_s(self) -> float:
        return self.window_minutes * 60


def starting_overrides(starting_offsets: str) -> dict[str, Any]:
    """Config overrides for where a new checkpoint starts reading `orders`."""
    value = str(starting_offsets)
    if value in STARTING_POSITIONS:
        return {"kafka.starting_offsets": value, "kafka.starting_timestamp_ms": None}
    if re.fullmatch(r"[0-9]{1,15}", value) and int(value) <= MAX_TIMESTAMP_MS:
        return {"kafka.starting_timestamp_ms": int(value)}
    raise ConfigError(
        f"starting_offsets: {starting_offsets!r} must be 'earliest', 'latest' or a timestamp in epoch ms "
        f"(0..{MAX_TIMESTAMP_MS}, i.e. up to 9999-12-31)"
    )


def overridden_fields(overrides: Mapping[Any, Any], prefix: str = "") -> list[str]:
    """Every field an override sets, nested sections included: `{"kafka": {"a": 1}}` sets `kafka.a`."""
    keys = []
    for key, value in overrides.items():
        dotted = f"{prefix}{key}"
        keys.append(dotted)
        if isinstance(value, Mapping):
            keys.extend(overridden_fields(value, f"{dotted}."))
    return keys


def refuse_connection_overrides(overrides: Mapping[Any, Any], field: str = "config_overrides") -> None:
    """ConfigError unless `overrides` leave identity, lease, servers and security alone.

    `kafka.options` keys are checked by the config model (an allow-list of tuning keys).
    """
    for key in overridden_fields(overrides):
        if key in RESERVED_OVERRIDES:
            raise ConfigError(f"{field}.{key} is not allowed: it comes from the deploy request / registry")
        if key in STARTING_FIELDS:
            raise ConfigError(
                f"{field}.{key} is not allowed: where a new deployment starts is the form's starting_offsets "
                "(earliest, latest or an epoch-ms timestamp)"
            )
        if any(key == name or key.startswith(f"{name}.") for name in CONNECTION_FIELDS):
            raise ConfigError(
                f"{field}.{key} is not allowed: Kafka servers and security come only from the Airflow Kafka "
                "connection (kafka_default); a config names topics, never hosts"
            )
