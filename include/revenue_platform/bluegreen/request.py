"""The blue_green_replay trigger form as one typed request model: the only place its fields are stated.

Each field carries the form's default, description, type and bounds; the DAG's `Params` are built
from it (`airflow.params.params_from_model`) and `validate_request` checks a run's request with it, so a REST
call, a test or a derived release run is held to the same checks as the form. A refused value is a
ConfigError naming the field. Release and periodic runs derive some fields (`triggers.effective_params`) and
keep the rest at these defaults. Values stay data: they reach the registry, config and logs, never
SQL or shell text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from revenue_platform.bluegreen.triggers import MAX_NOTES, Mode, TriggerKind
from revenue_platform.forms import (
    FORM_MODEL_CONFIG,
    MAX_REASON,
    VERSION_PATTERN,
    AuditText,
    DeploymentId,
    OptionalDeploymentId,
    validated,
)
from revenue_platform.quality.config import THRESHOLD_FIELDS, validate_thresholds
from spark_apps.contract.config import MAX_OVERRIDES

ReplaySource = Literal["kafka_earliest", "bronze"]

GREEN_REQUIRED: Final = (
    "green_deployment_id: required (a NEW deployment id, e.g. green-2; a run whose form leaves it empty "
    "derives green-<version>-<time>)"
)

# A revenue tolerance is an amount of money: at most DECIMAL(18,2)'s digits, ASCII only (Decimal()
# would also read '1e400', 'NaN' and any script's digits).
AMOUNT: Final = r"[0-9]{1,16}(?:\.[0-9]{1,2})?"

Amount = Annotated[Decimal, WithJsonSchema({"type": "string", "pattern": rf"^{AMOUNT}$(?!\n)"})]


class ReplayRequest(BaseModel):
    """The blue_green_replay trigger form, validated (the `validate_request` XCom is `to_dict()`)."""

    model_config = FORM_MODEL_CONFIG

    green_deployment_id: DeploymentId | None = None
    """A NEW deployment id; empty = green-<version>-<UTC time of the run>, fresh for every run (release
    and periodic runs always derive one)."""
    blue_deployment_id: DeploymentId | None = None
    """Deployment to replace; empty = the live one (release/periodic runs: always live)."""
    version: str = Field("dev", pattern=VERSION_PATTERN)
    """Version label of green (release runs: the release's)."""
    config_overrides: dict[str, Any] = Field(default_factory=dict, max_length=MAX_OVERRIDES)
    """Dotted config field -> value applied over blue's config (release runs: the release's; periodic
    runs: none)."""
    mode: Mode = "promote"
    """promote: switch live to green when every gate passes. reproduce: only prove green recomputes
    live's numbers, record replay_reproduced and retire green (periodic runs: REPLAY_SCHEDULE_ACTION
    decides)."""
    replay_source: ReplaySource = "kafka_earliest"
    """kafka_earliest: green reads the orders topic from its first offset. bronze: green reads blue's
    bronze archive, then Kafka from the first offset bronze lacks (use when Kafka's retention has
    deleted history). Validation refuses a source that would lose records."""
    max_offsets_behind: int = Field(0, ge=0, le=1_000_000_000)
    """Lag that counts as caught up."""
    catch_up_timeout_s: float = Field(900, ge=0, le=7 * 86400, allow_inf_nan=False)
    """Bound on waiting to catch up (seconds)."""
    poll_interval_s: float = Field(5, ge=0.1, le=3600, allow_inf_nan=False)
    """Seconds between two looks at green's lag."""
    revenue_tolerance: Amount = Decimal("0.00")
    """Allowed absolute revenue difference per final window (an amount, e.g. 0.01)."""
    count_tolerance: int = Field(0, ge=0, le=1_000_000)
    """Allowed order-count difference."""
    quality_thresholds: dict[str, Any] = Field(
        default_factory=dict,
        description='Quality threshold overrides, e.g. {"revenue_ceiling": "5000.00"}; one of '
        f"{', '.join(THRESHOLD_FIELDS)} (the window geometry is green's registered config).",
        json_schema_extra={"propertyNames": {"enum": list(THRESHOLD_FIELDS)}},
    )
    require_approval: bool = True
    """Ask a human before switching live (on by default; release runs: the release's, on by default).
    The approver is never the user who triggered the run, nor a release run's publisher."""
    grace_period_s: float = Field(300, ge=0, le=86400, allow_inf_nan=False)
    """Blue keeps running this long (seconds)."""
    start_timeout_s: float = Field(180, ge=10, le=3600, allow_inf_nan=False)
    """Bound on green's first heartbeat after launch (seconds)."""
    stop_timeout_s: float = Field(60, ge=1, le=3600, allow_inf_nan=False)
    """Bound on stopping a driver gracefully, then forced."""
    # Not a form field: derived from the run (bluegreen.triggers), never from free text.
    trigger: SkipJsonSchema[TriggerKind] = "manual"

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> ReplayRequest:
        """The request in a run's params (or an XCom of `to_dict()`); ConfigError names each bad field."""
        return validated(cls, params)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (XCom); `from_params` reads it back."""
        return self.model_dump(mode="json")

    @property
    def green(self) -> str:
        """`green_deployment_id`, which a validated request always has (a run's empty one is derived)."""
        if self.green_deployment_id is None:
            raise ValueError(GREEN_REQUIRED)
        return self.green_deployment_id

    @field_validator(
        "green_deployment_id",
        "blue_deployment_id",
        "mode",
        "config_overrides",
        "quality_thresholds",
        mode="before",
    )
    @classmethod
    def _empty_is_default(cls, value: Any, info: ValidationInfo) -> Any:
        # A REST call or an older form may send "" or null for "not set".
        if value is None or (isinstance(value, str) and value == ""):
            return cls.model_fields[str(info.field_name)].get_default(call_default_factory=True)
        return value

    @field_validator("revenue_tolerance", mode="before")
    @classmethod
    def _amount(cls, value: Any) -> Decimal:
        text = str(value) if isinstance(value, int | Decimal) and not isinstance(value, bool) else value
        if not isinstance(text, str) or not re.fullmatch(AMOUNT, text):
            raise ValueError(
                f"{str(value)[:40]!r} must be a non-negative amount with at most 2 decimals, e.g. '0.01'"
            )
        return Decimal(text)

    @field_validator("quality_thresholds")
    @classmethod
    def _thresholds(cls, value: dict[str, Any]) -> dict[str, Any]:
        # Raises ConfigError naming the field and the key (pydantic lets it through unchanged).
        return validate_thresholds(value)

    @model_validator(mode="after")
    def _green_named(self) -> ReplayRequest:
        if self.green_deployment_id is None:
            # Left empty on the form: `triggers.effective_params` names one for the run before this check.
            raise ValueError(GREEN_REQUIRED)
        return self

    @model_validator(mode="after")
    def _green_is_not_blue(self) -> ReplayRequest:
        if self.blue_deployment_id == self.green_deployment_id:
            raise ValueError(
                f"green_deployment_id {self.green_deployment_id!r} must differ from the blue deployment"
            )
        return self


class RollbackRequest(BaseModel):
    """The rollback_live_deployment trigger form, validated."""

    model_config = FORM_MODEL_CONFIG

    target_deployment_id: OptionalDeploymentId = None
    """Deployment to make live; empty = the previous live one from the audit trail."""
    reason: AuditText = Field(
        "rollback", description=f"Why (recorded in the audit trail; at most {MAX_REASON} characters)."
    )

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> RollbackRequest:
        """The request in a run's params; ConfigError names each bad field."""
        return validated(cls, params)


class PublishRequest(BaseModel):
    """The publish_app_version trigger form, validated (`release.publish` then checks the config the
    overrides make and records the release)."""

    model_config = FORM_MODEL_CONFIG

    version: str = Field("", pattern=VERSION_PATTERN)
    """Version label to release, e.g. 2.1.0 (required; immutable once published)."""
    config_overrides: dict[str, Any] = Field(default_factory=dict, max_length=MAX_OVERRIDES)
    """Dotted config field -> value this version runs with, over the live deployment's config, e.g.
    {"kafka.max_offsets_per_trigger": 20000}."""
    require_approval: bool = True
    """The release's replay waits for a human's approval before switching live."""
    notes: str = Field(
        "",
        max_length=MAX_NOTES,
        description=f"Release notes for the audit trail (optional, at most {MAX_NOTES} characters).",
    )

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> PublishRequest:
        """The request in a run's params; ConfigError names each bad field."""
        return validated(cls, params)
