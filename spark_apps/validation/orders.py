"""Parse and validate raw Kafka order records: the order contract's checks as pure DataFrame
functions (the JVM fast path first, `exact_order_validation` the reference it may only agree with).

Each function takes DataFrames (and plain parameters) and returns a DataFrame or a Column; none reads
or writes anything, so the streaming app, the batch reprocessing job and the unit tests (tiny
in-memory DataFrames) run the same code. An invalid record gets a machine-readable `dlq_reason`
(routed by `validation.routing`); a valid one its typed order columns.

Callers must run with ``spark.sql.session.timeZone=UTC`` (``engine.session.required_spark_conf``):
parsing is zone-independent, but timestamps rendered as text use the session time zone.
"""

from __future__ import annotations

from typing import Final

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

from spark_apps.contract.records import MONEY_SCALE, ORDER_TYPES, REQUIRED_ORDER_FIELDS, DlqReason, OrderRules
from spark_apps.validation.schemas import (
    MONEY_DDL,
    ORDER_COLUMNS,
    ORDER_FAST_PATH_SCHEMA,
    ORDER_LINE_ITEM_SCHEMA,
)

# orderedDateTime is an ISO local date-time without zone, optionally with up to 6
# fractional digits. We append "Z" and parse with an explicit offset so the instant is
# UTC whatever the session time zone is.
ORDERED_AT_PATTERN: Final = "yyyy-MM-dd'T'HH:mm:ss[.SSSSSS]XXX"


DEFAULT_ORDER_RULES: Final = OrderRules()


# Type names as printed by schema_of_variant. JSON integer literals become integral
# types; decimal literals become DECIMAL(p,s) with trailing zeros stripped (27.00 ->
# DECIMAL(2,0)); exponent literals and >38-digit numbers become DOUBLE (rejected: not exact).
_INTEGER_TYPE_RE: Final = r"^(TINYINT|SMALLINT|INT|BIGINT)$"
_MONEY_TYPE_RE: Final = rf"^(TINYINT|SMALLINT|INT|BIGINT|DECIMAL\(\d+,[0-{MONEY_SCALE}]\))$"
# Jackson's non-standard number tokens; only accepted to report them precisely.
_NON_FINITE_AMOUNT_RE: Final = r'(?<prefix>"finalAmount"\s*:\s*)[+-]?(NaN|Infinity|INF)'
_LINE_ITEMS_TYPE: Final = f"array<{ORDER_LINE_ITEM_SCHEMA.simpleString()}>"

# The validator's JVM fast path (spark_apps/jvm/order-validator, built into .jvm/spark-jars by
# `make jvm`), registered on each session under FAST_PATH_FUNCTION.
FAST_PATH_CLASS: Final = "io.github.revenueplatform.validation.OrderFastPath"
FAST_PATH_FUNCTION: Final = "revenue_platform_order_fast_path"
# Same jar: whether a text is exactly one JSON value (try_parse_json ignores what follows the first).
SINGLE_VALUE_CLASS: Final = "io.github.revenueplatform.validation.SingleJsonValue"
SINGLE_VALUE_FUNCTION: Final = "revenue_platform_single_json_value"

# Temporary columns of parse_and_validate_orders (dropped before returning).
_FAST: Final = "_order_fast"
_TEXT: Final = "_order_text"
_STRICT: Final = "_order_json_strict"
_JSON: Final = "_order_json"
_NON_FINITE: Final = "_order_non_finite"
_TYPED: Final = "_order_typed"


# --------------------------------------------------------------------------------------------
# Parsing and validation
# --------------------------------------------------------------------------------------------
def _json_type(json: Column, path: str) -> Column:
    """schema_of_variant name of the value at ``path``; null when absent, 'VOID' for JSON null."""
    return F.schema_of_variant(F.variant_get(json, path, "variant"))


def _is_absent(type_name: Column) -> Column:
    return type_name.isNull() | (type_name == "VOID")


def _is_missing(json: Column, field: str) -> Column:
    """A required field is missing when absent, JSON null or (for locationId) blank."""
    missing = _is_absent(_json_type(json, f"$.{field}"))
    if field == "locationId":
        # A blank location id cannot key anything downstream.
        blank = F.trim(F.try_variant_get(json, "$.locationId", "string")) == ""
        missing = missing | F.coalesce(blank, F.lit(False))
    return missing


def _is_money(json: Column, path: str) -> Column:
    """Exact money check: an integer or a decimal literal with at most 2 fractional
    digits (after stripping trailing zeros) that fits DECIMAL(18,2)."""
    return _json_type(json, path).rlike(_MONEY_TYPE_RE) & F.try_variant_get(json, path, MONEY_DDL).isNotNull()


