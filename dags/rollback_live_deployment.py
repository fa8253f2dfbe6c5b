"""
Roll the live pointer back. `rollback` points the registry's live flag at `target_deployment_id` (default:
the deployment that was live before the current one, from the `live_switched` audit trail) in one Delta
commit and records a `rollback` event with the reason, the DAG run and the triggering user. Outputs of
both deployments are kept (nothing is deleted or stopped); a target that was stopped after a promotion
serves its frozen output until it is deployed again with deploy_streaming_app (it resumes from its
checkpoint). Example: `airflow dags trigger rollback_live_deployment --conf '{"reason": "bad numbers"}'`.
See docs/blue-green.md.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import dag, get_current_context, task

from revenue_platform.airflow import operations_tasks
from revenue_platform.airflow.dag_defaults import platform_default_args
from revenue_platform.airflow.params import params_from_model
from revenue_platform.bluegreen.request import RollbackRequest
from revenue_platform.errors import ConfigError
from revenue_platform.registry import DeploymentNotFoundError, RegistryConflictError


@dag(
    schedule=None,
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["streaming", "deployment", "blue-green"],
    default_args=platform_default_args(
        timedelta(seconds=10), non_retryable=(ConfigError, DeploymentNotFoundError, RegistryConflictError)
    ),
    params=params_from_model(RollbackRequest),
)
def rollback_live_deployment() -> None:
    @task(multiple_outputs=False)
    def rollback() -> dict[str, Any]:
        return operations_tasks.rollback(get_current_context())

    rollback()


rollback_live_deployment()
