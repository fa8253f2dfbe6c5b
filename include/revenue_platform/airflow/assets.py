"""The platform's Airflow Assets, defined once so producers and consumers name them identically.

A DAG that changes a deployment's gold table (reprocessing, blue-green replay) lists
`revenue_gold_asset()` in a task's `outlets` and sets the event's extra to
`gold_asset_extra(deployment_id)`; `revenue_quality_checks` is scheduled on that asset and checks
the deployment named in the event.

`publish_app_version` lists `app_release_asset()` in its outlets (extra: version and config hash of
the registry's release row); `blue_green_replay` is scheduled on it and replays that release.
"""

from __future__ import annotations

from typing import Any, Final

from airflow.sdk import Asset

REVENUE_GOLD_ASSET_NAME: Final = "revenue_windows_gold"
# A logical URI (not a path): each deployment's table lives under its own lake root and folder
# (spark_apps.contract.naming.DeploymentNames.gold_revenue_table); the event extra says which one changed.
REVENUE_GOLD_ASSET_URI: Final = "revenue-platform://gold/revenue_windows"
DEPLOYMENT_EXTRA_KEY: Final = "deployment_id"
# The range a producer rewrote (gold_asset_extra(..., range_start=..., range_end=...)); the quality
# run the event triggers checks that range.
RANGE_START_KEY: Final = "range_start"
RANGE_END_KEY: Final = "range_end"
APP_RELEASE_ASSET_NAME: Final = "streaming_app_release"
APP_RELEASE_ASSET_URI: Final = "revenue-platform://releases/streaming_app"


def revenue_gold_asset() -> Asset:
    """The gold windowed-revenue tables (all deployments) as one Asset."""
    return Asset(name=REVENUE_GOLD_ASSET_NAME, uri=REVENUE_GOLD_ASSET_URI, group="revenue")


def gold_asset_extra(deployment_id: str, **details: Any) -> dict[str, Any]:
    """The asset event extra that tells consumers which deployment's gold table changed."""
    return {DEPLOYMENT_EXTRA_KEY: deployment_id, **details}


def app_release_asset() -> Asset:
    """A published version of the streaming app (the registry's releases table) as an Asset."""
    return Asset(name=APP_RELEASE_ASSET_NAME, uri=APP_RELEASE_ASSET_URI, group="releases")
