"""
Stop a streaming app deployment. The registry's desired state becomes `stopped` (so the supervisor leaves
it alone), the driver gets SIGTERM and stops its queries between micro-batches (the batch in flight
finishes and commits), and whatever is left after `timeout_s` is killed. The registry then records
observed state `stopped`, the lease is released, and an audit event says whether the stop was graceful or
forced. Example: `airflow dags trigger stop_streaming_app --conf '{"deployment_id": "blue"}'`.
See docs/operations.md.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import dag, get_current_context, task

from revenue_platform.airflow import streaming_tasks
from revenue_platform.airflow.dag_defaults import platform_default_args
from revenue_platform.airflow.params import params_from_model
from revenue_platform.errors import ConfigError
from revenue_platform.registry import DeploymentNotFoundError
from revenue_platform.streaming.request import StopRequest
from revenue_platform.streaming.stop import StopError


@dag(
    schedule=None,
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["streaming", "deployment"],
    default_args=platform_default_args(
        timedelta(seconds=10),
        non_retryable=(
            ConfigError,
            DeploymentNotFoundError,
            StopError,
        ),
    ),
    params=params_from_model(StopRequest),
)
def stop_streaming_app() -> None:
    @task(multiple_outputs=False)
    def stop() -> dict[str, Any]:
        return streaming_tasks.stop(get_current_context())

    stop()


stop_streaming_app()
