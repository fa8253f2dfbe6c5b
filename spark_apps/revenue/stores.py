"""Store data for revenue rows: the table view of the compacted `stores` topic (latest record per
location, tombstones dropped) and the join that adds store addresses to window rows.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_apps.contract.records import STORE_ADDRESS_COLUMNS
from spark_apps.validation.orders import record_bytes
from spark_apps.validation.schemas import STORE_VALUE_SCHEMA

MAX_STORE_RECORD_BYTES = 16_384
"""A store record (key + value) larger than this is ignored, as if never sent: its address would go
into every gold row and revenue record of the store, and one record over the Kafka clients' limit
(1,000,000 bytes) fails every batch that writes it. A real store record is ~250 bytes."""


# --------------------------------------------------------------------------------------------
# Stores
# --------------------------------------------------------------------------------------------
def latest_stores(stores_raw: DataFrame) -> DataFrame:
    """Table view of the compacted ``stores`` topic (batch semantics).

    Latest record per key: highest offset within a partition (Kafka's order for a key),
    and across partitions (only after re-partitioning) the latest Kafka timestamp. Keys
    whose latest record is a tombstone (null or empty value) are dropped. A record over
    ``MAX_STORE_RECORD_BYTES`` is ignored (the store keeps its previous record while the topic
    holds it; compaction removes it, the oversized record being newer). Returns
    ``STORE_SCHEMA``; the key is the location id, a malformed value gives null fields.
    """
    size = record_bytes(F.col("key"), F.col("value"))
    keyed = stores_raw.filter(F.col("key").isNotNull() & (size <= MAX_STORE_RECORD_BYTES))
    per_partition = keyed.groupBy("key", "partition").agg(
        F.max_by(F.struct("timestamp", "value"), "offset").alias("latest")
    )
    per_key = per_partition.groupBy("key").agg(
        F.max_by(F.col("latest.value"), F.struct(F.col("latest.timestamp"), F.col("partition"))).alias(
            "value"
        )
    )
    live = per_key.filter(F.col("value").isNotNull() & (F.length("value") > 0))
    parsed = F.from_json(F.col("value").cast("string"), STORE_VALUE_SCHEMA)
    return live.select(F.col("key").cast("string").alias("location_id"), parsed.alias("store")).select(
        "location_id",
        F.col("store.address.addressLine1").alias("address_line1"),
        F.col("store.address.addressLine2").alias("address_line2"),
        F.col("store.address.city").alias("city"),
        F.col("store.address.state").alias("state"),
        F.col("store.address.zip").alias("zip"),
        F.col("store.contactNum").alias("contact_num"),
    )


def enrich_with_stores(revenue: DataFrame, stores: DataFrame) -> DataFrame:
    """Left-join store address columns onto revenue rows; unknown stores give nulls."""
    # The store table is small (one row per location): broadcasting avoids a shuffle
    # and keeps the stream-static join cheap.
    store_columns = F.broadcast(stores.select("location_id", *STORE_ADDRESS_COLUMNS))
    joined = revenue.join(store_columns, on="location_id", how="left")
    return joined.select(*revenue.columns, *STORE_ADDRESS_COLUMNS)
