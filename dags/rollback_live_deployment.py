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

from airflow.sdk import Param, dag, get_current_context, task

from revenue_platform.dag_defaults import actor_from_context, platform_default_args
from revenue_platform.errors import ConfigError
from revenue_platform.forms import MAX_REASON
from revenue_platform.registry import DeploymentNotFoundError, RegistryConflictError
from spark_apps.contract.naming import DEPLOYMENT_ID_PATTERN


@dag(
    schedule=None,
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["streaming", "deployment", "blue-green"],
    default_args=platform_default_args(
        timedelta(seconds=10), non_retryable=(ConfigError, DeploymentNotFoundError, RegistryConflictError)
    ),
    params={
        "target_deployment_id": Param(
            None,
            type=["null", "string"],
            pattern=DEPLOYMENT_ID_PATTERN.pattern,
            description="Deployment to make live; empty = the previous live one from the audit trail.",
        ),
        "reason": Param(
            "rollback",
            type="string",
            minLength=1,
            maxLength=MAX_REASON,
            description=f"Why (recorded in the audit trail; at most {MAX_REASON} characters).",
        ),
    },
)
def rollback_live_deployment() -> None:
    @task(multiple_outputs=False)
    def rollback() -> dict[str, Any]:
        from revenue_platform.bluegreen.replay import rollback as roll_back
        from revenue_platform.forms import validate_rollback_form
        from revenue_platform.registry import DeploymentRegistry
        from revenue_platform.trigger_conf import refuse_unknown_conf

        context = get_current_context()
        refuse_unknown_conf(context)
        target, reason = validate_rollback_form(context["params"])
        return roll_back(
            DeploymentRegistry(),
            target,
            reason,
            actor_from_context(context),
        )

    rollback()


rollback_live_deployment()
