"""Thresholds and window geometry of the revenue quality checks, as one validated, frozen config.

Window size, slide and watermark must be the streaming app's own (`include/config/streaming_app.yaml`),
so `from_app_config` copies them from the app's typed config; thresholds (revenue ceiling, freshness
lag, DLQ and late shares) are the gate's own and can be overridden per run, e.g. from a DAG's params.
Invalid values raise `ConfigError` naming the field, before any table is read.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from revenue_platform.errors import ConfigError
from revenue_platform.paths import APP_CONFIG_PATH, lake_root
from spark_apps.contract.config import MAX_DEDUPE_HORIZON_SECONDS, StreamingAppConfig, load_config
from spark_apps.contract.config_rules import (
    WHOLE_CENTS,
    ascii_digits,
    bounded_interval,
    interval_seconds,
    validation_problems,
)

# GX stores numeric bounds as float; in cents, floats are exact up to 2**53, so cap the ceiling well below.
MAX_REVENUE_CEILING = Decimal("10000000000000.00")
# Bronze is loaded into pandas in the worker: a week of lookback before the checked windows is plenty
# for dedupe and lateness, and bounds what one run reads. Freshness is judged within a week too.
MAX_BRONZE_LOOKBACK_SECONDS = 7 * 86400
MAX_FRESHNESS_LAG_SECONDS = 7 * 86400
# What a run (a form, a replay's `quality_thresholds`) may change: the gate's own thresholds. Never the
# window geometry, which is the deployment's registered config: a form that could set the watermark
# to "100000 days" would leave no window closed, nothing to reconcile, and a passing gate.
THRESHOLD_FIELDS = (
    "freshness_max_lag",
    "revenue_ceiling",
    "max_dlq_share",
    "max_late_share",
    "bronze_lookback",
    "sample_size",
)


def default_lake_root() -> str:
    """`$PLATFORM_LAKE_ROOT`, else `<state dir>/lake` (where `make demo` and the app write)."""
    return lake_root()


class QualityConfig(BaseModel):
    """Everything the revenue checks need besides the deployment and the interval."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window_size: str = "15 seconds"
    """Window length of the gold table (the app's `window.size`)."""
    window_slide: str | None = None
    """Hop between window starts (the app's `window.slide`); None = tumbling (slide = size)."""
    watermark: str = "30 seconds"
    """The app's `window.watermark`: a window is closed (final) once its end is this far behind."""
    dedupe_horizon: str = "1 hour"
    """The app's `dedupe.horizon` (spark_apps.contract.records.DEDUPE_RULE): the checks read this much more
    bronze, so the copy before each checked order's is read too."""
    freshness_max_lag: str = "15 minutes"
    """The newest closed window may end at most this long before the interval end (1 s..7 days)."""
    revenue_ceiling: Annotated[Decimal, ascii_digits(14), WHOLE_CENTS] = Field(
        default=Decimal("1000000.00"), gt=0, le=MAX_REVENUE_CEILING
    )
    """Upper bound (exclusive) of one window's revenue; higher is treated as corrupt."""
    max_dlq_share: float = Field(default=0.05, ge=0, le=1)
    """Largest allowed share of the interval's records that went to the dead-letter topic."""
    max_late_share: float = Field(default=0.01, ge=0, le=1)
    """Largest allowed share of the interval's valid records that were late (see docs/quality.md)."""
    bronze_lookback: str = "1 day"
    """Bronze partitions (by ingest date) read before the checked windows, for dedupe and lateness
    (1 s..7 days)."""
    sample_size: int = Field(default=5, ge=1, le=100)
    """How many offending keys an error message and the results table show per expectation."""

    @field_validator("window_size", "watermark", "window_slide")
    @classmethod
    def _interval(cls, value: str | None) -> str | None:
        if value is not None and interval_seconds(value) <= 0:
            raise ValueError("must be positive")
        return value

    @field_validator("dedupe_horizon")
    @classmethod
    def _horizon(cls, value: str) -> str:
        return bounded_interval(value, MAX_DEDUPE_HORIZON_SECONDS)

    @field_validator("freshness_max_lag")
    @classmethod
    def _freshness(cls, value: str) -> str:
        return bounded_interval(value, MAX_FRESHNESS_LAG_SECONDS)

    @field_validator("bronze_lookback")
    @classmethod
    def _lookback(cls, value: str) -> str:
        return bounded_interval(value, MAX_BRONZE_LOOKBACK_SECONDS)

    @model_validator(mode="after")
    def _slide_within_size(self) -> QualityConfig:
        if self.window_slide is not None and self.slide_seconds > self.size_seconds:
            raise ValueError("window_slide must not be longer than window_size")
        return self

    @property
    def size_seconds(self) -> int:
        return interval_seconds(self.window_size)

    @property
    def slide_seconds(self) -> int:
        """Hop in seconds; equals the size for tumbling windows."""
        return interval_seconds(self.window_slide) if self.window_slide is not None else self.size_seconds

    @property
    def watermark_seconds(self) -> int:
        return interval_seconds(self.watermark)

    @property
    def dedupe_horizon_seconds(self) -> int:
        return interval_seconds(self.dedupe_horizon)

    @property
    def freshness_max_lag_seconds(self) -> int:
        return interval_seconds(self.freshness_max_lag)

    @property
    def bronze_lookback_seconds(self) -> int:
        return interval_seconds(self.bronze_lookback)

    @property
    def revenue_ceiling_cents(self) -> int:
        return int(self.revenue_ceiling * 100)

    def with_overrides(self, overrides: dict[str, Any] | None) -> QualityConfig:
        """A copy with `overrides` applied (None values mean "keep"); ConfigError names a bad field."""
        changes = {key: value for key, value in (overrides or {}).items() if value is not None}
        return build_quality_config({**self.model_dump(), **changes})

    @classmethod
    def from_app_config(cls, app: StreamingAppConfig, **thresholds: Any) -> QualityConfig:
        """Window geometry from the streaming app's config, thresholds from keyword arguments."""
        window = {"window_size": app.window.size, "window_slide": app.window.slide}
        registered = {"watermark": app.window.watermark, "dedupe_horizon": app.dedupe.horizon}
        return build_quality_config({**window, **registered, **thresholds})


