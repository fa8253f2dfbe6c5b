"""Typed configuration of the orders streaming app, loaded from one YAML file plus overrides.

Window size and slide, watermark (the seed's grace period), trigger, rate limit, topics,
lake location and deployment id are configuration, not code. Invalid configuration
fails at start, before any query runs, with an error naming the field.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from spark_apps.contract import OrderRules
from spark_apps.kafka_security import KafkaClientSecurity, is_security_key
from spark_apps.naming import DeploymentNames, validate_deployment_id

# Spaces only (no tabs or newlines) and ASCII digits (`\d` takes any script's digits), matched whole.
_INTERVAL = re.compile(r" *([0-9]{1,12}) +(second|seconds|minute|minutes|hour|hours|day|days) *")
_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
# Kafka's own rule for topic names (249 characters at most; "." and ".." are reserved). Applied with
# `fullmatch`; `$(?!\n)` keeps it a full-string rule where it is searched (JSON schema, see naming.py).
TOPIC_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9._-]{1,249}$(?!\n)")
MAX_TOPIC_NAME = 249
# Bounds that keep state and waits finite: a window (and the watermark that keeps it open) of
# more than a day would hold state the app is not sized for, and makes reprocessing wait as long.
MAX_WINDOW_SECONDS = 86400
MAX_WATERMARK_SECONDS = 86400
# The dedupe horizon is bounded at a week: the state holds one horizon of order ids (~16 B each in
# the bench's checkpoint, on disk), so a week at 1,000 orders/s is ~10 GB; a longer memory belongs
# to a batch check.
MAX_DEDUPE_HORIZON_SECONDS = 7 * 86400
MAX_TRIGGER_SECONDS = 3600
# Window geometry: windows one order adds to (size / slide), and windows a store and order type keep
# open ((size + watermark) / slide; the shipped 15 s windows with a 30 s watermark keep 3, with the
# longest watermark, a day, 5,761: every window shape allowed before these bounds still loads).
MAX_WINDOWS_PER_ORDER = 100
MAX_OPEN_WINDOWS_PER_KEY = 6000
# How far behind its Kafka timestamp an order may be dated (validation.max_past_age) at most: ten
# years keeps every event time, window and watermark of an accepted order after 1959.
MAX_PAST_AGE_SECONDS = 3650 * 86400
# The largest amount DECIMAL(18,2) holds: an order amount must fit the platform's money type.
MAX_ORDER_AMOUNT = Decimal("9999999999999999.99")
# Bounds of the values a form, a release or `--set` can reach (docs/security.md, "Input surfaces").
# Generous for any real deployment; they refuse only what would exhaust memory, overflow a type or
# point the app somewhere else.
MAX_SHUFFLE_PARTITIONS = 10_000
MAX_OFFSETS_PER_TRIGGER = 50_000_000
# 9999-12-31T23:59:59.999Z: the last epoch millisecond a Kafka timestamp and Python's datetime share.
MAX_TIMESTAMP_MS = 253_402_300_799_999
MAX_STARTING_OFFSETS_JSON = 65_536
MAX_PARTITIONS = 100_000
MAX_OFFSET = 2**63 - 1
# App version labels: printable ASCII without leading or trailing spaces (forms take the stricter
# semver-like VERSION_PATTERN of revenue_platform.bluegreen.triggers; older rows may hold more).
APP_VERSION_PATTERN = re.compile(r"[!-~](?:[ -~]{0,126}[!-~])?")
# Lake and registry roots: a path or an object-store URI, printable, no control characters.
MAX_ROOT_LENGTH = 1024
_ROOT_PATTERN = re.compile(r"[^\x00-\x1f\x7f]{1,1024}")
# Lease tokens as the registry issues them (`<epoch>-<12 hex>`), with room to change the format.
LEASE_TOKEN_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# Java client settings `kafka.options` may carry: tuning of Spark's Kafka source and sink only. Not
# servers, security, classes to load (interceptors, reporters, serializers), group or offset handling
# (Spark owns those and refuses them itself); numeric settings take 0..2**31-1, the rest the values
# the Kafka client knows. https://spark.apache.org/docs/latest/structured-streaming-kafka-integration.html
KAFKA_NUMERIC_OPTIONS = frozenset(
    {
        # consumer (the source, on the executors)
        "fetch.min.bytes",
        "fetch.max.bytes",
        "fetch.max.wait.ms",
        "max.partition.fetch.bytes",
        "max.poll.records",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "default.api.timeout.ms",
        # producer (the sinks)
        "linger.ms",
        "batch.size",
        "buffer.memory",
        "max.request.size",
        "max.block.ms",
        "delivery.timeout.ms",
        "retries",
        "max.in.flight.requests.per.connection",
        # both
        "request.timeout.ms",
        "receive.buffer.bytes",
        "send.buffer.bytes",
        "connections.max.idle.ms",
        "metadata.max.age.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "socket.connection.setup.timeout.ms",
        "socket.connection.setup.timeout.max.ms",
    }
)
KAFKA_CHOICE_OPTIONS: dict[str, frozenset[str]] = {
    "compression.type": frozenset({"none", "gzip", "snappy", "lz4", "zstd"}),
    "acks": frozenset({"all", "-1", "0", "1"}),
    "isolation.level": frozenset({"read_committed", "read_uncommitted"}),
    "enable.idempotence": frozenset({"true", "false"}),
    "check.crcs": frozenset({"true", "false"}),
}
# Names the clients report to the brokers (quotas, logs, rack-aware fetching): a plain identifier.
KAFKA_NAME_OPTIONS = frozenset({"client.id", "client.rack"})
KAFKA_OPTION_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
MAX_KAFKA_OPTION_VALUE = 2**31 - 1
# Comma-separated host:port pairs (the connection's servers, or a config file's for a run by hand).
# Both Kafka clients also take a listener-name prefix (`PLAINTEXT://host:9092`) and a trailing comma.
_HOST_PORT = r"(?:[A-Za-z_]{1,32}://)?(?:[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]):[0-9]{1,5}"
_BOOTSTRAP_SERVERS = re.compile(rf"{_HOST_PORT}(?: *, *{_HOST_PORT}){{0,31}} *,?")


class AppConfigError(ValueError):
    """The app's configuration is invalid; the message names the field."""


