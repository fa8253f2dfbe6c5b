"""
Publish a version of the streaming app: `record_release` validates the version label and its config
(dotted app-config fields applied over the live deployment's config, checked to resolve to a valid
app config), records both in the registry's releases table (`<lake>/_registry/releases`; versions are
immutable: the same version with another config is refused, with the same config it is recorded
once and published again) and emits the `streaming_app_release` asset event (extra: version and
config hash). That event starts `blue_green_replay`, which reads version and config back from the
registry and, by default, waits for a human's approval before switching live.
`make release VERSION=2.1.0 CONFIG='{"kafka.max_offsets_per_trigger": 20000}'`; see docs/blue-green.md.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import dag, get_current_context, task

from revenue_platform.airflow import operations_tasks
from revenue_platform.airflow.assets import app_release_asset
from revenue_platform.airflow.dag_defaults import platform_default_args
from revenue_platform.airflow.params import params_from_model
from revenue_platform.bluegreen.request import PublishRequest
from revenue_platform.errors import ConfigError
from revenue_platform.registry import RegistryConflictError


@dag(
    schedule=None,
    catchup=False,
    doc_md=__doc__,
    tags=["streaming", "deployment", "blue-green", "release"],
    default_args=platform_default_args(
        timedelta(seconds=30), non_retryable=(ConfigError, RegistryConflictError)
    ),
    params=params_from_model(PublishRequest),
)
def publish_app_version() -> None:
    @task(outlets=[app_release_asset()], multiple_outputs=False)
    def record_release() -> dict[str, Any]:
        return operations_tasks.record_release(get_current_context())

    record_release()


publish_app_version()
