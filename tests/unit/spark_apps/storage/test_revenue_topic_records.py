"""The driver writes the revenue topic's records itself; they are the ones Spark's sink wrote."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from pyspark.sql import SparkSession

from spark_apps.revenue.windows import to_revenue_kafka_records
from spark_apps.storage.revenue_topic import revenue_record
from spark_apps.validation.schemas import GOLD_SCHEMA

T0 = datetime(2026, 11, 22, 9, 0, 15, tzinfo=UTC)
ROWS: list[tuple[Any, ...]] = [
    (
        "store_1",
        "GENERAL",
        T0,
        datetime(2026, 11, 22, 9, 0, 30, tzinfo=UTC),
        3,
        Decimal("27.00"),
        "1 Main St",
        "",
        "Springfield",
        "IL",
        "62701",
        "555-0100",
        7,
    ),
    # No address (a store the stores topic lacks), no revenue, and a quote and non-ASCII in the id.
    (
        'store "ü"',
        "RESTAURANT",
        T0,
        datetime(2026, 11, 22, 9, 0, 30, tzinfo=UTC),
        1,
        Decimal(0).scaleb(-2),
        None,
        None,
        None,
        None,
        None,
        None,
        0,
    ),
    (
        "store_2",
        "GENERAL",
        datetime(1999, 12, 31, 23, 59, 45, tzinfo=UTC),
        datetime(2000, 1, 1, tzinfo=UTC),
        2**40,
        Decimal("999999999999999999999999999999999999.99"),
        "Zürich Straße 1",
        "\\n",
        "Ünïcode",
        "ZH",
        "8000",
        "+41",
        2**40,
    ),
    # Bounds with microseconds (milliseconds are written, truncated), one naive (read as UTC), money
    # of scale 0 and 1, and control characters, a backslash and a quote in the texts.
    (
        "store\t3",
        "GENERAL",
        datetime(2026, 11, 22, 9, 0, 15, 999_999, tzinfo=UTC),
        datetime(2026, 11, 22, 9, 0, 30, 1_500),
        4,
        Decimal("5"),
        'line "1"\x01',
        "\u2028",
        "back\\slash",
        "\x7f",
        "\r\n",
        "",
        1,
    ),
    (
        "store_4",
        "RESTAURANT",
        datetime(2026, 11, 22, 9, 0, 15, 1_000, tzinfo=UTC),
        datetime(2026, 11, 22, 9, 0, 30, 999, tzinfo=UTC),
        1,
        Decimal("1.5"),
        *(None,) * 6,  # no address
        2,
    ),
]


def test_the_drivers_records_are_sparks_byte_for_byte(spark: SparkSession) -> None:
    spark_records = {
        bytes(r["key"]) if isinstance(r["key"], bytearray) else r["key"].encode(): r["value"].encode()
        if isinstance(r["value"], str)
        else bytes(r["value"])
        for r in to_revenue_kafka_records(spark.createDataFrame(ROWS, GOLD_SCHEMA)).collect()
    }
    assert dict(revenue_record(row) for row in ROWS) == spark_records


def test_a_fenced_producer_is_a_lost_lease_whichever_call_reports_it() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from spark_apps.contract.fencing import LeaseRejectedError
    from spark_apps.storage.revenue_topic import fenced_error

    # What poll() raised for a fenced producer's failed send (seen in a real run).
    fatal = KafkaException(
        KafkaError(KafkaError._FENCED, "transactional producer fenced by newer producer", fatal=True)
    )
    refused = fenced_error(fatal, "orders-revenue-blue-revenue-topic", "write a transaction")
    assert isinstance(refused, LeaseRejectedError)
    assert "fenced by a newer driver" in str(refused)
    assert fenced_error(KafkaException(KafkaError(KafkaError.PRODUCER_FENCED)), "t", "commit") is not None
    assert fenced_error(KafkaException(KafkaError(KafkaError._TIMED_OUT)), "t", "commit") is None
    # Later sends only say "fatal": the cause is the fatal error the producer reported before.
    later = KafkaException(KafkaError(KafkaError._FATAL, "Unable to produce message: Local: Fatal error"))
    assert fenced_error(later, "t", "produce", fatal_cause=fatal.args[0]) is not None
    assert fenced_error(later, "t", "produce", fatal_cause=None) is None
    assert fenced_error(RuntimeError("x"), "t", "commit") is None
