"""The `kafka` section of the app's config: servers, topics (input and output), starting offsets,
rate limits and the allow-list of tuning options of Spark's Kafka source and sink. Pyspark-free.
"""

from __future__ import annotations

import json
import re

from pydantic import Field, field_validator

from spark_apps.contract.config_rules import StrictModel
from spark_apps.contract.kafka_security import KafkaClientSecurity, is_security_key

# Kafka's own rule for topic names (249 characters at most; "." and ".." are reserved). Applied with
# `fullmatch`; `$(?!\n)` keeps it a full-string rule where it is searched (JSON schema, see naming.py).
TOPIC_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9._-]{1,249}$(?!\n)")
MAX_TOPIC_NAME = 249
# Bounds of what a form, a release or `--set` can reach (docs/security.md, "Input surfaces"): they
# refuse only what would exhaust memory, overflow a type or point the app somewhere else.
MAX_OFFSETS_PER_TRIGGER = 50_000_000
# 9999-12-31T23:59:59.999Z: the last epoch millisecond a Kafka timestamp and Python's datetime share.
MAX_TIMESTAMP_MS = 253_402_300_799_999
MAX_STARTING_OFFSETS_JSON = 65_536
MAX_PARTITIONS = 100_000
MAX_OFFSET = 2**63 - 1
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
# acks, enable.idempotence and check.crcs only at their safe values: a release that set acks=0,
# enable.idempotence=false or check.crcs=false lost dead letters and split-topic records silently
# (an unacknowledged send, a duplicate or reordered retry, a corrupt fetch passed on).
KAFKA_CHOICE_OPTIONS: dict[str, frozenset[str]] = {
    "compression.type": frozenset({"none", "gzip", "snappy", "lz4", "zstd"}),
    "acks": frozenset({"all", "-1"}),
    "isolation.level": frozenset({"read_committed", "read_uncommitted"}),
    "enable.idempotence": frozenset({"true"}),
    "check.crcs": frozenset({"true"}),
}
# Names the clients report to the brokers (quotas, logs, rack-aware fetching): a plain identifier,
# not one of Kafka's own (the broker lets the client id `__admin_client` write internal topics).
KAFKA_NAME_OPTIONS = frozenset({"client.id", "client.rack"})
# Kafka's internal topics (`__consumer_offsets`, `__transaction_state`, `__share_group_state`, ...)
# and its internal client ids begin with two underscores.
KAFKA_INTERNAL_PREFIX = "__"
KAFKA_OPTION_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
MAX_KAFKA_OPTION_VALUE = 2**31 - 1
# Comma-separated host:port pairs (the connection's servers, or a config file's for a run by hand).
# Both Kafka clients also take a listener-name prefix (`PLAINTEXT://host:9092`) and a trailing comma.
_HOST_PORT = r"(?:[A-Za-z_]{1,32}://)?(?:[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]):[0-9]{1,5}"
_BOOTSTRAP_SERVERS = re.compile(rf"{_HOST_PORT}(?: *, *{_HOST_PORT}){{0,31}} *,?")


def validate_topic_name(value: str) -> str:
    """`value` if Kafka accepts it as a topic name; else ValueError naming the rule."""
    if not TOPIC_NAME_PATTERN.fullmatch(value) or value in (".", ".."):
        raise ValueError(
            f"{value!r} is not a Kafka topic name: 1-249 characters of letters, digits, '.', '_' or '-', "
            "and not '.' or '..'"
        )
    return value


def validate_app_topic(value: str) -> str:
    """`value` if it is a topic name the app may read or write: not one of Kafka's internal topics
    (`__consumer_offsets`, `__transaction_state`, ...), which a dead-letter or split-topic writer
    would corrupt."""
    validate_topic_name(value)
    if value.startswith(KAFKA_INTERNAL_PREFIX):
        raise ValueError(
            f"{value!r} begins with {KAFKA_INTERNAL_PREFIX!r}: Kafka's internal topics are no topics of "
            "the app (name one of include/topics/topics.yaml, or a deployment's own)"
        )
    return value


# The topics a deployment writes (the rest it only reads); two deployments never share one.
OUTPUT_TOPIC_FIELDS = ("dlq_topic", "general_orders_topic", "restaurant_orders_topic", "revenue_topic")


# The topics a deployment reads; no deployment may write one that any deployment reads.
INPUT_TOPIC_FIELDS = ("orders_topic", "stores_topic")


MAX_MIN_PARTITIONS = 10_000


class KafkaConfig(StrictModel):
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

    @field_validator(*INPUT_TOPIC_FIELDS, *OUTPUT_TOPIC_FIELDS)
    @classmethod
    def _topic(cls, value: str) -> str:
        return validate_app_topic(value)


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
        if not KAFKA_OPTION_NAME.fullmatch(value) or value.startswith(KAFKA_INTERNAL_PREFIX):
            raise ValueError(
                f"{key}: {value[:40]!r} must be 1-64 letters, digits, '.', '_' or '-', not beginning "
                f"with {KAFKA_INTERNAL_PREFIX!r} (Kafka's own clients)"
            )
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
