"""The trigger forms of the streaming app's DAGs as typed request models (the house pattern of
`revenue_platform.forms`): each field states the form's default, description, type and bounds once;
the DAG's Params are built from the model and its first task validates the run's params with it, so
a REST call or a test is held to the same checks as the form. A refused value is a ConfigError naming
the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from revenue_platform.forms import (
    FORM_MODEL_CONFIG,
    MAX_LIST_ITEMS,
    MAX_STOP_TIMEOUT_S,
    MIN_STOP_TIMEOUT_S,
    DeploymentId,
    validated,
)


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
