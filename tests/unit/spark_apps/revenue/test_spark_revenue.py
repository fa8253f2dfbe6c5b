"""Windowed revenue and the Kafka shapes of orders and revenue."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual, assertSchemaEqual

from spark_apps.revenue.windows import revenue_window_key, to_revenue_kafka_records, windowed_revenue
from spark_apps.validation.routing import to_kafka_records
from spark_apps.validation.schemas import KAFKA_SINK_SCHEMA, ORDER_SCHEMA, REVENUE_TYPE, REVENUE_WINDOW_SCHEMA

OrderTuple = tuple[int, str, str, str, str]  # order_id, location_id, amount text, order_type, HH:MM:SS
OrdersFactory = Callable[[list[OrderTuple]], DataFrame]


def at(hms: str) -> datetime:
    """A timestamp on the demo day (2022-12-05, UTC)."""
    return datetime.fromisoformat(f"2022-12-05T{hms}")


@pytest.fixture(scope="module")
def orders(spark: SparkSession) -> OrdersFactory:
    """Typed valid orders from compact tuples; amounts given as text to stay exact."""

    def build(rows: list[OrderTuple]) -> DataFrame:
        return spark.createDataFrame(
            [(oid, loc, Decimal(amount), otype, None, at(hms)) for oid, loc, amount, otype, hms in rows],
            ORDER_SCHEMA,
        )

    return build


def test_tumbling_15_second_windows(spark: SparkSession, orders: OrdersFactory) -> None:
    df = orders(
        [
            (1, "store_1", "10.00", "GENERAL", "08:55:01"),
            (2, "store_1", "2.50", "GENERAL", "08:55:14"),
            (3, "store_1", "1.00", "GENERAL", "08:55:15"),  # window end is exclusive
            (4, "store_1", "7.00", "RESTAURANT", "08:55:05"),
            (5, "store_2", "3.00", "GENERAL", "08:55:05"),
        ]
    )
    revenue = windowed_revenue(df, "15 seconds", watermark="1 minute")

    assertSchemaEqual(revenue.schema, REVENUE_WINDOW_SCHEMA)
    assertDataFrameEqual(
        revenue,
        spark.createDataFrame(
            [
                ("store_1", "GENERAL", at("08:55:00"), at("08:55:15"), 2, Decimal("12.50")),
                ("store_1", "GENERAL", at("08:55:15"), at("08:55:30"), 1, Decimal("1.00")),
                ("store_1", "RESTAURANT", at("08:55:00"), at("08:55:15"), 1, Decimal("7.00")),
                ("store_2", "GENERAL", at("08:55:00"), at("08:55:15"), 1, Decimal("3.00")),
            ],
            REVENUE_WINDOW_SCHEMA,
        ),
    )


def test_slide_equal_to_size_is_tumbling(spark: SparkSession, orders: OrdersFactory) -> None:
    df = orders([(1, "store_1", "10.00", "GENERAL", "08:55:07")])
    assertDataFrameEqual(
        windowed_revenue(df, "15 seconds", slide="15 seconds"),
        spark.createDataFrame(
            [("store_1", "GENERAL", at("08:55:00"), at("08:55:15"), 1, Decimal("10.00"))],
            REVENUE_WINDOW_SCHEMA,
        ),
    )


def test_hopping_10_second_windows_sliding_every_5(spark: SparkSession, orders: OrdersFactory) -> None:
    df = orders(
        [
            (1, "store_1", "1.10", "GENERAL", "08:55:07"),  # in [00,10) and [05,15)
            (2, "store_1", "2.20", "GENERAL", "08:55:12"),  # in [05,15) and [10,20)
        ]
    )
    assertDataFrameEqual(
        windowed_revenue(df, "10 seconds", slide="5 seconds"),
        spark.createDataFrame(
            [
                ("store_1", "GENERAL", at("08:55:00"), at("08:55:10"), 1, Decimal("1.10")),
                ("store_1", "GENERAL", at("08:55:05"), at("08:55:15"), 2, Decimal("3.30")),
                ("store_1", "GENERAL", at("08:55:10"), at("08:55:20"), 1, Decimal("2.20")),
            ],
            REVENUE_WINDOW_SCHEMA,
        ),
    )


def test_revenue_sum_is_exact_decimal(orders: OrdersFactory) -> None:
    df = orders(
        [
            (1, "store_1", "0.10", "GENERAL", "08:55:01"),
            (2, "store_1", "0.20", "GENERAL", "08:55:02"),  # 0.1 + 0.2 != 0.3 in binary floating point
            *[(100 + i, "store_2", "19.99", "GENERAL", "08:55:03") for i in range(1000)],
            # Beyond double precision: any float detour loses the cents here.
            (3, "store_3", "1234567890123456.78", "GENERAL", "08:55:04"),
            (4, "store_3", "0.01", "GENERAL", "08:55:05"),
        ]
    )
    rows = {r["location_id"]: r for r in windowed_revenue(df, "15 seconds").collect()}

    assert rows["store_1"]["revenue"] == Decimal("0.30")
    assert rows["store_2"]["revenue"] == Decimal("19990.00")
    assert rows["store_2"]["order_count"] == 1000
    assert rows["store_3"]["revenue"] == Decimal("1234567890123456.79")
    assert windowed_revenue(df, "15 seconds").schema["revenue"].dataType == REVENUE_TYPE


def test_two_largest_orders_in_one_window_sum_exactly_without_overflow(orders: OrdersFactory) -> None:
    """Two orders of the largest DECIMAL(18,2) used to fail the batch with NUMERIC_VALUE_OUT_OF_RANGE
    (ANSI mode), on every restart: the sum is widened before adding, so it is exact instead."""
    largest = "9999999999999999.99"
    df = orders(
        [(1, "store_1", largest, "GENERAL", "08:55:01"), (2, "store_1", largest, "GENERAL", "08:55:02")]
    )
    [row] = windowed_revenue(df, "15 seconds").collect()
    assert (row["order_count"], row["revenue"]) == (2, Decimal("19999999999999999.98"))


def test_order_kafka_records_keep_money_exact(orders: OrdersFactory) -> None:
    df = orders([(12345, "store_1234", "27.00", "GENERAL", "08:55:27")])

    records = to_kafka_records(df, "location_id")
    assertSchemaEqual(records.schema, KAFKA_SINK_SCHEMA)
    (row,) = records.collect()
    assert row["key"] == "store_1234"
    assert '"final_amount":27.00' in row["value"]  # decimal text, not 27.0
    assert json.loads(row["value"], parse_float=Decimal) == {
        "order_id": 12345,
        "location_id": "store_1234",
        "final_amount": Decimal("27.00"),
        "order_type": "GENERAL",
        "order_line_items": None,
        "ordered_at": "2022-12-05T08:55:27.000Z",
    }


def test_revenue_window_key_format(spark: SparkSession) -> None:
    revenue = spark.createDataFrame(
        [("store_1234", "GENERAL", at("08:55:15"), at("08:55:30"), 3, Decimal("27.00"))],
        REVENUE_WINDOW_SCHEMA,
    )
    assert revenue.select(revenue_window_key(revenue)).first()[0] == "store_1234|GENERAL|2022-12-05T08:55:15Z"  # type: ignore[index]


def test_revenue_kafka_records(spark: SparkSession) -> None:
    revenue = spark.createDataFrame(
        [("store_1234", "RESTAURANT", at("08:55:15"), at("08:55:30"), 3, Decimal("0.30"))],
        REVENUE_WINDOW_SCHEMA,
    )
    (row,) = to_revenue_kafka_records(revenue).collect()

    assert row["key"] == "store_1234|RESTAURANT|2022-12-05T08:55:15Z"
    assert json.loads(row["value"], parse_float=Decimal) == {
        "location_id": "store_1234",
        "order_type": "RESTAURANT",
        "window_start": "2022-12-05T08:55:15.000Z",
        "window_end": "2022-12-05T08:55:30.000Z",
        "order_count": 3,
        "revenue": Decimal("0.30"),
    }
