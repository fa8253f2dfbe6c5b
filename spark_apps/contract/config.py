"""Typed configuration of the orders streaming app, loaded from one YAML file plus overrides.

The `kafka` section is `kafka_config`; the rules fields share are `config_rules`. Pyspark-free.

Window size and slide, watermark (the seed's grace period), trigger, rate limit, topics,
lake location and deployment id are configuration, not code. Invalid configuration
fails at start, before any query runs, with an error naming the field.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from spark_apps.contract.config_rules import (
    WHOLE_CENTS,
    StrictModel,
    ascii_digits,
    bounded_interval,
    interval_seconds,
    validate_root,
    validation_problems,
)
from spark_apps.contract.kafka_config import (
    INPUT_TOPIC_FIELDS,
    MAX_OFFSET,
    MAX_OFFSETS_PER_TRIGGER,
    MAX_PARTITIONS,
    MAX_TOPIC_NAME,
    OUTPUT_TOPIC_FIELDS,
    KafkaConfig,
)
from spark_apps.contract.kafka_security import KafkaClientSecurity
from spark_apps.contract.naming import DeploymentNames, validate_deployment_id
from spark_apps.contract.records import OrderRules

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
# App version labels: printable ASCII without leading or trailing spaces (forms take the stricter
# semver-like VERSION_PATTERN of revenue_platform.bluegreen.triggers; older rows may hold more).
APP_VERSION_PATTERN = re.compile(r"[!-~](?:[ -~]{0,126}[!-~])?")
# Lease tokens as the registry issues them (`<epoch>-<12 hex>`), with room to change the format.
LEASE_TOKEN_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class AppConfigError(ValueError):
    """The app's configuration is invalid; the message names the field."""


# What precedes the deployment id in every bronze archive's path (naming.py is the one definition).
BRONZE_TABLE_INFIX = DeploymentNames("", "x").bronze_orders_table.removesuffix("x")


class HistoryConfig(StrictModel):
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


class WindowConfig(StrictModel):
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


class DedupeConfig(StrictModel):
    horizon: str = "1 hour"
    """How far back a copy of an order is recognised as a repeat of the one before it (Kafka
    timestamps; spark_apps.contract.records.DEDUPE_RULE), 1 s..7 days. The stream keeps one horizon of order
    ids in Spark's state store; the reprocess job and the quality suite read one horizon more. A
    changed horizon applies from the next start; ids a shorter one already forgot stay forgotten."""

    @field_validator("horizon")
    @classmethod
    def _horizon(cls, value: str) -> str:
        return bounded_interval(value, MAX_DEDUPE_HORIZON_SECONDS)

    @property
    def horizon_seconds(self) -> int:
        return interval_seconds(self.horizon)


class TriggerConfig(StrictModel):
    mode: Literal["processing_time", "available_now"] = "processing_time"
    """processing_time: run forever; available_now: process what is there, then stop (tests, backfills)."""
    interval: str = "5 seconds"
    """Micro-batch interval in processing_time mode; 0 seconds: back to back (the next batch starts as
    soon as the one before has ended while records wait; an idle app polls Kafka every
    `engine.session.IDLE_POLL_MS`)."""

    min_records: int | None = Field(default=None, ge=1, le=MAX_OFFSETS_PER_TRIGGER, strict=True)
    """processing_time only, 1..50,000,000: a batch starts once at least this many records wait in
    the orders topic, or once `max_wait` has passed since the batch before started, whichever comes
    first (Spark's Kafka source options `minOffsetsPerTrigger` and `maxTriggerDelay`). With
    `interval: 0 seconds` that is batches back to back while a backlog of this size waits and at
    most `max_wait` apart otherwise: at most rate / min_records + 1 / max_wait batches a second,
    and no order waits longer than `max_wait` for its batch to start (docs/performance.md,
    "Batches back to back once a backlog waits"). null: a batch every `interval`."""
    max_wait: str = "2 seconds"
    """With `min_records`: the longest a batch waits for them, 1 second to 1 hour."""

    @field_validator("interval")
    @classmethod
    def _interval(cls, value: str) -> str:
        if interval_seconds(value) == 0:
            return value
        return bounded_interval(value, MAX_TRIGGER_SECONDS)

    @field_validator("max_wait")
    @classmethod
    def _max_wait(cls, value: str) -> str:
        return bounded_interval(value, MAX_TRIGGER_SECONDS)

    @model_validator(mode="after")
    def _min_records_need_processing_time(self) -> TriggerConfig:
        # availableNow reads everything there is in bounded batches: a minimum has nothing to wait for.
        if self.min_records is not None and self.mode != "processing_time":
            raise ValueError(
                f"trigger.min_records ({self.min_records}) applies to mode processing_time, not {self.mode}: "
                "unset it (null) for a bounded run"
            )
        return self


