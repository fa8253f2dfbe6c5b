"""The `reprocess_revenue` DAG's tasks: one function per task (or operator callable), named like it.

Imports of the library are inside the functions: the DAG file imports this module at parse time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from revenue_platform.airflow.assets import gold_asset_extra, revenue_gold_asset
from revenue_platform.airflow.params import run_request
from revenue_platform.connections import KAFKA_CONN_ID


def plan_reprocessing(context: Mapping[str, Any]) -> dict[str, Any]:
    """The form's range, deployment and source resolved into the job's plan (XCom); a run with no
    live deployment yet (the hourly run at the first start of a stack) is skipped with the reason."""
    from airflow.sdk.exceptions import AirflowSkipException

    from revenue_platform.errors import NoLiveDeploymentYet
    from revenue_platform.registry import resolve_live_deployment
    from revenue_platform.reprocessing import ReprocessRequest, form_lake_root
    from revenue_platform.reprocessing import plan_reprocessing as plan

    # The form's fields checked first (as the Params do for the form), before anything is read.
    request = run_request(ReprocessRequest.from_params, context)
    # Confined before the registry under it is read for the live deployment.
    lake = form_lake_root(request)
    live = None if request.deployment_id else resolve_live_deployment(lake)
    try:
        return plan(request, context.get("data_interval_start"), context.get("data_interval_end"), live)
    except NoLiveDeploymentYet as nothing:
        raise AirflowSkipException(str(nothing)) from nothing


def job_secrets(context: Mapping[str, Any]) -> dict[str, str]:
    """`submit_reprocess_job`'s secret environment: the job's Kafka login and the object store's
    credentials, for spark-submit's environment only (neither a template field nor this process's)."""
    from revenue_platform.kafka_connection import client_security_environment
    from revenue_platform.reprocessing import object_store_credentials_environment

    plan = context["ti"].xcom_pull(task_ids="plan_reprocessing")
    return {
        **client_security_environment(KAFKA_CONN_ID),
        **object_store_credentials_environment(plan["lake_root"]),
    }


def summarize_reconciliation(context: Mapping[str, Any], plan: Mapping[str, Any]) -> dict[str, Any]:
    """The job's reconciliation report, and the gold asset's event naming the repaired range."""
    from revenue_platform.reprocessing import summarize_reconciliation as summarize

    summary = summarize(plan["report_path"])
    context["outlet_events"][revenue_gold_asset()].extra = gold_asset_extra(
        plan["deployment_id"], range_start=plan["range_start"], range_end=plan["range_end"]
    )
    return summary