def validate_thresholds(thresholds: Any, field: str = "quality_thresholds") -> dict[str, Any]:
    """A run's threshold overrides, checked (ConfigError naming `field` and the key): THRESHOLD_FIELDS
    only, each within its bounds. The window geometry is never among them."""
    if thresholds is None:
        return {}
    if not isinstance(thresholds, dict):
        raise ConfigError(
            f'{field}: must be an object of threshold -> value, e.g. {{"revenue_ceiling": "5000.00"}}'
        )
    refused = sorted(str(key)[:40] for key in thresholds if key not in THRESHOLD_FIELDS)
    if refused:
        geometry = (
            " (the window geometry is the deployment's registered config)"
            if any(key.startswith("window") or key in ("watermark", "dedupe_horizon") for key in refused)
            else ""
        )
        raise ConfigError(
            f"{field}: {refused} cannot be set{geometry}; thresholds are {', '.join(THRESHOLD_FIELDS)}"
        )
    booleans = sorted(str(key) for key, value in thresholds.items() if isinstance(value, bool))
    if booleans:
        raise ConfigError(f"{field}: {booleans} must be numbers or text, not true/false")
    try:
        QualityConfig().with_overrides(thresholds)
    except ConfigError as error:
        raise ConfigError(f"{field}: {error}") from error
    return dict(thresholds)


def build_quality_config(values: dict[str, Any]) -> QualityConfig:
    """Validate `values` into a QualityConfig; ConfigError lists every bad field."""
    try:
        return QualityConfig.model_validate(values)
    except ValidationError as error:
        raise ConfigError(f"invalid quality config: {validation_problems(error)}") from error


def load_quality_config(
    app_config_path: str | Path | None = APP_CONFIG_PATH, overrides: dict[str, Any] | None = None
) -> QualityConfig:
    """The app's window geometry from its YAML (the one the app runs with) plus threshold overrides."""
    if app_config_path is None:
        return QualityConfig().with_overrides(overrides)
    try:
        app = load_config(app_config_path)
    except ValueError as error:
        raise ConfigError(str(error)) from error
    return QualityConfig.from_app_config(app).with_overrides(overrides)