class ValidationConfig(StrictModel):
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
    max_order_amount: Annotated[Decimal, ascii_digits(16), WHOLE_CENTS] = Field(
        default=Decimal("1000000.00"), gt=0, le=MAX_ORDER_AMOUNT
    )
    """Largest accepted finalAmount; larger is `amount_too_large`."""

    @field_validator("max_future_skew")
    @classmethod
    def _skew(cls, value: str | None) -> str | None:
        return None if value is None else bounded_interval(value, MAX_WATERMARK_SECONDS)

    @field_validator("max_past_age")
    @classmethod
    def _past_age(cls, value: str) -> str:
        return bounded_interval(value, MAX_PAST_AGE_SECONDS)


class StreamingAppConfig(StrictModel):
    """Everything the orders streaming app needs to run one deployment."""

    deployment_id: str = "blue"
    """Namespace of this deployment's checkpoints, tables and consumer group: a lowercase letter, then
    up to 62 lowercase letters, digits, '_' or '-' (spark_apps.contract.naming.DEPLOYMENT_ID_PATTERN)."""
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
    engine: Literal["micro_batch", "one_query", "two_queries"] | None = None
    """micro_batch (or None, the same): each micro-batch goes from Kafka to gold in one step
    (spark_apps.engine.micro_batch). one_query is the same engine's former name: still read (in
    registered configs, in YAML) and kept as written, so a registered config's stored document and its
    hash stay what they were. two_queries names the retired two-query engine: it is still read in
    registered configs, and a deployment that names it (or whose checkpoints it wrote) is refused at
    start with the way out, a blue-green replay into a new deployment, which does not inherit it."""
    shuffle_partitions: int = Field(default=2, ge=1, le=MAX_SHUFFLE_PARTITIONS, strict=True)
    """spark.sql.shuffle.partitions, 1..10,000: one partition per core of the local stack
    (bench/results/history.md, "live batches, the JIT and Spark's code cache"). The stateful operators keep
    the count recorded in their checkpoint whatever is configured (Spark pins their state store layout); the
    other shuffles of a batch use this value."""
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
    def _min_records_fit_a_batch(self) -> StreamingAppConfig:
        most = self.kafka.max_offsets_per_trigger
        if self.trigger.min_records is not None and most is not None and self.trigger.min_records > most:
            raise ValueError(
                f"trigger.min_records ({self.trigger.min_records}) is more than "
                f"kafka.max_offsets_per_trigger ({most}): a batch could never hold the records it waits "
                "for; lower trigger.min_records"
            )
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
                "(see spark_apps/contract/config.py)"
            )
        _set_dotted(tree, key, value)
    kafka = tree.get("kafka")
    if isinstance(kafka, dict) and "security" in kafka:
        raise AppConfigError(
            "kafka.security: Kafka credentials are never part of the app's config; they come from the "
            "Airflow Kafka connection through the launcher (see spark_apps/contract/kafka_security.py)"
        )
    try:
        return StreamingAppConfig.model_validate(tree)
    except ValidationError as error:
        raise AppConfigError(f"invalid streaming app config: {validation_problems(error)}") from error


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