def interval_seconds(interval: str) -> int:
    """Seconds in a Spark interval string such as '15 seconds' or '1 hour'."""
    match = _INTERVAL.fullmatch(interval) if isinstance(interval, str) else None
    if not match:
        raise ValueError(f"{interval!r} is not an interval like '15 seconds', '5 minutes' or '1 hour'")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).rstrip("s")]


def bounded_interval(value: str, maximum_s: int) -> str:
    """`value` if it is an interval of 1 second to `maximum_s` seconds; else ValueError saying so."""
    seconds = interval_seconds(value)
    if not 1 <= seconds <= maximum_s:
        raise ValueError(
            f"{value!r} must be between 1 second and {describe_seconds(maximum_s)}, got {seconds} s"
        )
    return value


def ascii_amount(value: Any, integer_digits: int) -> Any:
    """`value` unless it is text that is not an amount of ASCII digits (at most `integer_digits`
    before the point, 2 after): Decimal() reads any script's digits ("١٢٣"), a config or form never."""
    if isinstance(value, str) and not re.fullmatch(rf"[0-9]{{1,{integer_digits}}}(?:\.[0-9]{{1,2}})?", value):
        raise ValueError(f"{value[:40]!r} is not an amount such as 1000000.00")
    return value


def describe_seconds(seconds: int) -> str:
    """`seconds` in the largest unit that divides it: 86400 -> '1 day', 90 -> '90 seconds'."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


def validate_topic_name(value: str) -> str:
    """`value` if Kafka accepts it as a topic name; else ValueError naming the rule."""
    if not TOPIC_NAME_PATTERN.fullmatch(value) or value in (".", ".."):
        raise ValueError(
            f"{value!r} is not a Kafka topic name: 1-249 characters of letters, digits, '.', '_' or '-', "
            "and not '.' or '..'"
        )
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# The topics a deployment writes (the rest it only reads); two deployments never share one.
OUTPUT_TOPIC_FIELDS = ("dlq_topic", "general_orders_topic", "restaurant_orders_topic", "revenue_topic")


# The topics a deployment reads; no deployment may write one that any deployment reads.
INPUT_TOPIC_FIELDS = ("orders_topic", "stores_topic")


MAX_MIN_PARTITIONS = 10_000


class KafkaConfig(_Strict):
    bootstrap_servers: str = "localhost:9092"
    """Comma-separated host:port pairs (at most 32). Deployments get them from the Airflow Kafka
    connection only: no trigger form or release may set them (a run by hand may, in its config file)."""
    orders_topic: str = "orders"
    """Topic the orders are read from (a Kafka topic name: 1-249 of letters, digits, '.', '_', '-')."""
    stores_topic: str = "stores"
    """Compacted topic of the stores (read). Must differ from orders_topic."""
    dlq_topic: str = "orders_dlq"
    """Dead letters (written). Every output topic must differ from the inputs, from the other outputs,
    from every topic any registered deployment reads and from every topic another one writes."""
    general_orders_topic: str = "general_orders"
    """Valid orders of type general (written)."""
    restaurant_orders_topic: str = "restaurant_orders"
    """Valid orders of type restaurant (written)."""
    revenue_topic: str = "revenue_windows"
    """Windowed revenue (written; compacted)."""
    starting_offsets: str = "earliest"
    """Where a NEW deployment starts: earliest, latest, or Spark's per-partition JSON
    (`{"orders": {"0": 42, "1": -2}}`, at most 64 KiB, offsets -2 (earliest), -1 (latest) or
    0..2**63-1); a checkpoint wins."""
    # strict: "5" or true is a type confusion, not a number (YAML, JSON and the registry give ints).
    starting_timestamp_ms: int | None = Field(default=None, ge=0, le=MAX_TIMESTAMP_MS, strict=True)
    """If set, a NEW deployment starts at the first offset at/after this time (epoch ms, at most
    253402300799999 = 9999-12-31) in every partition (Spark's `startingTimestamp`, which takes
    precedence over starting_offsets)."""
    max_offsets_per_trigger: int | None = Field(default=None, ge=1, le=MAX_OFFSETS_PER_TRIGGER, strict=True)
    """Upper bound of records per micro-batch (back-pressure), 1..50,000,000; None = unbounded. A
    replay's history from bronze is read in batches of this many records too (500,000 when None)."""
    min_partitions: int | None = Field(default=None, ge=1, le=MAX_MIN_PARTITIONS, strict=True)
    """Spark tasks a micro-batch's Kafka read is split into, at least (Spark's `minPartitions`),
    1..10,000; None = one per topic partition. Validation and the per-record work of a batch run in
    these tasks, so set it to the executor cores of a cluster when the orders topic has fewer
    partitions (docs/cluster.md)."""
    options: dict[str, str] = Field(default_factory=dict)
    """Tuning settings of Spark's Kafka source and sink (Java client keys, `kafka.` prefix optional).
    An allow-list: the numeric keys of KAFKA_NUMERIC_OPTIONS (a decimal 0..2147483647, e.g.
    request.timeout.ms, fetch.max.bytes, max.partition.fetch.bytes, linger.ms, batch.size) and the
    keys of KAFKA_CHOICE_OPTIONS with their values (compression.type, acks, isolation.level,
    enable.idempotence, check.crcs). Never servers or security settings: those come from the Kafka
    connection (`security`)."""
    security: KafkaClientSecurity | None = Field(default=None, exclude=True, repr=False)
    """Credentials and transport security, attached by the driver from its launcher's environment
    (`with_kafka_security`); never read from config files or overrides, never dumped."""

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers(cls, value: str) -> str:
        if not _BOOTSTRAP_SERVERS.fullmatch(value):
            raise ValueError(f"{value[:80]!r} is not a comma-separated list of at most 32 host:port pairs")
        return value

    @field_validator("options")
    @classmethod
    def _allowed_options(cls, value: dict[str, str]) -> dict[str, str]:
        security = sorted(key for key in value if is_security_key(key.removeprefix("kafka.")))
        if security:
            raise ValueError(
                f"{security} are security settings: put them into the extra of the Airflow Kafka "
                "connection (kafka_default), whose credentials reach the app without being stored in "
                "its config"
            )
        return {key.removeprefix("kafka."): kafka_option_value(key, text) for key, text in value.items()}

    @field_validator("starting_offsets")
    @classmethod
    def _starting_offsets(cls, value: str) -> str:
        return validate_starting_offsets(value)

    @field_validator(
        "orders_topic",
        "stores_topic",
        "dlq_topic",
        "general_orders_topic",
        "restaurant_orders_topic",
        "revenue_topic",
    )
    @classmethod
    def _topic(cls, value: str) -> str:
        return validate_topic_name(value)


