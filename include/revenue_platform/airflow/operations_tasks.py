"""The operations DAGs' tasks: `maintain_lake`, `provision_topics`, `publish_app_version` and
`rollback_live_deployment`; one function per task, named like it, taking the task's Airflow context.

Imports of the library are inside the functions: DAG files import this module at parse time.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from revenue_platform.airflow.assets import app_release_asset
from revenue_platform.airflow.dag_defaults import actor_from_context
from revenue_platform.airflow.params import run_request
from revenue_platform.connections import KAFKA_CONN_ID

log = logging.getLogger(__name__)


def maintain(context: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`maintain_lake.maintain`: compact, checkpoint and vacuum the tables of the form's deployments
    (every registered one by default) under the form's policy."""
    from revenue_platform.lake_maintenance import MaintenanceRequest, reports_as_dicts
    from revenue_platform.lake_maintenance import maintain_lake as maintain_tables
    from revenue_platform.paths import lake_root
    from revenue_platform.registry import DeploymentRegistry

    form = run_request(MaintenanceRequest.from_params, context)
    registry = DeploymentRegistry()
    if form.deployment_id is not None:
        deployments = [registry.get(form.deployment_id).deployment_id]
    else:
        deployments = [record.deployment_id for record in registry.deployments()]
    reports = maintain_tables(lake_root(), deployments, form.policy, dry_run=form.dry_run, say=print)
    return reports_as_dicts(reports)


def load_spec(context: Mapping[str, Any]) -> dict[str, Any]:
    """`provision_topics.load_spec`: the shipped topic spec for the form's environment and topics."""
    from revenue_platform.topics.provision import load_spec_step
    from revenue_platform.topics.request import ProvisionRequest

    request = run_request(ProvisionRequest.from_params, context)
    return load_spec_step(
        environment=request.environment, topics=request.topics, allow_destructive=request.allow_destructive
    )


def describe_cluster(spec: Mapping[str, Any]) -> dict[str, Any]:
    """`provision_topics.describe_cluster`: what the broker of the Kafka connection holds now."""
    from revenue_platform.topics.provision import describe_cluster_step

    return describe_cluster_step(dict(spec), conn_id=KAFKA_CONN_ID)


def plan_changes(spec: Mapping[str, Any], cluster: Mapping[str, Any]) -> dict[str, Any]:
    """`provision_topics.plan_changes`: the changes that bring the cluster to the spec, logged."""
    from revenue_platform.topics.provision import plan_changes_step

    plan = plan_changes_step(dict(spec), dict(cluster))
    log.info("Plan for environment %r:\n%s", spec["environment"], plan.render())
    return plan.to_dict()


def apply_plan(context: Mapping[str, Any], plan: Mapping[str, Any]) -> dict[str, Any]:
    """`provision_topics.apply_plan`: the plan applied, unless the form asked for a dry run (skipped)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from revenue_platform.topics.provision import apply_plan_step

    if context["params"]["dry_run"]:
        raise AirflowSkipException("dry_run is set: the plan above was not applied")
    return apply_plan_step(dict(plan), conn_id=KAFKA_CONN_ID)


def record_release(context: Mapping[str, Any]) -> dict[str, Any]:
    """`publish_app_version.record_release`: an immutable release row, announced on the release asset
    (which starts its blue-green replay)."""
    from revenue_platform.bluegreen.release import publish, release_event_extra
    from revenue_platform.bluegreen.request import PublishRequest
    from revenue_platform.registry import DeploymentRegistry

    # First: a misspelled key (`config_overides`) must not publish an immutable version without it.
    request = run_request(PublishRequest.from_params, context)
    release = publish(
        DeploymentRegistry(),
        request.version,
        request.config_overrides,
        request.require_approval,
        request.notes,
        actor_from_context(context),
    )
    context["outlet_events"][app_release_asset()].extra = release_event_extra(release)
    return release


def rollback(context: Mapping[str, Any]) -> dict[str, Any]:
    """`rollback_live_deployment.rollback`: live back to the form's target (default: the previous)."""
    from revenue_platform.bluegreen.replay import rollback as roll_back
    from revenue_platform.bluegreen.request import RollbackRequest
    from revenue_platform.registry import DeploymentRegistry

    request = run_request(RollbackRequest.from_params, context)
    return roll_back(
        DeploymentRegistry(), request.target_deployment_id, request.reason, actor_from_context(context)
    )
