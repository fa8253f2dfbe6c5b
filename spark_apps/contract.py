"""The gold table's contract, stated once and importable without pyspark.

Streaming and batch (through spark_apps.schemas), quality (its frames and suites) and serving
(its Arrow schema) all build their view of gold from these names and types, so they cannot
drift apart. Money is exact: order amounts are DECIMAL(18,2); window revenue is DECIMAL(38,2),
wide enough that no sum of accepted orders can overflow (an order is at most
`validation.max_order_amount` < 10^16, and 10^16 x 2^63 orders < 10^36).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Final

MONEY_PRECISION: Final = 18
MONEY_SCALE: Final = 2
REVENUE_PRECISION: Final = 38

GENERAL: Final = "GENERAL"
RESTAURANT: Final = "RESTAURANT"
ORDER_TYPES: Final = (GENERAL, RESTAURANT)

GOLD_KEY_COLUMNS: Final = ("location_id", "order_type", "window_start")
# Column -> Delta type name (what `DeltaTable.schema()` reports), in table order.
GOLD_DELTA_TYPES: Final[dict[str, str]] = {
    "location_id": "string",
    "order_type": "string",
    "window_start": "timestamp",
    "window_end": "timestamp",
    "order_count": "long",
    "revenue": f"decimal({REVENUE_PRECISION},{MONEY_SCALE})",
    "address_line1": "string",
    "address_line2": "string",
    "city": "string",
    "state": "string",
    "zip": "string",
    "contact_num": "string",
    "batch_id": "long",
}


# THE dedupe rule, one for the streaming app, the batch reprocess and the quality checks: an order id
# counts once, as its first-arrived copy. Copies are ordered by the ingest micro-batch that archived
# them (bronze's `ingest_batch_id`; a copy not ingested yet comes last), then by Kafka timestamp,
# partition and offset. Why arrival and not event time: a stream can only ever count the copy it has
# seen, so "earliest orderedDateTime" would need retractions; arrival is what all three can see. The
# horizon: the stream forgets an order id once its watermark passes the first copy's event time plus
# `window.watermark`; a copy arriving later still (a re-send hours after) is counted by the stream
# and repaired away by a reprocess whose range holds both copies (docs/streaming-app.md).
ARRIVAL_ORDER: Final = ("ingest_batch_id", "timestamp", "partition", "offset")


@dataclass(frozen=True)
class OrderRules:
    """Plausibility bounds of an otherwise well-formed order (config: `validation.*`).

    Event time is untrusted input: one order dated 2099 would move the watermark to 2099 and
    every later order would be dropped as late. An order may be ahead of its Kafka record's
    timestamp by at most `max_future_skew_s` (clock skew between producer and broker); older
    orders stay valid (late data and backfills are real). Amounts are bounded per order so a
    single absurd order cannot dominate (or, unbounded, overflow) a window.
    """

    max_future_skew_s: int = 300
    max_order_amount: Decimal = Decimal("1000000.00")
