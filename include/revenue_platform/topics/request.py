"""The provision_topics trigger form as a typed request model (the house pattern of
`revenue_platform.forms`): fields, defaults and bounds stated once; the DAG's Params come from it and
its first task validates the run's params with it. Topic names are checked as names here; the spec
then checks that each is declared."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from revenue_platform.forms import FORM_MODEL_CONFIG, MAX_LIST_ITEMS, TopicName, validated

Environment = Literal["local", "cluster"]


class ProvisionRequest(BaseModel):
    """The provision_topics trigger form, validated."""

    model_config = FORM_MODEL_CONFIG

    # Off by default: the DAG is triggered on purpose to converge the cluster, and refusals already stop
    # every destructive change; dry_run is for previewing a spec change.
    dry_run: bool = False
    """Only log the plan; change nothing."""
    topics: list[TopicName] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    """Topic names to provision; empty means every topic in the spec."""
    # The form's default is the environment the platform runs in (PLATFORM_ENV where the DAG is parsed).
    environment: Environment = Field(default_factory=lambda: os.environ.get("PLATFORM_ENV", "local"))  # type: ignore[arg-type]
    """Spec environment whose overrides (replication factor, min.insync.replicas) apply."""
    allow_destructive: list[TopicName] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    """Topics whose refused changes may proceed (compaction removal is applied; impossible changes are
    skipped)."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> ProvisionRequest:
        """The request in a run's params; ConfigError names each bad field."""
        return validated(cls, params)
