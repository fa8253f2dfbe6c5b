"""Typed configuration of the orders streaming app, loaded from one YAML file plus overrides.

Window size and slide, watermark (the seed's grace period), trigger, rate limit, topics,
lake location and deployment id are configuration, not code. Invalid configuration
fails at start, before any query runs, with an error naming the field.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from spark_apps.contract import OrderRules
from spark_apps.kafka_security import KafkaClientSecurity, is_security_key
from spark_apps.naming import DeploymentNames, validate_deployment_id

_INTERVAL = re.compile(r"^\s*(\d+)\s+(second|seconds|minute|minutes|hour|hours|day|days)\s*$")
_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
# Kafka's own rule for topic names (249 characters at most; "." and ".." are reserved).
TOPIC_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
MAX_TOPIC_NAME = 249
# Bounds that keep state and waits finite: a window (and the watermark that keeps it open) of
# more than a day would hold state the app is not sized for, and makes reprocessing wait as long.
MAX_WINDOW_SECONDS = 86400
MAX_WATERMARK_SECONDS = 86400
MAX_TRIGGER_SECONDS = 3600
# The largest amount DECIMAL(18,2) holds: an order amount must fit the platform's money type.
MAX_ORDER_AMOUNT = Decimal("9999999999999999.99")


class AppConfigError(ValueError):
    """The app's configuration is invalid; the message names the field."""


def interval_seconds(interval: str) -> int:
    """Seconds in a Spark interval string such as '15 seconds' or '1 hour'."""
    match = _INTERVAL.match(interval)
    if not match:
        raise ValueError(f"{interval!r} is not an interval like '15 seconds', '5 minutes' or '1 hour'")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).rstrip("s")]


def bounded_interval(value: str, maximum_s: int) -> str:
    """`value` if it is an interval of 1 second to `maximum_s` seconds; else ValueError saying so."""
    seconds = interval_seconds(value)
    if not 1 <= seconds <= maximum_s:
        raise ValueError(f"{value!r} must be between 1 second and {maximum_s} seconds, got {seconds} s")
    return value


def validate_topic_name(value: str) -> str:
    """`value` if Kafka accepts it as a topic name; else ValueError naming the rule."""
    if not TOPIC_NAME_PATTERN.match(value) or value in (".", ".."):
        raise ValueError(
            f"{value!r} is not a Kafka topic name: 1-249 characters of letters, digits, '.', '_' or '-', "
            "and not '.' or '..'"
        )
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# The topics a deployment writes (the rest it only reads); two deployments never share one.
OUTPUT_TOPIC_FIELDS = ("dlq_topic", "general_orders_topic", "restaurant_orders_topic", "revenue_topic")


class KafkaConfig(_Strict):
    bootstrap_servers: str = "localhost:9092"
    """Comma-separated bootstrap servers."""
    orders_topic: str = "orders"
    stores_topic: str = "stores"
    dlq_topic: str = "orders_dlq"
    general_orders_topic: str = "general_orders"
    restaurant_orders_topic: str = "restaurant_orders"
    revenue_topic: str = "revenue_windows"
    starting_offsets: str = "earliest"
    """Where a NEW deployment starts: earliest, latest, or Spark's per-partition JSON; a checkpoint wins."""
    starting_timestamp_ms: int | None = Field(default=None, ge=0)
    """If set, a NEW deployment starts at the first offset at/after this time (epoch ms) in every
    partition (Spark's `startingTimestamp`, which takes precedence over starting_offsets)."""
    max_offsets_per_trigger: int | None = Field(default=None, ge=1)
    """Upper bound of records per micro-batch (back-pressure); None = unbounded."""
    options: dict[str, str] = Field(default_factory=dict)
    """Extra settings of Spark's Kafka source and sink (Java client keys without the `kafka.` prefix,
    e.g. request.timeout.ms). Not security settings: those come from the Kafka connection (`security`)."""
    security: KafkaClientSecurity | None = Field(default=None, exclude=True, repr=False)
    """Credentials and transport security, attached by the driver from its launcher's environment
    (`with_kafka_security`); never read from config files or overrides, never dumped."""

    @field_validator("options")
    @classmethod
    def _no_security_options(cls, value: dict[str, str]) -> dict[str, str]:
        security = sorted(key for key in value if is_security_key(key.removeprefix("kafka.")))
        if security:
            raise ValueError(
                f"{security} are security settings: put them into the extra of the Airflow Kafka "
                "connection (kafka_default), whose credentials reach the app without being stored in "
                "its config"
            )
        return value

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