def _optional_type_ok(element: Column, path: str, ok: Column) -> Column:
    return _is_absent(_json_type(element, path)) | ok


def _is_valid_line_item(element: Column) -> Column:
    """Line-item element: a JSON object whose item/count/amount, when present, have exact types."""
    return (
        F.schema_of_variant(element).startswith("OBJECT")
        & _optional_type_ok(element, "$.item", _json_type(element, "$.item") == "STRING")
        & _optional_type_ok(
            element,
            "$.count",
            _json_type(element, "$.count").rlike(_INTEGER_TYPE_RE)
            & F.try_variant_get(element, "$.count", "int").isNotNull(),
        )
        & _optional_type_ok(element, "$.amount", _is_money(element, "$.amount"))
    )


def _line_items_ok(json: Column) -> Column:
    type_name = _json_type(json, "$.orderLineItems")
    elements = F.try_variant_get(json, "$.orderLineItems", "array<variant>")
    well_typed = type_name.startswith("ARRAY") & F.coalesce(
        F.forall(elements, _is_valid_line_item), F.lit(False)
    )
    return _is_absent(type_name) | well_typed


def _wrong_type_checks(json: Column) -> list[tuple[Column, str]]:
    """(is_wrong, reason) per field, in the documented order."""
    ok = {
        "orderId": _json_type(json, "$.orderId").rlike(_INTEGER_TYPE_RE)
        & F.try_variant_get(json, "$.orderId", "bigint").isNotNull(),
        "locationId": _json_type(json, "$.locationId") == "STRING",
        "finalAmount": _is_money(json, "$.finalAmount"),
        "orderType": _json_type(json, "$.orderType") == "STRING",
        "orderedDateTime": _json_type(json, "$.orderedDateTime") == "STRING",
        "orderLineItems": _line_items_ok(json),
    }
    return [(~F.coalesce(is_ok, F.lit(False)), DlqReason.wrong_type(name)) for name, is_ok in ok.items()]


def ordered_at_from_text(text: Column) -> Column:
    """orderedDateTime text as a UTC instant; null when it does not match ORDERED_AT_PATTERN."""
    return F.try_to_timestamp(F.concat(text, F.lit("Z")), F.lit(ORDERED_AT_PATTERN))


def _typed_order(json: Column) -> Column:
    """Typed order fields as a struct; only meaningful once validation passed."""
    return F.struct(
        F.try_variant_get(json, "$.orderId", "bigint").alias("order_id"),
        F.try_variant_get(json, "$.locationId", "string").alias("location_id"),
        F.try_variant_get(json, "$.finalAmount", MONEY_DDL).alias("final_amount"),
        F.try_variant_get(json, "$.orderType", "string").alias("order_type"),
        F.try_variant_get(json, "$.orderLineItems", _LINE_ITEMS_TYPE).alias("order_line_items"),
        ordered_at_from_text(F.try_variant_get(json, "$.orderedDateTime", "string")).alias("ordered_at"),
    )


def _typed_fast_order(fast: Column) -> Column:
    """The typed order struct of a record the fast path certified (same fields as _typed_order).
    The event time is the fast path's when it read the text's plain form, else Spark's parse."""
    return F.struct(
        *(fast[name].alias(name) for name in ORDER_COLUMNS if name != "ordered_at"),
        F.coalesce(
            F.timestamp_micros(fast["ordered_at_us"]), ordered_at_from_text(fast["ordered_at_text"])
        ).alias("ordered_at"),
    )


def record_bytes(key: Column, value: Column) -> Column:
    """Bytes of a Kafka record's key and value (a null one counts 0)."""
    return F.coalesce(F.length(key), F.lit(0)) + F.coalesce(F.length(value), F.lit(0))


def _record_size_check(rules: OrderRules) -> tuple[Column, str]:
    """(is_refused, reason) of the record's size: the first reason of a record too large, whatever
    else is wrong with it (the parses still run on it; they are bounded by the broker's limit)."""
    return (record_bytes(F.col("key"), F.col("value")) > rules.max_record_bytes, DlqReason.RECORD_TOO_LARGE)


