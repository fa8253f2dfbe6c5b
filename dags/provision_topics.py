"""
Provision the platform's Kafka topics from the declarative spec (`include/topics/topics.yaml`, or
`$TOPIC_SPEC_PATH`): `load_spec` validates it before any broker call, `describe_cluster` reads the
cluster through the `kafka_default` connection, `plan_changes` logs a per-topic plan (create,
increase_partitions, alter_configs, unchanged, refused) and `apply_plan` applies it unless `dry_run`.
Topics are never deleted; fewer partitions, a replication-factor change or dropping `compact` from
`cleanup.policy` is refused unless the topic is listed in `allow_destructive`; re-running is a no-op.
Preview with `airflow dags trigger provision_topics --conf '{"dry_run": true}'`; docs/topics.md has
the spec format, environments and params.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import dag, get_current_context, task

from revenue_platform.airflow import operations_tasks
from revenue_platform.airflow.dag_defaults import platform_default_args
from revenue_platform.airflow.params import params_from_model
from revenue_platform.errors import BrokerUnreachableError, ConfigError
from revenue_platform.kafka_connection import KafkaConnectionConfigError
from revenue_platform.topics.errors import DestructiveChangeRefused, TopicSpecError
from revenue_platform.topics.request import ProvisionRequest

# Retrying cannot fix a bad spec, a refused change, a missing connection, or a broker that did not
# answer through the library's own bounded retries (start it, fix the connection, then re-run).
# Anything else (e.g. a broker hiccup mid-apply) gets the one default retry; apply is idempotent.


@dag(
    schedule=None,
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["kafka", "provisioning"],
    default_args=platform_default_args(
        timedelta(seconds=30),
        non_retryable=(
            ConfigError,
            TopicSpecError,
            DestructiveChangeRefused,
            KafkaConnectionConfigError,
            BrokerUnreachableError,
        ),
    ),
    params=params_from_model(ProvisionRequest),
)
def provision_topics() -> None:
    @task(multiple_outputs=False)
    def load_spec() -> dict[str, Any]:
        return operations_tasks.load_spec(get_current_context())

    @task(multiple_outputs=False)
    def describe_cluster(spec: dict[str, Any]) -> dict[str, Any]:
        return operations_tasks.describe_cluster(spec)

    @task(multiple_outputs=False)
    def plan_changes(spec: dict[str, Any], cluster: dict[str, Any]) -> dict[str, Any]:
        return operations_tasks.plan_changes(spec, cluster)

    @task(multiple_outputs=False)
    def apply_plan(plan: dict[str, Any]) -> dict[str, Any]:
        return operations_tasks.apply_plan(get_current_context(), plan)

    # At parse time these are XComArgs standing in for the payload dicts, which the task
    # decorator's typing cannot express; Any keeps the wiring readable for mypy.
    spec: Any = load_spec()
    cluster: Any = describe_cluster(spec)
    plan: Any = plan_changes(spec, cluster)
    apply_plan(plan)


provision_topics()
