"""The store table view of the compacted `stores` topic and revenue enrichment."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual, assertSchemaEqual

from spark_apps.revenue.stores import MAX_STORE_RECORD_BYTES, enrich_with_stores, latest_stores
from spark_apps.storage.tables import local_table
from spark_apps.validation.schemas import ENRICHED_REVENUE_SCHEMA, REVENUE_WINDOW_SCHEMA, STORE_SCHEMA


def store_value(location_id: str, city: str, contact: str = "1234567890") -> bytes:
    return json.dumps(
        {
            "locationId": location_id,
            "address": {
                "addressLine1": "1234 Street 1",
                "addressLine2": "",
                "city": city,
                "state": "State1",
                "zip": "12345",
            },
            "contactNum": contact,
        }
    ).encode()


def store(key: str, value: bytes | None, offset: int, partition: int = 0, second: int = 0) -> dict[str, Any]:
    return {
        "key": key.encode(),
        "value": value,
        "topic": "stores",
        "partition": partition,
        "offset": offset,
        "timestamp": datetime(2022, 12, 5, 8, 0, second),
    }


def test_latest_value_per_key_wins(spark: SparkSession, kafka_df: Any) -> None:
    raw = kafka_df(
        [
            store("store_1", store_value("store_1", "Old City"), offset=0, second=30),
            # Same partition: the higher offset wins even with an older producer timestamp.
            store("store_1", store_value("store_1", "New City"), offset=1, second=10),
            store("store_2", store_value("store_2", "City2", contact="555"), offset=2),
        ]
    )
    stores = latest_stores(raw)

    assertSchemaEqual(stores.schema, STORE_SCHEMA)
    assertDataFrameEqual(
        stores,
        spark.createDataFrame(
            [
                ("store_1", "1234 Street 1", "", "New City", "State1", "12345", "1234567890"),
                ("store_2", "1234 Street 1", "", "City2", "State1", "12345", "555"),
            ],
            STORE_SCHEMA,
        ),
    )


def test_a_store_record_over_the_size_bound_is_ignored(kafka_df: Any) -> None:
    """A 1.01 MB address would go into every revenue record of its store, each then over the Kafka
    clients' 1,000,000-byte limit: the record is ignored and the store keeps its previous address."""
    huge = store_value("store_1", "x" * 1_010_000)
    # A one-letter city, grown until key + value are exactly the bound.
    long_city = "y" * (MAX_STORE_RECORD_BYTES - len(store_value("store_2", "y")) - len(b"store_2") + 1)
    at_bound = store_value("store_2", long_city)
    raw = kafka_df(
        [
            store("store_1", store_value("store_1", "Old City"), offset=0),
            store("store_1", huge, offset=1),
            store("store_2", at_bound, offset=2),
            store("store_3", store_value("store_3", "z" * MAX_STORE_RECORD_BYTES), offset=3),
        ]
    )
    cities = {r["location_id"]: r["city"] for r in latest_stores(raw).collect()}
    assert len(at_bound) + len(b"store_2") == MAX_STORE_RECORD_BYTES
    assert cities == {"store_1": "Old City", "store_2": long_city}


def test_tombstone_deletes_store(kafka_df: Any) -> None:
    raw = kafka_df(
        [
            store("store_1", store_value("store_1", "City1"), offset=0),
            store("store_1", None, offset=1),  # tombstone
            store("store_2", None, offset=2),  # tombstone first ...
            store("store_2", store_value("store_2", "Reopened"), offset=3),  # ... then re-created
        ]
    )
    assert [(r["location_id"], r["city"]) for r in latest_stores(raw).collect()] == [("store_2", "Reopened")]


def test_across_partitions_latest_timestamp_wins(kafka_df: Any) -> None:
    raw = kafka_df(
        [
            store("store_1", store_value("store_1", "Newer"), offset=0, partition=0, second=20),
            store("store_1", store_value("store_1", "Older"), offset=5, partition=1, second=10),
        ]
    )
    assert [r["city"] for r in latest_stores(raw).collect()] == ["Newer"]


def test_enrich_unknown_store_keeps_row_with_null_address(spark: SparkSession) -> None:
    window = (datetime(2022, 12, 5, 8, 55, 15), datetime(2022, 12, 5, 8, 55, 30))
    revenue = spark.createDataFrame(
        [
            ("store_1", "GENERAL", *window, 2, Decimal("12.50")),
            ("store_404", "RESTAURANT", *window, 1, Decimal("3.00")),
        ],
        REVENUE_WINDOW_SCHEMA,
    )
    stores = spark.createDataFrame(
        [("store_1", "1234 Street 1", "", "City1", "State1", "12345", "1234567890")], STORE_SCHEMA
    )

    enriched = enrich_with_stores(revenue, stores)
    assertSchemaEqual(enriched.schema, ENRICHED_REVENUE_SCHEMA)
    assertDataFrameEqual(
        enriched,
        spark.createDataFrame(
            [
                (
                    "store_1",
                    "GENERAL",
                    *window,
                    2,
                    Decimal("12.50"),
                    "1234 Street 1",
                    "",
                    "City1",
                    "State1",
                    "12345",
                    "1234567890",
                ),
                ("store_404", "RESTAURANT", *window, 1, Decimal("3.00"), None, None, None, None, None, None),
            ],
            ENRICHED_REVENUE_SCHEMA,
        ),
    )


def test_the_stores_table_is_a_local_relation_broadcast_without_a_job(spark: SparkSession) -> None:
    rows = [("loc-1", "1 Main St", None, "Springfield", "IL", "62701", "555"), ("loc-2", *[None] * 6)]
    table = local_table(spark, rows, STORE_SCHEMA)

    # A local relation: joining it broadcasts rows the driver already holds (no Spark job per batch).
    assert table._jdf.queryExecution().optimizedPlan().getClass().getSimpleName() == "LocalRelation"
    assertSchemaEqual(table.schema, STORE_SCHEMA)
    assert sorted(tuple(row) for row in table.collect()) == sorted(rows)
    empty = local_table(spark, [], STORE_SCHEMA)
    assert empty.count() == 0
    assertSchemaEqual(empty.schema, STORE_SCHEMA)