def _value_checks(typed: Column, rules: OrderRules) -> list[tuple[Column, str]]:
    """(is_refused, reason) of the value rules on a structurally valid order, in the documented order."""
    # Compared as epoch microseconds: plain long arithmetic, no interval parsing per record.
    appended_us = F.unix_micros(F.col("timestamp"))
    latest_plausible_us = appended_us + F.lit(rules.max_future_skew_s * 1_000_000)
    earliest_plausible_us = appended_us - F.lit(rules.max_past_age_s * 1_000_000)
    return [
        (F.length(typed["location_id"]) > rules.max_location_id_chars, DlqReason.LOCATION_ID_TOO_LONG),
        # An order without line items has a null array: the comparison is null, and CASE WHEN passes it.
        (F.size(typed["order_line_items"]) > rules.max_line_items, DlqReason.TOO_MANY_LINE_ITEMS),
        (~typed["order_type"].isin(*ORDER_TYPES), DlqReason.UNKNOWN_ORDER_TYPE),
        (typed["final_amount"] < 0, DlqReason.NEGATIVE_AMOUNT),
        (typed["final_amount"] > F.lit(rules.max_order_amount).cast(MONEY_DDL), DlqReason.AMOUNT_TOO_LARGE),
        (typed["ordered_at"].isNull(), DlqReason.UNPARSEABLE_TIMESTAMP),
        (F.unix_micros(typed["ordered_at"]) > latest_plausible_us, DlqReason.EVENT_TIME_IN_FUTURE),
        (F.unix_micros(typed["ordered_at"]) < earliest_plausible_us, DlqReason.EVENT_TIME_TOO_OLD),
    ]


def _first_reason(checks: list[tuple[Column, str]]) -> Column:
    """CASE WHEN over the checks: the reason of the first that holds (they evaluate in order), else null."""
    condition, reason = checks[0]
    case = F.when(condition, F.lit(reason))
    for condition, reason in checks[1:]:
        case = case.when(condition, F.lit(reason))
    return case


def _dlq_reason(
    value: Column, parsed_text: Column, json: Column, non_finite: Column, typed: Column, rules: OrderRules
) -> Column:
    """First applicable DLQ reason (CASE WHEN evaluates in order), null for a valid order.

    `parsed_text` is the text `json` was parsed from (a non-finite finalAmount already replaced)."""
    # try_parse_json stops after the first value: `{...} }` and `{...}{"x":1}` would pass as the
    # order alone. The Java check reads past it; where it cannot tell (the text is not JSON, which
    # the parse reports anyway), the text must at least end with the object's brace.
    one_value = F.coalesce(
        F.call_function(SINGLE_VALUE_FUNCTION, parsed_text), parsed_text.rlike(r"\}[ \t\n\r]*$")
    )
    checks: list[tuple[Column, str]] = [
        (value.isNull() | (F.length(value) == 0), DlqReason.EMPTY_VALUE),
        _record_size_check(rules),
        (~F.is_valid_utf8(value), DlqReason.NOT_UTF8),
        (
            json.isNull() | ~F.schema_of_variant(json).startswith("OBJECT") | ~one_value,
            DlqReason.INVALID_JSON,
        ),
        *[(_is_missing(json, f), DlqReason.missing_field(f)) for f in REQUIRED_ORDER_FIELDS],
        *_wrong_type_checks(json),
        (non_finite, DlqReason.NON_FINITE_AMOUNT),
        *_value_checks(typed, rules),
    ]
    return _first_reason(checks)


class OrderFastPathMissingError(RuntimeError):
    """The validator's JVM fast path (FAST_PATH_CLASS) is not on the session's classpath."""


def register_order_fast_path(spark: SparkSession) -> None:
    """Register the validator's Java UDFs on ``spark``: the fast path (FAST_PATH_FUNCTION) and the
    one-JSON-value check (SINGLE_VALUE_FUNCTION); once per session."""
    for function, java_class, return_type in (
        (FAST_PATH_FUNCTION, FAST_PATH_CLASS, ORDER_FAST_PATH_SCHEMA),
        (SINGLE_VALUE_FUNCTION, SINGLE_VALUE_CLASS, BooleanType()),
    ):
        if spark.catalog.functionExists(function):
            continue
        try:
            spark.udf.registerJavaFunction(function, java_class, return_type)
        except AnalysisException as error:
            raise OrderFastPathMissingError(
                f"The order validator's JVM class {java_class} is not on the Spark classpath: run "
                "`make jvm` (it compiles spark_apps/jvm/order-validator into "
                ".jvm/spark-jars/order-validator.jar) and start the session with the jars of that "
                f"folder. Spark said: {error}"
            ) from error


