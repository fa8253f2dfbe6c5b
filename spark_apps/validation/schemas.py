"""Schemas shared by the streaming job, the batch jobs and the tests.

Every table and topic the Spark side reads or writes has its shape declared here
once, as a ``StructType`` built without a JVM (so importing this module is cheap)
plus a DDL string for ``createDataFrame``/``from_json``. Money is
``DECIMAL(18,2)`` per order and ``DECIMAL(38,2)`` per window sum — never float or
double — so sums of cents stay exact and cannot overflow. Input JSON keeps the
producers' camelCase names; every column the platform writes is snake_case.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN
from spark_apps.contract.records import (
    GOLD_BATCH_COLUMN,
    GOLD_DELTA_TYPES,
    GOLD_WINDOW_COLUMNS,
    LONG,
    MONEY_PRECISION,
    MONEY_SCALE,
    REVENUE_DELTA_TYPE,
    REVENUE_PRECISION,
    STORE_ADDRESS_COLUMNS,
    STRING,
    TIMESTAMP,
)

MONEY_TYPE = DecimalType(MONEY_PRECISION, MONEY_SCALE)
MONEY_DDL = f"DECIMAL({MONEY_PRECISION},{MONEY_SCALE})"
# Window sums: wide enough that no sum of accepted orders overflows (see spark_apps.contract.records).
REVENUE_TYPE = DecimalType(REVENUE_PRECISION, MONEY_SCALE)
REVENUE_DDL = f"DECIMAL({REVENUE_PRECISION},{MONEY_SCALE})"


def _field(name: str, data_type: DataType, nullable: bool = True) -> StructField:
    return StructField(name, data_type, nullable)


# Spark's type for each Delta type name the gold contract (spark_apps.contract.records) uses.
_SPARK_TYPES: dict[str, DataType] = {
    STRING: StringType(),
    TIMESTAMP: TimestampType(),
    LONG: LongType(),
    REVENUE_DELTA_TYPE: REVENUE_TYPE,
}


def _gold_field(name: str, nullable: bool = True) -> StructField:
    return _field(name, _SPARK_TYPES[GOLD_DELTA_TYPES[name]], nullable)


def to_ddl(schema: StructType) -> str:
    """Render a schema as a DDL string; names are back-quoted because Kafka's
    column names (``key``, ``offset``, ``partition``, ``timestamp``) clash with SQL keywords."""
    return ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)


# --- Kafka source rows (what spark.readStream.format("kafka") yields) -------------------------------
KAFKA_RAW_SCHEMA = StructType(
    [
        _field("key", BinaryType()),
        _field("value", BinaryType()),
        _field("topic", StringType()),
        _field("partition", IntegerType()),
        _field("offset", LongType()),
        _field("timestamp", TimestampType()),
        _field("timestampType", IntegerType()),
    ]
)
KAFKA_RAW_COLUMNS: tuple[str, ...] = tuple(KAFKA_RAW_SCHEMA.fieldNames())

# --- Kafka sink rows ------------------------------------------------------------------------------
KAFKA_HEADERS_TYPE = ArrayType(
    StructType([_field("key", StringType()), _field("value", BinaryType())]), containsNull=False
)
KAFKA_SINK_SCHEMA = StructType([_field("key", StringType()), _field("value", StringType())])
DLQ_KAFKA_SINK_SCHEMA = StructType(
    [_field("key", BinaryType()), _field("value", StringType()), _field("headers", KAFKA_HEADERS_TYPE)]
)

# --- parsed order (snake_case, typed) --------------------------------------------------------------
# A line item keeps the producers' field names (item, count, amount are already snake_case).
ORDER_LINE_ITEM_SCHEMA = StructType(
    [_field("item", StringType()), _field("count", IntegerType()), _field("amount", MONEY_TYPE)]
)
ORDER_SCHEMA = StructType(
    [
        _field("order_id", LongType()),
        _field("location_id", StringType()),
        _field("final_amount", MONEY_TYPE),
        _field("order_type", StringType()),
        _field("order_line_items", ArrayType(ORDER_LINE_ITEM_SCHEMA)),
        _field("ordered_at", TimestampType()),
    ]
)
ORDER_COLUMNS: tuple[str, ...] = tuple(ORDER_SCHEMA.fieldNames())

# What the validator's JVM fast path (spark_apps/jvm/order-validator, OrderFastPath) returns for a
# record it certifies: the typed order with the event time still as text (parsed in Spark, as on
# the exact path). The Java class builds its rows in exactly this field order.
ORDER_FAST_PATH_SCHEMA = StructType(
    [
        *(f for f in ORDER_SCHEMA.fields if f.name != "ordered_at"),
        _field("ordered_at_text", StringType()),
        _field("ordered_at_us", LongType()),
    ]
)

# Output of parse_and_validate_orders: the raw Kafka row, the typed order (all null when
# invalid) and the reason it was rejected (null when valid).
VALIDATED_ORDER_SCHEMA = StructType(
    [*KAFKA_RAW_SCHEMA.fields, *ORDER_SCHEMA.fields, _field("dlq_reason", StringType())]
)

# Output of valid_orders: the typed order plus where it came from (lineage for the silver table).
SOURCE_COLUMNS_SCHEMA = StructType(
    [
        _field("source_topic", StringType()),
        _field("source_partition", IntegerType()),
        _field("source_offset", LongType()),
        _field("source_timestamp", TimestampType()),
    ]
)
# The ingest batch that archived the record (null when read from Kafka before the app ingested it):
# the first key of the dedupe rule, spark_apps.contract.records.ARRIVAL_ORDER.
VALID_ORDER_SCHEMA = StructType(
    [*ORDER_SCHEMA.fields, *SOURCE_COLUMNS_SCHEMA.fields, _field("source_ingest_batch", LongType())]
)

# --- bronze: every consumed record, raw, with its validation outcome ---------------------------------
# The raw Kafka record (replay source beyond retention), the reason it was rejected (null when
# valid) and, for valid orders, the typed fields the revenue query needs: it streams from bronze,
# so no record is parsed twice. `ingest_batch_id` is the ingest micro-batch that appended the row.
BRONZE_ORDER_COLUMNS: tuple[str, ...] = (
    "order_id",
    "location_id",
    "final_amount",
    "order_type",
    "ordered_at",
)
BRONZE_SCHEMA = StructType(
    [
        *KAFKA_RAW_SCHEMA.fields,
        _field("dlq_reason", StringType()),
        *(f for f in ORDER_SCHEMA.fields if f.name in BRONZE_ORDER_COLUMNS),
        # True for a valid order that is not the first-arrived copy of its order id (see
        # spark_apps.contract.records.ARRIVAL_ORDER) among its ingest batch and the bronze commits the revenue
        # query had not read yet; the revenue query skips it. Null in rows written before it existed.
        _field("superseded", BooleanType()),
        _field("ingest_batch_id", LongType()),
        _field("ingest_date", DateType()),
    ]
)
BRONZE_COLUMNS: tuple[str, ...] = tuple(BRONZE_SCHEMA.fieldNames())

# --- dead letters ------------------------------------------------------------------------------
DLQ_RECORD_SCHEMA = StructType(
    [
        _field("original_key", BinaryType()),
        _field("original_value", BinaryType()),
        *SOURCE_COLUMNS_SCHEMA.fields,
        _field("dlq_reason", StringType()),
    ]
)

# --- stores topic (compacted) ------------------------------------------------------------------
STORE_VALUE_SCHEMA = StructType(
    [
        _field("locationId", StringType()),
        _field(
            "address",
            StructType(
                [
                    _field("addressLine1", StringType()),
                    _field("addressLine2", StringType()),
                    _field("city", StringType()),
                    _field("state", StringType()),
                    _field("zip", StringType()),
                ]
            ),
        ),
        _field("contactNum", StringType()),
    ]
)
STORE_SCHEMA = StructType(
    [_field("location_id", StringType()), *(_field(c, StringType()) for c in STORE_ADDRESS_COLUMNS)]
)

# --- gold: revenue per location, order type and event-time window -----------------------------
# order_count is count(), which Spark types as never null.
REVENUE_WINDOW_SCHEMA = StructType(
    [_gold_field(name, nullable=name != "order_count") for name in GOLD_WINDOW_COLUMNS]
)
ENRICHED_REVENUE_SCHEMA = StructType(
    [*REVENUE_WINDOW_SCHEMA.fields, *(f for f in STORE_SCHEMA.fields if f.name != "location_id")]
)

# The gold table: enriched window totals plus the micro-batch that last wrote the row.
GOLD_SCHEMA = StructType([*ENRICHED_REVENUE_SCHEMA.fields, _gold_field(GOLD_BATCH_COLUMN)])
# The gold table as created (`storage.gold.ensure_gold_table`): the contract's columns plus the
# layout's partition column (`contract.gold_layout`), which the writers fill in.
GOLD_TABLE_SCHEMA = StructType(
    [*GOLD_SCHEMA.fields, StructField(GOLD_HOUR_COLUMN, StringType(), nullable=False)]
)

ENRICHED_REVENUE_DDL = to_ddl(ENRICHED_REVENUE_SCHEMA)

# Rendering of timestamps in JSON values; XXX prints "Z" under a UTC session and a real
# offset otherwise, so the text is always a correct instant.
JSON_TIMESTAMP_PATTERN = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
# Nulls are written explicitly so every JSON value carries every field.
JSON_WRITE_OPTIONS = {"timestampFormat": JSON_TIMESTAMP_PATTERN, "ignoreNullFields": "false"}
