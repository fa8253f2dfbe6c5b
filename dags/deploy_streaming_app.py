"""
Deploy a long-running deployment of the orders streaming app. `validate_request` checks the trigger form
(deployment id, colour, version label, dotted config overrides such as `{"window.size": "1 minute"}`,
starting offsets `earliest`/`latest`/epoch-ms timestamp) with the app's own config loader before anything
is touched; a bad value fails the task naming the field. `deploy` then registers the deployment in the
registry (`<lake>/_registry`), takes a new lease (fencing token) unless a live driver already holds one
(then it is a no-op: never a second driver), launches the app through the `spark_default` connection so it
keeps running after the task ends (a detached spark-submit for a client-mode master, a no-wait cluster
submission otherwise) and waits, bounded, for its first heartbeat; an app that fails at start is marked
failed and its error (the tail of its log, whose path the task log shows) fails the task. Example:
`airflow dags trigger deploy_streaming_app --conf '{"deployment_id": "green", "version": "1.4.0"}'`.
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
from revenue_platform.kafka_connection import KafkaConnectionConfigError
from revenue_platform.registry import RegistryConflictError
from revenue_platform.streaming.deploy import DeploymentFailedError
from revenue_platform.streaming.request import DeployForm

# A bad request, an app that fails at start or a lost lease race is not fixed by retrying the same
# run; anything else (e.g. a lake hiccup) gets one retry, which is safe: deploy is idempotent.


@dag(
    schedule=None,
    catchup=False,
    # One deploy at a time: two runs racing for the same lease would only make one of them fail.
    max_active_runs=1,
    doc_md=__doc__,
    tags=["streaming", "deployment"],
    default_args=platform_default_args(
        timedelta(seconds=30),
        non_retryable=(
            ConfigError,
            DeploymentFailedError,
            RegistryConflictError,
            KafkaConnectionConfigError,
        ),
    ),
    params=params_from_model(DeployForm),
)
def deploy_streaming_app() -> None:
    @task(multiple_outputs=False)
    def validate_request() -> dict[str, Any]:
        return streaming_tasks.validate_deploy_request(get_current_context())

    @task(multiple_outputs=False)
    def deploy(request: dict[str, Any]) -> dict[str, Any]:
        return streaming_tasks.deploy(get_current_context(), request)

    # At parse time this is an XComArg standing in for the request dict.
    request: Any = validate_request()
    deploy(request)


deploy_streaming_app()