def parse_and_validate_orders(raw: DataFrame, rules: OrderRules = DEFAULT_ORDER_RULES) -> DataFrame:
    """Parse Kafka ``orders`` rows into typed order columns plus ``dlq_reason``.

    Keeps every input column, adds order_id, location_id, final_amount, order_type,
    order_line_items and ordered_at (all null for an invalid row) and dlq_reason
    (null for a valid row; see ``DlqReason`` for the values and their order).

    Types are checked exactly on a VARIANT parse of the value (which keeps the JSON
    type of each literal) instead of ``from_json`` with a typed schema, which would
    silently null or coerce wrong types. Unknown extra fields are ignored. Amounts are
    kept exact: integer or decimal literals with at most two significant fractional
    digits (``1.500`` is fine, ``19.999`` and ``2.7e1`` are ``wrong_type:finalAmount``).
    Other edge rules: JSON null counts as missing; a blank locationId is missing;
    duplicate keys, trailing content and NaN/Infinity outside finalAmount are
    invalid_json; orderedDateTime must be ``yyyy-MM-ddTHH:mm:ss[.ffffff]`` with no zone
    (a zone suffix is unparseable_timestamp) and is read as UTC. ``rules`` bounds the
    amount, how far the event time may be ahead of the record's Kafka timestamp, and the
    sizes (record bytes, locationId characters, line items) that keep every output record
    within the Kafka clients' limits.

    Fast path: a Java UDF (``FAST_PATH_CLASS``, one streaming JSON pass) first types each
    record it can certify as structurally valid under these rules; only its value rules
    (order type, amount bounds, event time) then run in Spark. Every other record goes
    through the exact variant-based checks (``exact_order_validation``), which give the
    same result for any input: the fast path only ever skips work.
    """
    register_order_fast_path(raw.sparkSession)
    return _validate_orders(raw, rules, F.call_function(FAST_PATH_FUNCTION, F.col("value")))


def exact_order_validation(raw: DataFrame, rules: OrderRules = DEFAULT_ORDER_RULES) -> DataFrame:
    """``parse_and_validate_orders`` without the fast path: every record through the exact
    variant-based checks. The reference the fast path is tested and measured against."""
    register_order_fast_path(raw.sparkSession)  # the exact checks use the jar's one-value check
    return _validate_orders(raw, rules, F.lit(None).cast(ORDER_FAST_PATH_SCHEMA))


def _validate_orders(raw: DataFrame, rules: OrderRules, fast_path: Column) -> DataFrame:
    # The fast path's result gets its own column, computed once per record and read below.
    certified = F.col(_FAST).isNotNull()
    # The exact path sees the text only of records the fast path did not certify: for the
    # others every expression of it gets null and costs next to nothing.
    text = F.when(~certified, F.col("value").cast("string"))
    sanitized = F.regexp_replace(F.col(_TEXT), _NON_FINITE_AMOUNT_RE, "${prefix}0")
    staged = (
        raw.withColumn(_FAST, fast_path)
        .withColumn(_TEXT, text)
        .withColumn(_STRICT, F.try_parse_json(F.col(_TEXT)))
        # Retry with a NaN/Infinity finalAmount replaced by 0: if that parses, the only
        # defect is the non-finite amount, which gets its own reason after the type checks.
        .withColumn(_JSON, F.coalesce(F.col(_STRICT), F.try_parse_json(sanitized)))
        .withColumn(_NON_FINITE, F.col(_STRICT).isNull() & F.col(_JSON).isNotNull())
        .withColumn(
            _TYPED,
            F.when(certified, _typed_fast_order(F.col(_FAST))).otherwise(_typed_order(F.col(_JSON))),
        )
    )
    # A certified record passed every structural check, so its first reason is the size's or a value's.
    certified_checks = [_record_size_check(rules), *_value_checks(F.col(_TYPED), rules)]
    reason = F.when(certified, _first_reason(certified_checks)).otherwise(
        _dlq_reason(
            F.col("value"),
            F.when(F.col(_STRICT).isNotNull(), F.col(_TEXT)).otherwise(sanitized),
            F.col(_JSON),
            F.col(_NON_FINITE),
            F.col(_TYPED),
            rules,
        )
    )
    with_reason = staged.withColumn("dlq_reason", reason)
    typed_columns = [
        F.when(F.col("dlq_reason").isNull(), F.col(f"{_TYPED}.{name}")).alias(name) for name in ORDER_COLUMNS
    ]
    return with_reason.select(*raw.columns, *typed_columns, "dlq_reason")


def valid_orders(validated: DataFrame) -> DataFrame:
    """Valid orders only: typed order columns plus Kafka lineage (source_*)."""
    return validated.filter(F.col("dlq_reason").isNull()).select(
        *ORDER_COLUMNS,
        F.col("topic").alias("source_topic"),
        F.col("partition").alias("source_partition"),
        F.col("offset").alias("source_offset"),
        F.col("timestamp").alias("source_timestamp"),
        (F.col("ingest_batch_id") if "ingest_batch_id" in validated.columns else F.lit(None))
        .cast("long")
        .alias("source_ingest_batch"),
    )


def invalid_orders(validated: DataFrame) -> DataFrame:
    """Rejected rows only, all columns kept (input of ``to_dlq_records``)."""
    return validated.filter(F.col("dlq_reason").isNotNull())
