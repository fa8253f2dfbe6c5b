"""The gold table's contract, stated once and importable without pyspark.

Streaming and batch (through spark_apps.validation.schemas), quality (its frames and suites) and serving
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

# Delta type names, as `DeltaTable.schema()` reports them.
STRING: Final = "string"
TIMESTAMP: Final = "timestamp"
LONG: Final = "long"
REVENUE_DELTA_TYPE: Final = f"decimal({REVENUE_PRECISION},{MONEY_SCALE})"

# One row per (location, order type, event-time window): the upsert key of gold and of the
# revenue topic, and the unit every reconciliation and quality check compares.
GOLD_KEY_COLUMNS: Final = ("location_id", "order_type", "window_start")
# What a gold row says about its window (none of these is null in a good table), in table order.
GOLD_WINDOW_TYPES: Final[dict[str, str]] = {
    "location_id": STRING,
    "order_type": STRING,
    "window_start": TIMESTAMP,
    "window_end": TIMESTAMP,
    "order_count": LONG,
    "revenue": REVENUE_DELTA_TYPE,
}
GOLD_WINDOW_COLUMNS: Final = tuple(GOLD_WINDOW_TYPES)
# The store's address when the window was last updated; null for a store the stores topic lacks.
STORE_ADDRESS_COLUMNS: Final = ("address_line1", "address_line2", "city", "state", "zip", "contact_num")
# The micro-batch that last wrote the row: bookkeeping (the app writes it), not served to readers.
GOLD_BATCH_COLUMN: Final = "batch_id"
# What the query API and the operations view serve: the windows and their stores.
SERVED_GOLD_COLUMNS: Final = (*GOLD_WINDOW_COLUMNS, *STORE_ADDRESS_COLUMNS)
# The whole gold table, column -> Delta type, in table order.
GOLD_DELTA_TYPES: Final[dict[str, str]] = {
    **GOLD_WINDOW_TYPES,
    **dict.fromkeys(STORE_ADDRESS_COLUMNS, STRING),
    GOLD_BATCH_COLUMN: LONG,
}
GOLD_COLUMNS: Final = tuple(GOLD_DELTA_TYPES)


# THE dedupe rule, one for the streaming app, the batch reprocess and the quality checks (each
# applies it in its own engine: `spark_apps.revenue.dedupe` for Spark's state store and batch Spark,
# `revenue_platform.quality.frames.repeat_flags` for pandas; one table of cases checks all three).
# Copies of a valid order are put in arrival order: the ingest micro-batch that archived them
# (bronze's `ingest_batch_id`; a copy not ingested yet comes last), then Kafka timestamp, partition
# and offset. A copy is a *repeat* when the copy just before it in that order has a Kafka timestamp
# at most `dedupe.horizon` before its own; a repeat is never counted. So an order re-sent within the
# horizon of its previous copy counts once, and one re-sent after a longer silence counts again.
# Why arrival and Kafka time, not event time: a stream can only ever count the copy it has seen
# (the earliest `orderedDateTime` would need retractions), and the Kafka timestamp is the broker's
# clock, which no producer can set ahead.
DEDUPE_RULE: Final = "repeat = previous copy (arrival order) has a Kafka timestamp within dedupe.horizon"
ARRIVAL_ORDER: Final = ("ingest_batch_id", "timestamp", "partition", "offset")
CONFLICT_COLUMN: Final = "conflicting_copy"
"""The dedupe rule's second verdict (`spark_apps.revenue.dedupe`): a repeat whose store, type or amount
differ from the copy before it. A dead letter (`DlqReason.CONFLICTING_COPY`), never counted."""


@dataclass(frozen=True)
class OrderRules:
    """Plausibility bounds of an otherwise well-formed order (config: `validation.*`).

    Event time is untrusted input: one order dated 2099 would move the watermark to 2099 and
    every later order would be dropped as late. An order may be ahead of its Kafka record's
    timestamp by at most `max_future_skew_s` (clock skew between producer and broker; the config
    never lets it exceed the watermark delay), and behind it by at most `max_past_age_s` (an order
    dated year 1 is not a late order but a broken one, and its windows and watermark would not
    fit a timestamp). Amounts are bounded per order so a single absurd order cannot dominate
    (or, unbounded, overflow) a window.

    Sizes are bounded so every record the app writes for an order fits the Kafka clients' limits
    (librdkafka's `message.max.bytes` 1,000,000, the Java producer's `max.request.size` 1,048,576):
    one record over them fails its whole batch, and the restart meets the same record again, so an
    unbounded order would stop live revenue for good. A record (key + value) of at most
    `max_record_bytes` gives a split-topic record of at most that plus ~45 kB (`to_json` writes
    every null and cent of at most `max_line_items` line items) and a dead letter of at most 4/3 of
    it (base64; a larger record's dead letter carries its first bytes and its hash, see
    `spark_apps.validation.routing`);
    `max_location_id_chars` bounds the key of every gold row and revenue record of its store.
    An order near the bounds is ~300x the size of a real one (~350 bytes, a few line items).
    """

    max_future_skew_s: int = 30
    max_order_amount: Decimal = Decimal("1000000.00")
    max_past_age_s: int = 3650 * 86400
    max_record_bytes: int = 100_000
    max_location_id_chars: int = 256
    max_line_items: int = 1_000


class DlqReason:
    """Machine-readable reasons an order record goes to the dead-letter topic.

    Checked in this order; the first that applies wins:
    empty_value, record_too_large, not_utf8, invalid_json, missing_field:<f> (orderId,
    locationId, finalAmount, orderType, orderedDateTime), wrong_type:<f> (same order, then
    orderLineItems), non_finite_amount, location_id_too_long, too_many_line_items,
    unknown_order_type, negative_amount, amount_too_large, unparseable_timestamp,
    event_time_in_future, event_time_too_old (see ``OrderRules``).
    The validator (spark_apps.validation.orders) and the bench's work-equivalent ceiling use these.
    One more comes from the dedupe rule, not the validator: conflicting_copy, a valid order that
    repeats an order id within the horizon with another store, type or amount than the copy before
    it (``CONFLICT_COLUMN``); bronze keeps it as a valid, uncounted repeat.
    """

    EMPTY_VALUE: Final = "empty_value"
    RECORD_TOO_LARGE: Final = "record_too_large"
    NOT_UTF8: Final = "not_utf8"
    INVALID_JSON: Final = "invalid_json"
    MISSING_FIELD_PREFIX: Final = "missing_field:"
    WRONG_TYPE_PREFIX: Final = "wrong_type:"
    NON_FINITE_AMOUNT: Final = "non_finite_amount"
    LOCATION_ID_TOO_LONG: Final = "location_id_too_long"
    TOO_MANY_LINE_ITEMS: Final = "too_many_line_items"
    UNKNOWN_ORDER_TYPE: Final = "unknown_order_type"
    NEGATIVE_AMOUNT: Final = "negative_amount"
    AMOUNT_TOO_LARGE: Final = "amount_too_large"
    UNPARSEABLE_TIMESTAMP: Final = "unparseable_timestamp"
    EVENT_TIME_IN_FUTURE: Final = "event_time_in_future"
    EVENT_TIME_TOO_OLD: Final = "event_time_too_old"
    CONFLICTING_COPY: Final = "conflicting_copy"

    @staticmethod
    def missing_field(name: str) -> str:
        return f"{DlqReason.MISSING_FIELD_PREFIX}{name}"

    @staticmethod
    def wrong_type(name: str) -> str:
        return f"{DlqReason.WRONG_TYPE_PREFIX}{name}"


VALIDATOR_DLQ_REASON_KINDS: Final = (
    DlqReason.EMPTY_VALUE,
    DlqReason.RECORD_TOO_LARGE,
    DlqReason.NOT_UTF8,
    DlqReason.INVALID_JSON,
    DlqReason.MISSING_FIELD_PREFIX.rstrip(":"),
    DlqReason.WRONG_TYPE_PREFIX.rstrip(":"),
    DlqReason.NON_FINITE_AMOUNT,
    DlqReason.LOCATION_ID_TOO_LONG,
    DlqReason.TOO_MANY_LINE_ITEMS,
    DlqReason.UNKNOWN_ORDER_TYPE,
    DlqReason.NEGATIVE_AMOUNT,
    DlqReason.AMOUNT_TOO_LARGE,
    DlqReason.UNPARSEABLE_TIMESTAMP,
    DlqReason.EVENT_TIME_IN_FUTURE,
    DlqReason.EVENT_TIME_TOO_OLD,
)
"""Every reason the validator gives, without its field (`missing_field:orderId` is `missing_field`)."""

DLQ_REASON_KINDS: Final = (*VALIDATOR_DLQ_REASON_KINDS, DlqReason.CONFLICTING_COPY)
"""Every dead-letter reason without its field: the validator's and the dedupe rule's conflicting copy. A
bounded set, so the app counts dead letters per kind and the metrics label them by it."""


DEAD_LETTERS_OF_KIND: Final = "dead_letters.{}"
"""The app's counter (and streaming observation) of the dead letters of one kind, `.format(kind)`."""


def dlq_reason_kind(reason: str) -> str:
    """The kind of a dead-letter reason (`DLQ_REASON_KINDS`): the part before a field name."""
    return reason.split(":", 1)[0]


REQUIRED_ORDER_FIELDS: Final = ("orderId", "locationId", "finalAmount", "orderType", "orderedDateTime")