def kafka_option_value(key: str, value: str) -> str:
    """`value` if `key` (with or without `kafka.`) is an allowed tuning key and `value` fits it."""
    name = key.removeprefix("kafka.")
    if name in KAFKA_NUMERIC_OPTIONS:
        if not (re.fullmatch(r"[0-9]{1,10}", value) and int(value) <= MAX_KAFKA_OPTION_VALUE):
            raise ValueError(
                f"{key}: {value[:40]!r} must be a whole number from 0 to {MAX_KAFKA_OPTION_VALUE}"
            )
        return value
    if name in KAFKA_CHOICE_OPTIONS:
        if value not in KAFKA_CHOICE_OPTIONS[name]:
            raise ValueError(f"{key}: {value[:40]!r} must be one of {sorted(KAFKA_CHOICE_OPTIONS[name])}")
        return value
    if name in KAFKA_NAME_OPTIONS:
        if not KAFKA_OPTION_NAME.fullmatch(value):
            raise ValueError(f"{key}: {value[:40]!r} must be 1-64 letters, digits, '.', '_' or '-'")
        return value
    if "server" in name or "host" in name or "url" in name or "dns" in name:
        why = "where to connect comes from the Airflow Kafka connection (kafka_default) only"
    else:
        why = "only tuning settings of Spark's Kafka source and sink are allowed"
    raise ValueError(
        f"{key[:80]!r} is not an allowed setting: {why}. Allowed: "
        f"{', '.join(sorted(KAFKA_NUMERIC_OPTIONS | set(KAFKA_CHOICE_OPTIONS) | KAFKA_NAME_OPTIONS))}"
    )


