"""A deployment's gold table as the bench measures it: windows, orders and exact cents, and the times
its commits became visible (live latency ends there)."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deltalake import DeltaTable


def _gold_table(lake_root: str, deployment_id: str) -> DeltaTable:
    """The deployment's gold table; the benchmark measures runs that wrote it, so it must exist."""
    from revenue_platform.gold_table import open_gold
    from spark_apps.contract.naming import DeploymentNames

    table_path = DeploymentNames(lake_root, deployment_id).gold_revenue_table
    table = open_gold(table_path)
    if table is None:
        raise FileNotFoundError(f"no gold table at {table_path}: the benchmarked app wrote nothing")
    return table


def gold_stats(lake_root: str, deployment_id: str) -> dict[str, Any]:
    """Gold's windows, Σ order_count and Σ revenue in cents (exact: DECIMAL read as Decimal)."""
    from spark_apps.contract.delta_reads import read_delta

    table = _gold_table(lake_root, deployment_id)
    # delta-rs's own reader: a pyarrow dataset over a table on the object store may abort the
    # process at exit (docs/object-store.md, "Reading with delta-rs").
    columns = read_delta(table, ["order_count", "revenue"], [])
    counts = columns.column("order_count").to_pylist()
    revenue = sum(
        (amount for amount in columns.column("revenue").to_pylist() if amount is not None), Decimal(0)
    )
    return {
        "rows": len(counts),
        "orders_counted": sum(counts),
        "revenue_cents": int(revenue * 100),
        "version": table.version(),
    }


def gold_commit_times_ms(lake_root: str, deployment_id: str) -> list[int]:
    return sorted(int(entry["timestamp"]) for entry in _gold_table(lake_root, deployment_id).history())
