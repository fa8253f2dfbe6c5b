"""The streaming DAGs' tasks (`deploy_streaming_app`, `supervise_streaming_apps`,
`stop_streaming_app`): one function per task, named like it, taking the task's Airflow context.

Each reads its run through the form's request model (`params.run_request`), the connections it
needs, and who acts (the audit actor), then calls the library's step of the same name. Imports of
the library are inside the functions: DAG files import this module at parse time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from revenue_platform.airflow.dag_defaults import actor_from_context
from revenue_platform.airflow.params import run_request
from revenue_platform.connections import KAFKA_CONN_ID, SPARK_CONN_ID
from revenue_platform.kafka_connection import optional_bootstrap_servers, optional_client_config


def validate_deploy_request(context: Mapping[str, Any]) -> dict[str, Any]:
    """`deploy_streaming_app.validate_request`: the form and the config it asks for, checked with the
    app's own loader before anything is touched; the request (XCom) `deploy` reads."""
    from revenue_platform.kafka_connection import client_security_from_connection
    from revenue_platform.registry import DeploymentRegistry, registry_lake_root
    from revenue_platform.streaming.deploy import config_document, resolve_config
    from revenue_platform.streaming.request import DeployRequest

    request = run_request(DeployRequest.from_params, context)
    config = resolve_config(
        request,
        registry_lake_root(),
        optional_bootstrap_servers(KAFKA_CONN_ID),
        DeploymentRegistry(registry_lake_root()),
    )
    # Checked before anything is touched; the credentials themselves are read again by `deploy`.
    client_security_from_connection(KAFKA_CONN_ID)
    document, digest = config_document(config)
    print(f"[deploy] config {digest[:12]} of {request.deployment_id} is valid:\n{document}")
    return request.to_dict()


def deploy(context: Mapping[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """`deploy_streaming_app.deploy`: register, lease and launch the validated request's deployment."""
    from revenue_platform.kafka_connection import client_security_from_connection
    from revenue_platform.registry import DeploymentRegistry
    from revenue_platform.streaming.deploy import deploy as deploy_deployment
    from revenue_platform.streaming.launcher import spark_target_from_connection
    from revenue_platform.streaming.request import DeployRequest

    return deploy_deployment(
        DeployRequest(**request),
        spark_target_from_connection(SPARK_CONN_ID),
        DeploymentRegistry(),
        actor=actor_from_context(context),
        kafka_bootstrap=optional_bootstrap_servers(KAFKA_CONN_ID),
        kafka_client_config=optional_client_config(KAFKA_CONN_ID),
        kafka_security=client_security_from_connection(KAFKA_CONN_ID),
    )


def supervise(context: Mapping[str, Any]) -> dict[str, Any]:
    """`supervise_streaming_apps.supervise`: one pass over the deployments, restarts bounded by the
    form's policy."""
    from revenue_platform.kafka_connection import client_security_from_connection
    from revenue_platform.registry import DeploymentRegistry
    from revenue_platform.streaming.launcher import spark_target_from_connection
    from revenue_platform.streaming.request import SuperviseRequest
    from revenue_platform.streaming.supervisor import RestartPolicy
    from revenue_platform.streaming.supervisor import supervise as supervise_deployments

    form = run_request(SuperviseRequest.from_params, context)
    policy = RestartPolicy(
        max_restarts=form.max_restarts,
        window_s=form.window_s,
        backoff_base_s=form.backoff_base_s,
        heartbeat_stale_s=form.heartbeat_stale_s,
        start_timeout_s=form.start_timeout_s,
    )
    return supervise_deployments(
        DeploymentRegistry(),
        spark_target_from_connection(SPARK_CONN_ID),
        policy,
        actor=actor_from_context(context),
        deployment_ids=form.deployment_ids,
        # Restarted drivers authenticate with the kafka_default connection's credentials.
        kafka_security=client_security_from_connection(KAFKA_CONN_ID),
    )


def stop(context: Mapping[str, Any]) -> dict[str, Any]:
    """`stop_streaming_app.stop`: stop the deployment's driver gracefully (killed after the budget)."""
    from revenue_platform.registry import DeploymentRegistry
    from revenue_platform.streaming.request import StopRequest
    from revenue_platform.streaming.stop import stop_deployment

    request = run_request(StopRequest.from_params, context)
    return stop_deployment(
        DeploymentRegistry(),
        request.deployment_id,
        float(request.timeout_s),
        actor=actor_from_context(context),
        reason="stop_streaming_app",
    )