def validate_starting_offsets(value: str) -> str:
    """earliest, latest, or Spark's JSON `{"topic": {"partition": offset}}` of bounded size."""
    if value in ("earliest", "latest"):
        return value
    if len(value) > MAX_STARTING_OFFSETS_JSON:
        raise ValueError(
            f"is {len(value)} characters; Spark's offsets JSON may have {MAX_STARTING_OFFSETS_JSON}"
        )
    shape = (
        'must be \'earliest\', \'latest\' or JSON such as {"orders": {"0": 42, "1": -2}} '
        f"(topic -> partition -> offset; -2 earliest, -1 latest; at most {MAX_PARTITIONS} partitions)"
    )
    try:
        parsed = json.loads(value)
    except ValueError as error:
        raise ValueError(shape) from error
    if not isinstance(parsed, dict) or not parsed:
        raise ValueError(shape)
    count = 0
    for topic, partitions in parsed.items():
        validate_topic_name(topic)
        if not isinstance(partitions, dict):
            raise ValueError(shape)
        for partition, offset in partitions.items():
            count += 1
            if (
                not re.fullmatch(r"[0-9]{1,6}", partition)
                or type(offset) is not int
                or not -2 <= offset <= MAX_OFFSET
                or count > MAX_PARTITIONS
            ):
                raise ValueError(shape)
    return value


def validate_root(value: str) -> str:
    """`value` if it can be a lake or registry root: 1-1024 characters, no control characters."""
    if not _ROOT_PATTERN.fullmatch(value):
        raise ValueError(
            f"{value[:80]!r} must be a path or URI of 1-{MAX_ROOT_LENGTH} characters, no control characters"
        )
    return value


# What precedes the deployment id in every bronze archive's path (naming.py is the one definition).
BRONZE_TABLE_INFIX = DeploymentNames("", "x").bronze_orders_table.removesuffix("x")


