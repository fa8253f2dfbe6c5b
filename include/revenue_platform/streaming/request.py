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
