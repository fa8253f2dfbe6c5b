"""The revenue_quality_checks trigger form as a typed request model (the house pattern of
`revenue_platform.forms`): each field states the form's default, description and bounds once; the
DAG's Params come from it and the gate task validates the run's params with it before anything is
read. What a JSON schema cannot say is checked here too: an interval given at both ends is non-empty
and spans at most MAX_QUALITY_SPAN, every threshold is within QualityConfig's bounds. The lake root is
confined to the platform's lake by the gate (it needs the lake the worker runs with)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from revenue_platform.errors import ConfigError
from revenue_platform.forms import (
    EMPTY_IS_NONE,
    FORM_MODEL_CONFIG,
    MAX_QUALITY_SPAN,
    DateTimeText,
    OptionalDeploymentId,
    validate_quality_interval,
    validated,
)
from revenue_platform.quality.config import QualityConfig, validate_thresholds
from revenue_platform.times import parse_utc
from spark_apps.contract.config_rules import MAX_ROOT_LENGTH

_DEFAULTS = QualityConfig()
QUALITY_DAG_ID: Final = "revenue_quality_checks"
QUALITY_SCHEDULE: Final = "0 * * * *"
"""The quality DAG's cron: hourly at minute 0, each run over the hour before, of the deployment live
when it runs. Gold rewrites (reprocessing, a replay) trigger more runs, of the deployment they
rewrote. The operations view says when the next one is due (`serving.operations_state`, which
counts in whole hours: a test holds the two together)."""
# The form's fields that override a QualityConfig threshold for this run.
THRESHOLD_PARAMS = ("freshness_max_lag", "revenue_ceiling", "max_dlq_share", "max_late_share")


class QualityRequest(BaseModel):
    """The revenue_quality_checks trigger form, validated."""

    model_config = FORM_MODEL_CONFIG

    deployment_id: OptionalDeploymentId = None
    """Deployment whose gold table is checked; empty = the live deployment from the registry (the run is
    skipped while none is live). An asset-triggered run checks the deployment named in the event."""
    interval_start: Annotated[DateTimeText | None, EMPTY_IS_NONE] = Field(
        None,
        description="Start (UTC, inclusive) of the checked interval; empty = the range the triggering gold "
        "event rewrote, else the run's data interval. A form's interval spans at most "
        f"{MAX_QUALITY_SPAN}.",
    )
    interval_end: Annotated[DateTimeText | None, EMPTY_IS_NONE] = None
    """End (UTC, exclusive); empty = the run's data interval end. Freshness is measured against it, never
    against the current time."""
    freshness_max_lag: str = Field(_DEFAULTS.freshness_max_lag, max_length=40)
    """Max age of the newest closed window at the interval end, e.g. '15 minutes' (at most 7 days)."""
    revenue_ceiling: str = Field(
        str(_DEFAULTS.revenue_ceiling), pattern=r"^[0-9]{1,14}(\.[0-9]{1,2})?$(?!\n)"
    )
    """A window's revenue must be below this (exact decimal, e.g. '1000000.00')."""
    max_dlq_share: float = Field(_DEFAULTS.max_dlq_share, ge=0, le=1, allow_inf_nan=False)
    """Max share of the interval's records that are dead letters."""
    max_late_share: float = Field(_DEFAULTS.max_late_share, ge=0, le=1, allow_inf_nan=False)
    """Max share of the interval's valid records later than the watermark."""
    lake_root: Annotated[str | None, EMPTY_IS_NONE] = Field(None, max_length=MAX_ROOT_LENGTH)
    """Lake root: the platform's lake or a folder inside it; empty = $PLATFORM_LAKE_ROOT or <state
    dir>/lake."""

    @field_validator(*THRESHOLD_PARAMS)
    @classmethod
    def _within_bounds(cls, value: Any, info: ValidationInfo) -> Any:
        name = str(info.field_name)
        try:
            validate_thresholds({name: value}, name)
        except ConfigError as error:
            raise ValueError(str(error).removeprefix(f"{name}: ")) from error
        return value

    @model_validator(mode="after")
    def _interval_within_span(self) -> QualityRequest:
        start, end = self.start, self.end
        if start is not None and end is not None:
            try:
                validate_quality_interval(start, end)
            except ConfigError as error:
                raise ValueError(str(error)) from error
        return self

    @property
    def start(self) -> Any:
        return None if self.interval_start is None else parse_utc(self.interval_start, "interval_start")

    @property
    def end(self) -> Any:
        return None if self.interval_end is None else parse_utc(self.interval_end, "interval_end")

    @property
    def thresholds(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in THRESHOLD_PARAMS}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> QualityRequest:
        """The request in a run's params; ConfigError names each bad field."""
        return validated(cls, params)