class HistoryConfig(_Strict):
    """Replay history from a bronze archive instead of Kafka (a blue-green replay when Kafka's retention
    no longer holds everything the live deployment has seen).

    For each partition of the orders topic, records before `kafka_offsets[p]` are read from
    `bronze_table` (the raw Kafka records another deployment archived, exactly once each), and Kafka is
    read from `kafka_offsets[p]` on; -2 means "no history in bronze, read Kafka from its earliest".
    Both feed the same stream, so deduplication and window state see one continuous history.
    """

    bronze_table: str
    """A deployment's bronze archive, `<lake root>/bronze/orders_raw/<deployment id>`
    (DeploymentNames.bronze_orders_table); the control plane also requires that deployment to be
    registered in the same lake."""
    kafka_offsets: dict[int, int] = Field(min_length=1, max_length=MAX_PARTITIONS)
    """Partition (0..99,999 partitions) -> first offset read from Kafka (0..2**63-1, or -2)."""

    @field_validator("bronze_table")
    @classmethod
    def _bronze_table(cls, value: str) -> str:
        root, _, deployment_id = value.rpartition(BRONZE_TABLE_INFIX)
        try:
            if ".." in value.split("/"):
                raise ValueError("a '..' segment")
            validate_root(root)
            validate_deployment_id(deployment_id)
        except ValueError as error:
            raise ValueError(
                f"{value[:120]!r} is not a deployment's bronze archive "
                f"<lake root>{BRONZE_TABLE_INFIX}<deployment id>"
            ) from error
        return value

    @field_validator("kafka_offsets")
    @classmethod
    def _offsets(cls, value: dict[int, int]) -> dict[int, int]:
        bad = {p: o for p, o in value.items() if p < 0 or o < -2 or o == -1 or o > MAX_OFFSET}
        if bad:
            raise ValueError(f"partitions must be >= 0 and offsets >= 0 (or -2 = earliest), got {bad}")
        return value


