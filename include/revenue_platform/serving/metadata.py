"""`/v1/metadata/all`: the registry's deployments, the live pointer, and each deployment's lag.

Lag comes from the progress JSON the app's StreamingQueryListener publishes under
`DeploymentNames.progress_dir` (spark_apps/engine/observability.py): reading one small file per
deployment is bounded and cheap, while asking Kafka for end offsets on every request is not.
The heartbeat is the driver's (`serving.driver_status`), rewritten every few seconds even while
no batch has data; the progress file's own time only moves when a batch ran.

Server paths (the gold table, the progress and driver status files) are in the answer only when
the caller says so (`show_paths`): the API shows them to admins alone (docs/security.md, "What the
query API shows"); every other user gets null there.
"""

from __future__ import annotations

import logging

from revenue_platform.lake_storage import read_side_file
from revenue_platform.paths import lake_root as default_lake_root
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry, RegistryError
from revenue_platform.serving.driver_status import driver_heartbeat
from revenue_platform.serving.gold import NoLiveDeploymentError
from revenue_platform.serving.models import DeploymentMetadata, Lag, Metadata
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, DeploymentNames

LOG = logging.getLogger(__name__)


def read_lag(names: DeploymentNames, show_paths: bool = False) -> Lag | None:
    """The revenue query's latest progress and the driver's heartbeat; None if the app wrote neither."""
    progress = read_side_file(names.progress_file(REVENUE_QUERY_ROLE)) or {}
    heartbeat = driver_heartbeat(names)
    if not progress and heartbeat is None:
        return None
    behind = progress.get("max_offsets_behind_latest")
    return Lag(
        offsets_behind_latest=int(behind) if behind is not None else None,
        last_batch_at=progress.get("batch_timestamp"),
        heartbeat_at=heartbeat,
        watermark=progress.get("watermark"),
        progress_file=names.progress_file(REVENUE_QUERY_ROLE) if show_paths else None,
        driver_status_file=names.driver_status_file if show_paths else None,
    )


def _deployment(record: DeploymentRecord, names: DeploymentNames, show_paths: bool) -> DeploymentMetadata:
    return DeploymentMetadata(
        deployment_id=record.deployment_id,
        colour=record.colour,
        app_version=record.app_version,
        is_live=record.is_live,
        desired_state=record.desired_state,
        observed_state=record.observed_state,
        registered_at=record.registered_at,
        updated_at=record.updated_at,
        gold_table=names.gold_revenue_table if show_paths else None,
        lag=read_lag(names, show_paths),
    )


def deployments_metadata(lake_root: str | None = None, *, show_paths: bool = False) -> Metadata:
    """Every registered deployment with its lag, and which one is live (None before the first switch);
    with the deployment's server paths when `show_paths`."""
    root = lake_root or default_lake_root()
    registry = DeploymentRegistry(root)
    try:
        records = registry.deployments()
    except RegistryError as error:
        LOG.warning("the deployment registry under %s is unreadable: %s", root, error)
        raise NoLiveDeploymentError(
            "the deployment registry is unreadable (the API server's log says why); an operator must "
            "repair it"
        ) from error
    live = [r.deployment_id for r in records if r.is_live]
    if len(live) > 1:
        raise NoLiveDeploymentError(f"more than one deployment is marked live in the registry: {live}")
    return Metadata(
        live_deployment_id=live[0] if live else None,
        deployments=[_deployment(r, DeploymentNames(root, r.deployment_id), show_paths) for r in records],
    )
