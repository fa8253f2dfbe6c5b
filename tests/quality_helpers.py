"""Tiny, exact gold and bronze tables for the revenue quality checks, written with delta-rs.

`Scenario` holds one hour of orders for two stores; `gold_rows` computes the correct gold windows
with plain Python and Decimal (15-second tumbling windows), `bronze_rows` the raw records as the
archive query writes them (one redelivered duplicate, one dead letter). Tests corrupt the row dicts
in exactly one way before writing them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from revenue_platform.gold_table import gold_arrow_schema
from revenue_platform.lake_storage import delta_storage_options
from revenue_platform.quality.report import CheckOutcome
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN, window_hour
from spark_apps.contract.naming import DeploymentNames
from spark_apps.contract.object_store import delta_rs_uri
from spark_apps.contract.records import GOLD_COLUMNS

INTERVAL_START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
INTERVAL_END = datetime(2026, 11, 22, 11, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=15)

_TS = pa.timestamp("us", tz="UTC")
GOLD_ARROW_SCHEMA = gold_arrow_schema(GOLD_COLUMNS)
BRONZE_ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", _TS),
        ("timestampType", pa.int32()),
        ("dlq_reason", pa.string()),
        ("ordered_at", _TS),
        ("ingest_date", pa.date32()),
    ]
)


@dataclass(frozen=True)
class Order:
    order_id: int
    location_id: str
    order_type: str
    amount: Decimal
    ordered_at: datetime


def scenario_orders() -> list[Order]:
    """Orders every 90 s through the interval (closed windows), plus a burst in its last 30 s (open)."""
    orders: list[Order] = []
    moments = [INTERVAL_START + timedelta(seconds=90 * i + 3) for i in range(40)]
    moments += [INTERVAL_END - timedelta(seconds=20), INTERVAL_END - timedelta(seconds=8)]
    for index, moment in enumerate(moments):
        for store in ("store_1", "store_2"):
            order_type = "GENERAL" if index % 2 == 0 else "RESTAURANT"
            amount = Decimal("0.10") + Decimal(index) + (Decimal("0.20") if store == "store_2" else 0)
            orders.append(Order(len(orders) + 1, store, order_type, amount, moment))
    return orders


def order_value(order: Order) -> bytes:
    return (
        json.dumps(
            {
                "orderId": order.order_id,
                "locationId": order.location_id,
                # Written as a JSON number literal with two decimals, as producers do.
                "finalAmount": "__AMOUNT__",
                "orderType": order.order_type,
                "orderLineItems": [{"item": "Bread", "count": 1, "amount": "__AMOUNT__"}],
                "orderedDateTime": order.ordered_at.strftime("%Y-%m-%dT%H:%M:%S"),
            }
        )
        .replace('"__AMOUNT__"', str(order.amount))
        .encode()
    )


def window_start_of(moment: datetime) -> datetime:
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % int(WINDOW.total_seconds()), tz=UTC)


def gold_rows(orders: list[Order]) -> list[dict[str, Any]]:
    windows: dict[tuple[str, str, datetime], list[Order]] = {}
    for order in orders:
        key = (order.location_id, order.order_type, window_start_of(order.ordered_at))
        windows.setdefault(key, []).append(order)
    return [
        {
            "location_id": location,
            "order_type": order_type,
            "window_start": start,
            "window_end": start + WINDOW,
            "order_count": len(members),
            "revenue": sum((o.amount for o in members), Decimal("0.00")),
            "address_line1": "1 Main St",
            "address_line2": "",
            "city": "Springfield",
            "state": "XX",
            "zip": "12345",
            "contact_num": "555-0100",
            "batch_id": 0,
        }
        for (location, order_type, start), members in sorted(windows.items())
    ]


def bronze_record(
    value: bytes | None,
    arrived: datetime,
    offset: int,
    *,
    dlq_reason: str | None,
    ordered_at: datetime | None,
) -> dict[str, Any]:
    return {
        "key": b"store",
        "value": value,
        "topic": "orders",
        "partition": offset % 2,
        "offset": offset,
        "timestamp": arrived,
        "timestampType": 0,
        "dlq_reason": dlq_reason,
        "ordered_at": ordered_at,
        "ingest_date": arrived.date(),
    }


def bronze_rows(orders: list[Order]) -> list[dict[str, Any]]:
    """Every order arriving 2 s after its event time, the first one redelivered, one dead letter."""
    rows = [
        bronze_record(
            order_value(o), o.ordered_at + timedelta(seconds=2), i, dlq_reason=None, ordered_at=o.ordered_at
        )
        for i, o in enumerate(orders)
    ]
    first = orders[0]
    rows.append(
        bronze_record(
            order_value(first),
            first.ordered_at + timedelta(seconds=4),
            len(rows),
            dlq_reason=None,
            ordered_at=first.ordered_at,
        )
    )
    rows.append(
        bronze_record(
            b"{not json",
            INTERVAL_START + timedelta(minutes=5),
            len(rows),
            dlq_reason="invalid_json",
            ordered_at=None,
        )
    )
    return rows


def write_tables(
    lake_root: Path | str,
    deployment_id: str,
    gold: list[dict[str, Any]],
    bronze: list[dict[str, Any]],
    gold_schema: pa.Schema = GOLD_ARROW_SCHEMA,
) -> DeploymentNames:
    """Gold and bronze of `deployment_id` under `lake_root`, local or on the object store; gold in the
    app's hourly layout (`spark_apps.contract.gold_layout`) when its rows have window starts."""
    names = DeploymentNames(str(lake_root), deployment_id)
    gold_table, bronze_table = names.gold_revenue_table, names.bronze_orders_table
    rows = pa.Table.from_pylist(gold, schema=gold_schema)
    partitions = None
    if "window_start" in gold_schema.names:
        hours = [
            None if start is None else window_hour(start if start.tzinfo else start.replace(tzinfo=UTC))
            for start in rows.column("window_start").to_pylist()
        ]
        rows = rows.append_column(pa.field(GOLD_HOUR_COLUMN, pa.string()), pa.array(hours, pa.string()))
        partitions = [GOLD_HOUR_COLUMN]
    write_deltalake(
        delta_rs_uri(gold_table),
        rows,
        mode="overwrite",
        partition_by=partitions,
        storage_options=delta_storage_options(gold_table) or None,
    )
    write_deltalake(
        delta_rs_uri(bronze_table),
        pa.Table.from_pylist(bronze, schema=BRONZE_ARROW_SCHEMA),
        mode="overwrite",
        partition_by=["ingest_date"],
        storage_options=delta_storage_options(bronze_table) or None,
    )
    return names


def closed_row(rows: list[dict[str, Any]], index: int = 3) -> dict[str, Any]:
    """A gold row of a window closed well inside the interval (reconciled)."""
    closed = [r for r in rows if r["window_end"] <= INTERVAL_END - timedelta(minutes=5)]
    return closed[index]


def open_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A gold row of a window not yet closed at the interval end (checked, not reconciled)."""
    return next(r for r in rows if r["window_end"] > INTERVAL_END - timedelta(seconds=30))


def check_outcome(check: str, success: bool, unexpected: int | None = None) -> CheckOutcome:
    """A quality check's outcome as a stored report holds it (a failure names one failing window)."""
    return CheckOutcome(
        dataset="gold_windows",
        suite="revenue_gold",
        check=check,
        expectation_type="expect_something",
        description=check,
        success=success,
        element_count=10,
        unexpected_count=unexpected,
        failing_keys=("store_1|GENERAL|2026-11-22T10:00:15",) if not success else (),
    )