class WindowConfig(_Strict):
    size: str = "15 seconds"
    """Window length; the seed's demo window is 15 seconds."""
    slide: str | None = None
    """Hop between window starts; None (or equal to size) means tumbling windows."""
    watermark: str = "30 seconds"
    """How long to wait for late events (the seed's grace); later events are only archived."""

    @field_validator("size", "slide")
    @classmethod
    def _interval(cls, value: str | None) -> str | None:
        return None if value is None else bounded_interval(value, MAX_WINDOW_SECONDS)

    @field_validator("watermark")
    @classmethod
    def _watermark(cls, value: str) -> str:
        return bounded_interval(value, MAX_WATERMARK_SECONDS)

    @model_validator(mode="after")
    def _slide_within_size(self) -> WindowConfig:
        size = interval_seconds(self.size)
        slide = size if self.slide is None else interval_seconds(self.slide)
        if slide > size:
            raise ValueError("slide must not be longer than size")
        # Each order adds to size/slide windows, and a store and order type keep every window
        # from the watermark to the newest event open: bound both, or one config makes the state
        # (and every batch's gold MERGE) thousands of times larger than the rate calls for.
        per_order = -(-size // slide)
        if per_order > MAX_WINDOWS_PER_ORDER:
            raise ValueError(
                f"size {self.size!r} / slide {self.slide!r} puts each order into {per_order} windows, "
                f"more than {MAX_WINDOWS_PER_ORDER}; use a longer slide"
            )
        open_windows = -(-(size + interval_seconds(self.watermark)) // slide)
        if open_windows > MAX_OPEN_WINDOWS_PER_KEY:
            raise ValueError(
                f"watermark {self.watermark!r} with windows every {slide} s keeps {open_windows} windows "
                f"open per store and order type, more than {MAX_OPEN_WINDOWS_PER_KEY}; use a shorter "
                "watermark or a longer slide"
            )
        return self

    @property
    def delay_seconds(self) -> int:
        """The watermark delay in seconds."""
        return interval_seconds(self.watermark)


class DedupeConfig(_Strict):
    horizon: str = "1 hour"
    """How far back a copy of an order is recognised as a repeat of the one before it (Kafka
    timestamps; spark_apps.contract.DEDUPE_RULE), 1 s..7 days. The stream keeps one horizon of order
    ids in Spark's state store; the reprocess job and the quality suite read one horizon more. A
    changed horizon applies from the next start; ids a shorter one already forgot stay forgotten."""

    @field_validator("horizon")
    @classmethod
    def _horizon(cls, value: str) -> str:
        return bounded_interval(value, MAX_DEDUPE_HORIZON_SECONDS)

    @property
    def horizon_seconds(self) -> int:
        return interval_seconds(self.horizon)


class TriggerConfig(_Strict):
    mode: Literal["processing_time", "available_now"] = "processing_time"
    """processing_time: run forever; available_now: process what is there, then stop (tests, backfills)."""
    interval: str = "5 seconds"
    """Micro-batch interval in processing_time mode."""

    @field_validator("interval")
    @classmethod
    def _interval(cls, value: str) -> str:
        return bounded_interval(value, MAX_TRIGGER_SECONDS)


class ValidationConfig(_Strict):
    """Plausibility rules every order must pass (the same in the app, the batch reprocess and, through
    bronze's verdict, the quality checks); a failing order goes to the DLQ with the rule's reason."""

    max_future_skew: str | None = None
    """How far an order's orderedDateTime may be ahead of its Kafka record timestamp (producer/broker
    clock skew); further ahead is `event_time_in_future`. None: the watermark delay. Never more than
    the watermark delay: a larger value is clamped to it (`StreamingAppConfig.order_rules`), since an
    order further ahead than the delay would move the watermark past the broker's clock."""
    max_past_age: str = "3650 days"
    """How far an order's orderedDateTime may be behind its Kafka record timestamp; further behind is
    `event_time_too_old` (at most 3650 days: an order dated year 1 is broken, not late, and its
    windows would not fit a timestamp). Late orders within it are archived as always."""
    max_order_amount: Decimal = Field(default=Decimal("1000000.00"), gt=0, le=MAX_ORDER_AMOUNT)
    """Largest accepted finalAmount; larger is `amount_too_large`."""

    @field_validator("max_future_skew")
    @classmethod
    def _skew(cls, value: str | None) -> str | None:
        return None if value is None else bounded_interval(value, MAX_WATERMARK_SECONDS)

    @field_validator("max_past_age")
    @classmethod
    def _past_age(cls, value: str) -> str:
        return bounded_interval(value, MAX_PAST_AGE_SECONDS)

    @field_validator("max_order_amount", mode="before")
    @classmethod
    def _ascii_amount(cls, value: Any) -> Any:
        return ascii_amount(value, integer_digits=16)

    @field_validator("max_order_amount")
    @classmethod
    def _cents(cls, value: Decimal) -> Decimal:
        if value != value.quantize(Decimal("0.01")):
            raise ValueError("must be a whole number of cents")
        return value


class StreamingAppConfig(_Strict):
    """Everything the orders streaming app needs to run one deployment."""

    deployment_id: str = "blue"
    """Namespace of this deployment's checkpoints, tables and consumer group: a lowercase letter, then
    up to 62 lowercase letters, digits, '_' or '-' (spark_apps.naming.DEPLOYMENT_ID_PATTERN)."""
    app_version: str = "dev"
    """Version label recorded with the deployment: 1-128 printable ASCII characters, no leading or
    trailing space (the trigger forms and releases take only letters, digits and '._+-', at most 63)."""
    lake_root: str = Field(default=".local/lake", min_length=1)
    """Root of Delta tables and checkpoints: a local path or an object-store URI of at most 1024
    characters, no control characters. Any root is allowed here (an operator may point the app at an
    object store); the control plane keeps roots that come from a trigger form inside the platform's
    lake (revenue_platform.paths.require_inside_lake)."""
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    window: WindowConfig = Field(default_factory=WindowConfig)
    dedupe: DedupeConfig = Field(default_factory=DedupeConfig)
    trigger: TriggerConfig = Field(default_factory=TriggerConfig)
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    engine: Literal["two_queries", "one_query"] | None = None
    """one_query (or None, the same): one micro-batch goes from Kafka to gold (spark_apps.one_query).
    two_queries names the retired two-query engine: it is still read in registered configs, and a
    deployment that names it (or whose checkpoints it wrote) is refused at start with the way out,
    a blue-green replay into a new deployment, which does not inherit it."""
    shuffle_partitions: int = Field(default=2, ge=1, le=MAX_SHUFFLE_PARTITIONS, strict=True)
    """spark.sql.shuffle.partitions, 1..10,000: one partition per core of the local stack
    (docs/performance.md, stop 16). The stateful operators keep the count recorded in their
    checkpoint whatever is configured (Spark pins their state store layout); the other shuffles of a
    batch use this value."""
    lease_token: str | None = None
    """Fencing token issued by the deployment registry; when set, the app refuses to start unless the
    registry's current token for this deployment is the same (never two drivers per deployment).
    Letters, digits, '.', '_', '-', at most 128 characters; never from a form (the deploy sets it)."""
    registry_root: str | None = None
    """Lake root holding the deployment registry (`<root>/_registry`); None means lake_root. Same
    bounds as lake_root; never from a form (the deploy sets it)."""
    history: HistoryConfig | None = None
    """Set only for a replay from bronze; then kafka.starting_offsets/starting_timestamp_ms are unused."""

    @field_validator("deployment_id")
    @classmethod
    def _deployment_id(cls, value: str) -> str:
        return validate_deployment_id(value)

    @field_validator("app_version")
    @classmethod
    def _app_version(cls, value: str) -> str:
        if not APP_VERSION_PATTERN.fullmatch(value):
            raise ValueError(
                f"{value[:40]!r} must be 1-128 printable ASCII characters without leading or trailing spaces"
            )
        return value

    @field_validator("lake_root", "registry_root")
    @classmethod
    def _root(cls, value: str | None) -> str | None:
        return None if value is None else validate_root(value)

    @field_validator("lease_token")
    @classmethod
    def _lease_token(cls, value: str | None) -> str | None:
        if value is not None and not LEASE_TOKEN_PATTERN.fullmatch(value):
            raise ValueError(f"{value[:40]!r} is not a lease token the registry issues")
        return value

    @model_validator(mode="after")
    def _topics_have_one_role(self) -> StreamingAppConfig:
        # An output that is an input loops the app's records back into it (dead letters into `orders`
        # wrap themselves until they exceed the broker's size limit); order JSON in `stores` blanks every
        # address. Two outputs in one topic mix records their consumers tell apart by topic.
        seen: dict[str, str] = {}
        for field_name in (*INPUT_TOPIC_FIELDS, *OUTPUT_TOPIC_FIELDS):
            topic = getattr(self.kafka, field_name)
            if topic in seen:
                raise ValueError(
                    f"kafka.{field_name}: topic {topic!r} is already kafka.{seen[topic]}; every topic of a "
                    "deployment has one role (orders and stores are read, the four outputs written): "
                    f"give kafka.{field_name} its own topic"
                )
            seen[topic] = field_name
        return self

    @model_validator(mode="after")
    def _own_topics_fit(self) -> StreamingAppConfig:
        # A deployment may have to write `<topic>_<deployment_id>` (see DeploymentNames.own_topic),
        # which must be a topic name too.
        for field_name in OUTPUT_TOPIC_FIELDS:
            topic = self.names.own_topic(getattr(self.kafka, field_name))
            if len(topic) > MAX_TOPIC_NAME:
                raise ValueError(
                    f"kafka.{field_name}: the deployment's own topic {topic[:40]}... would be {len(topic)} "
                    f"characters, more than Kafka's {MAX_TOPIC_NAME}; shorten {field_name}"
                )
        return self

    def order_rules(self) -> OrderRules:
        """The validation rules the app and the reprocess job apply (`skew_clamp_reason` says when the
        configured skew was cut to the watermark delay)."""
        validation = self.validation
        delay = self.window.delay_seconds
        skew = delay if validation.max_future_skew is None else interval_seconds(validation.max_future_skew)
        return OrderRules(
            max_future_skew_s=min(skew, delay),
            max_order_amount=validation.max_order_amount,
            max_past_age_s=interval_seconds(validation.max_past_age),
        )

    def skew_clamp_reason(self) -> str | None:
        """Why `order_rules` allows less skew than `validation.max_future_skew` says (None: it does not)."""
        skew = self.validation.max_future_skew
        if skew is None or interval_seconds(skew) <= self.window.delay_seconds:
            return None
        return (
            f"validation.max_future_skew {skew!r} is more than window.watermark {self.window.watermark!r}: "
            f"orders more than {self.window.watermark} ahead of their Kafka timestamp are refused as "
            "event_time_in_future (one such order would otherwise move the watermark past the broker's "
            "clock and make the honest orders behind it late)"
        )

    def output_topics(self) -> dict[str, str]:
        """Config field -> topic of every topic this deployment writes."""
        return {name: getattr(self.kafka, name) for name in OUTPUT_TOPIC_FIELDS}

    @property
    def names(self) -> DeploymentNames:
        return DeploymentNames(self.lake_root, self.deployment_id)


# Overrides name fields like `kafka.max_offsets_per_trigger`; any other key is refused as it is.
_OVERRIDE_KEY = re.compile(r"[a-z_]{1,40}(?:\.[a-z_]{1,40}){0,3}")
MAX_OVERRIDES = 100


def _set_dotted(tree: dict[str, Any], dotted_key: str, value: Any) -> None:
    node = tree
    *parents, leaf = dotted_key.split(".")
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise AppConfigError(f"cannot set {dotted_key}: {part} is not a section")
        node = child
    node[leaf] = value


def parse_override(assignment: str) -> tuple[str, Any]:
    """`window.size=1 minute` -> ('window.size', '1 minute'); the value is read as YAML (ints, null)."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise AppConfigError(f"override {assignment!r} must look like section.field=value")
    try:
        return key.strip(), yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as error:
        raise AppConfigError(f"override {key.strip()[:80]!r}: the value is not YAML ({error})") from error


def load_config(
    path: str | Path | None = None, overrides: list[str] | dict[str, Any] | None = None
) -> StreamingAppConfig:
    """Load the YAML file (if any), apply dotted overrides, validate; AppConfigError names the field."""
    tree: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except (OSError, yaml.YAMLError) as error:
            raise AppConfigError(f"cannot read config file {path}: {error}") from error
        if loaded is not None and not isinstance(loaded, dict):
            raise AppConfigError(f"config file {path} must hold a mapping at the top level")
        tree = loaded or {}
    pairs = list(overrides.items() if isinstance(overrides, dict) else map(parse_override, overrides or []))
    if len(pairs) > MAX_OVERRIDES:
        raise AppConfigError(f"config_overrides: {len(pairs)} fields, at most {MAX_OVERRIDES}")
    for key, value in pairs:
        if not isinstance(key, str) or not _OVERRIDE_KEY.fullmatch(key):
            raise AppConfigError(
                f"config override {str(key)[:80]!r}: not a dotted config field such as window.size "
                "(see spark_apps/config.py)"
            )
        _set_dotted(tree, key, value)
    kafka = tree.get("kafka")
    if isinstance(kafka, dict) and "security" in kafka:
        raise AppConfigError(
            "kafka.security: Kafka credentials are never part of the app's config; they come from the "
            "Airflow Kafka connection through the launcher (see spark_apps/kafka_security.py)"
        )
    try:
        return StreamingAppConfig.model_validate(tree)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in issue['loc']) or '<root>'}: {issue['msg']}"
            for issue in error.errors()
        )
        raise AppConfigError(f"invalid streaming app config: {problems}") from error


def with_kafka_security(
    config: StreamingAppConfig, security: KafkaClientSecurity | None
) -> StreamingAppConfig:
    """`config` whose Kafka clients use `security` (None: unchanged). Not validated again: the model
    was checked when it was built, and the config must not be re-read from a dump that lacks it."""
    if security is None:
        return config
    kafka: dict[str, Any] = {"security": security}
    if security.bootstrap_servers:
        # The connection's servers as of this launch: a stored config (a restart, a reprocess) never
        # sends the connection's login to servers it names itself.
        kafka["bootstrap_servers"] = security.bootstrap_servers
    return config.model_copy(update={"kafka": config.kafka.model_copy(update=kafka)})
