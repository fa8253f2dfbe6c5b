"""
Supervise every streaming app deployment whose desired state is `running` (registry: `<lake>/_registry`).
Each minute it judges liveness from the driver process (local drivers) and the age of the driver's own
heartbeat, restarts a dead deployment from its checkpoint through the deploy path with a new lease after an
exponential back-off, and after `max_restarts` restarts within `window_minutes` stops trying, marks the
deployment failed and fails the run with the app's last error (a fresh deploy resets the budget). The task
log and the return value report lag (offsets behind latest), input/processing rates, the last batch time
and restarts per deployment. A scheduled short run rather than a deferrable sensor: restarting needs a
worker anyway, every pass is independent and idempotent, and a one-minute cadence bounds detection time
without holding a slot or triggerer state between passes. See docs/operations.md.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

from revenue_platform.connections import KAFKA_CONN_ID, SPARK_CONN_ID
from revenue_platform.dag_defaults import actor_from_context, platform_default_args


@dag(
    schedule="* * * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    # Passes must not overlap: two supervisors could both decide to restart the same deployment.
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=30),
    doc_md=__doc__,
    tags=["streaming", "deployment", "supervision"],
    default_args={
        # The next pass is a minute away; a retry would only overlap with it.
        **platform_default_args(retries=0),
        "execution_timeout": timedelta(minutes=25),
    },
    params={
        "deployment_ids": Param(
            [], type="array", items={"type": "string"}, description="Only these deployments; empty = all."
        ),
        "max_restarts": Param(
            3, type="integer", minimum=0, description="Restarts allowed within the window."
        ),
        "window_minutes": Param(10, type="number", minimum=1, description="Restart budget window."),
        "backoff_base_s": Param(
            30, type="number", minimum=0, description="Back-off after a restart; doubles per further restart."
        ),
        "heartbeat_stale_s": Param(
            60, type="number", minimum=10, description="A driver heartbeat older than this means dead."
        ),
        "start_timeout_s": Param(180, type="integer", minimum=10, description="Wait for a restarted driver."),
    },
)
def supervise_streaming_apps() -> None:
    @task(multiple_outputs=False)
    def supervise() -> dict[str, Any]:
        from revenue_platform.kafka_connection import client_security_from_airflow
        from revenue_platform.registry import DeploymentRegistry
        from revenue_platform.streaming.launcher import spark_target_from_connection
        from revenue_platform.streaming.supervisor import RestartPolicy
        from revenue_platform.streaming.supervisor import supervise as supervise_deployments
        from revenue_platform.trigger_conf import refuse_unknown_conf

        context = get_current_context()
        refuse_unknown_conf(context)
        params = context["params"]
        policy = RestartPolicy(
            max_restarts=int(params["max_restarts"]),
            window_s=float(params["window_minutes"]) * 60,
            backoff_base_s=float(params["backoff_base_s"]),
            heartbeat_stale_s=float(params["heartbeat_stale_s"]),
            start_timeout_s=float(params["start_timeout_s"]),
        )
        return supervise_deployments(
            DeploymentRegistry(),
            spark_target_from_connection(SPARK_CONN_ID),
            policy,
            actor=actor_from_context(context),
            deployment_ids=params["deployment_ids"],
            # Restarted drivers authenticate with the kafka_default connection's credentials.
            kafka_security=client_security_from_airflow(KAFKA_CONN_ID),
        )

    supervise()


supervise_streaming_apps()