class HistoryConfig(_Strict):
    """Replay history from a bronze archive instead of Kafka (a blue-green replay when Kafka's retention
    no longer holds everything the live deployment has seen).

    For each partition of the orders topic, records before `kafka_offsets[p]` are read from
    `bronze_table` (the raw Kafka records another deployment archived, exactly once each), and Kafka is
    read from `kafka_offsets[p]` on; -2 means "no history in bronze, read Kafka from its earliest".
    Both feed the same stream, so deduplication and window state see one continuous history.
    """

    bronze_table: str
    kafka_offsets: dict[int, int] = Field(min_length=1)

    @field_validator("kafka_offsets")
    @classmethod
    def _offsets(cls, value: dict[int, int]) -> dict[int, int]:
        bad = {p: o for p, o in value.items() if p < 0 or o < -2 or o == -1}
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
        if self.slide is not None and interval_seconds(self.slide) > interval_seconds(self.size):
            raise ValueError("slide must not be longer than size")
        return self


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

    max_future_skew: str = "5 minutes"
    """How far an order's orderedDateTime may be ahead of its Kafka record timestamp (producer/broker
    clock skew); further ahead is `event_time_in_future`. Old orders are never refused."""
    max_order_amount: Decimal = Field(default=Decimal("1000000.00"), gt=0, le=MAX_ORDER_AMOUNT)
    """Largest accepted finalAmount; larger is `amount_too_large`."""

    @field_validator("max_future_skew")
    @classmethod
    def _skew(cls, value: str) -> str:
        return bounded_interval(value, MAX_WATERMARK_SECONDS)

    @field_validator("max_order_amount")
    @classmethod
    def _cents(cls, value: Decimal) -> Decimal:
        if value != value.quantize(Decimal("0.01")):
            raise ValueError("must be a whole number of cents")
        return value

    def rules(self) -> OrderRules:
        return OrderRules(interval_seconds(self.max_future_skew), self.max_order_amount)


class StreamingAppConfig(_Strict):
    """Everything the orders streaming app needs to run one deployment."""

    deployment_id: str = "blue"
    """Namespace of this deployment's checkpoints, tables and consumer group."""
    app_version: str = "dev"
    """Free-form version label recorded with the deployment."""
    lake_root: str = Field(default=".local/lake", min_length=1)
    """Root of Delta tables and checkpoints: a local path or an object-store URI. Any root is allowed
    here (an operator may point the app at an object store); the control plane keeps roots that come
    from a trigger form inside the platform's lake (revenue_platform.paths.require_inside_lake)."""
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    window: WindowConfig = Field(default_factory=WindowConfig)
    trigger: TriggerConfig = Field(default_factory=TriggerConfig)
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    engine: Literal["two_queries", "one_query"] | None = None
    """one_query: one micro-batch goes from Kafka to gold, with the revenue state in the driver
    (spark_apps.one_query): a record waits for one batch. two_queries: an ingest query (Kafka ->
    bronze and side outputs), then a revenue query streaming from bronze through Spark's stateful
    dedupe and windows into gold: a record waits for two. None: one_query for a new deployment, and
    the engine of its checkpoints for an existing one. A deployment keeps the engine it started with;
    change it with a blue-green replay (a new deployment)."""
    shuffle_partitions: int = Field(default=2, ge=1)
    """spark.sql.shuffle.partitions: one partition per core of the local stack (docs/performance.md,
    stop 16). The stateful operators keep the count recorded in their checkpoint whatever is
    configured (Spark pins their state store layout); the other shuffles of a batch use this value."""
    lease_token: str | None = None
    """Fencing token issued by the deployment registry; when set, the app refuses to start unless the
    registry's current token for this deployment is the same (never two drivers per deployment)."""
    registry_root: str | None = None
    """Lake root holding the deployment registry (`<root>/_registry`); None means lake_root."""
    history: HistoryConfig | None = None
    """Set only for a replay from bronze; then kafka.starting_offsets/starting_timestamp_ms are unused."""

    @field_validator("deployment_id")
    @classmethod
    def _deployment_id(cls, value: str) -> str:
        return validate_deployment_id(value)

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

    def output_topics(self) -> dict[str, str]:
        """Config field -> topic of every topic this deployment writes."""
        return {name: getattr(self.kafka, name) for name in OUTPUT_TOPIC_FIELDS}

    @property
    def names(self) -> DeploymentNames:
        return DeploymentNames(self.lake_root, self.deployment_id)


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
    return key.strip(), yaml.safe_load(raw) if raw.strip() else ""


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
    pairs = overrides.items() if isinstance(overrides, dict) else (parse_override(o) for o in overrides or [])
    for key, value in pairs:
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
    return config.model_copy(update={"kafka": config.kafka.model_copy(update={"security": security})})
