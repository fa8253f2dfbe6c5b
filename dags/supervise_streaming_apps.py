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

from airflow.sdk import dag, get_current_context, task

from revenue_platform.airflow import streaming_tasks
from revenue_platform.airflow.dag_defaults import platform_default_args
from revenue_platform.airflow.params import params_from_model
from revenue_platform.errors import ConfigError
from revenue_platform.kafka_connection import KafkaConnectionConfigError
from revenue_platform.streaming.request import SuperviseRequest
from revenue_platform.streaming.supervisor import GaveUpError


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
        # One quick retry: a pass that dies before its code runs (its worker's calls to Airflow's API time
        # out while a freshly started SQLite stack is busy, seen in CI) would otherwise leave a red run.
        # Passes are idempotent and max_active_runs=1 keeps the retry from overlapping the next pass.
        # Giving up on a deployment or a bad form fails at once: a retry would repeat it.
        **platform_default_args(
            timedelta(seconds=10),
            non_retryable=(GaveUpError, ConfigError, KafkaConnectionConfigError),
        ),
        "execution_timeout": timedelta(minutes=25),
    },
    params=params_from_model(SuperviseRequest),
)
def supervise_streaming_apps() -> None:
    @task(multiple_outputs=False)
    def supervise() -> dict[str, Any]:
        return streaming_tasks.supervise(get_current_context())

    supervise()


supervise_streaming_apps()
