"""Kafka client configuration from Airflow connections (read through `connections.read_connection`).

Every Kafka client the platform builds inside Airflow gets its librdkafka settings from an Airflow
connection (``kafka_default`` unless told otherwise), read the same way the apache-kafka provider
does: the connection's ``extra`` JSON *is* the client config, including ``bootstrap.servers`` and any
SASL/SSL settings, so credentials live in the connection or secrets backend and never in code. The
Spark apps get the same security settings as a ``KafkaClientSecurity`` (``client_security``), which
the launcher hands to their drivers without writing it anywhere. It also builds the platform's
``BrokerUnreachableError`` with a message that says how to fix it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from revenue_platform.connections import KAFKA_CONN_ID as DEFAULT_KAFKA_CONN_ID
from revenue_platform.connections import read_connection
from revenue_platform.errors import BrokerUnreachableError, ConfigError
from spark_apps.contract.kafka_security import KafkaClientSecurity, KafkaSecurityError

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = [
    "DEFAULT_KAFKA_CONN_ID",
    "BrokerUnreachableError",
    "KafkaConnectionConfigError",
    "admin_client",
    "bootstrap_servers",
    "broker_unreachable",
    "client_config_from_connection",
    "client_config_from_extra",
    "client_security",
    "client_security_environment",
    "client_security_from_connection",
    "optional_bootstrap_servers",
    "optional_client_config",
    "without_consumer_settings",
]

# librdkafka's consumer-only properties (CONFIGURATION.md, C/P column "C"; max.partition.fetch.bytes is
# an alias). A connection extra may hold them for consumers (the provider's hooks, `group.id`), but a
# producer, and an admin client, which librdkafka builds as a producer, logs
# "CONFWARN ... is a consumer property and will be ignored by this producer instance" for each: a red
# ERROR line in the task log of every task that creates topics.
CONSUMER_ONLY_SETTINGS = frozenset(
    {
        "auto.commit.enable",
        "auto.commit.interval.ms",
        "auto.offset.reset",
        "check.crcs",
        "consume.callback.max.messages",
        "coordinator.query.interval.ms",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "enable.partition.eof",
        "fetch.error.backoff.ms",
        "fetch.max.bytes",
        "fetch.message.max.bytes",
        "fetch.min.bytes",
        "fetch.queue.backoff.ms",
        "fetch.wait.max.ms",
        "group.id",
        "group.instance.id",
        "group.protocol",
        "group.protocol.type",
        "group.remote.assignor",
        "heartbeat.interval.ms",
        "isolation.level",
        "max.partition.fetch.bytes",
        "max.poll.interval.ms",
        "offset.store.method",
        "offset.store.path",
        "offset.store.sync.interval.ms",
        "partition.assignment.strategy",
        "queued.max.messages.kbytes",
        "queued.min.messages",
        "session.timeout.ms",
    }
)


class KafkaConnectionConfigError(ConfigError):
    """The Airflow connection for Kafka is missing or does not describe a usable client config."""


def broker_unreachable(bootstrap_servers: str, detail: str) -> BrokerUnreachableError:
    """A ``BrokerUnreachableError`` naming the servers and saying how to fix it."""
    return BrokerUnreachableError(
        f"Kafka broker(s) at {bootstrap_servers!r} unreachable: {detail}. "
        "If this is the local stack, start it with `make kafka-up`; otherwise fix "
        "`bootstrap.servers` (and any SASL/SSL settings) in the extra of the Airflow connection "
        f"the task uses ({DEFAULT_KAFKA_CONN_ID!r} by default), e.g. "
        'AIRFLOW_CONN_KAFKA_DEFAULT=\'{"conn_type": "kafka", "extra": {"bootstrap.servers": '
        '"localhost:9092"}}\'.'
    )


def client_config_from_connection(conn_id: str = DEFAULT_KAFKA_CONN_ID) -> dict[str, Any]:
    """Return the librdkafka client config stored in the extra of connection ``conn_id``.

    Read with `connections.read_connection` (inside Airflow: Airflow's own lookup, the same
    connection/secrets machinery as the Kafka provider's operators). Raises
    ``KafkaConnectionConfigError`` when the connection does not exist or has no ``bootstrap.servers``.
    """
    connection = read_connection(conn_id)
    if connection is None:
        raise KafkaConnectionConfigError(
            f"Airflow connection {conn_id!r} is not defined. "
            "Define it with a JSON extra holding the librdkafka settings, e.g. "
            'AIRFLOW_CONN_KAFKA_DEFAULT=\'{"conn_type": "kafka", "extra": {"bootstrap.servers": '
            '"localhost:9092"}}\'.'
        )
    return client_config_from_extra(dict(connection.extra), conn_id=conn_id)


def client_config_from_extra(extra: Any, *, conn_id: str = DEFAULT_KAFKA_CONN_ID) -> dict[str, Any]:
    """Validate a connection extra as a librdkafka config and return a copy of it."""
    if not isinstance(extra, dict):
        raise KafkaConnectionConfigError(
            f"Airflow connection {conn_id!r}: extra must be a JSON object of librdkafka settings, "
            f"got {type(extra).__name__}."
        )
    bootstrap = extra.get("bootstrap.servers")
    if not isinstance(bootstrap, str) or not bootstrap.strip():
        raise KafkaConnectionConfigError(
            f"Airflow connection {conn_id!r} has no 'bootstrap.servers' in its extra. All Kafka "
            'client settings come from the extra, e.g. {"bootstrap.servers": "localhost:9092"} '
            "(plus security.protocol / sasl.* / ssl.* for secured clusters)."
        )
    # A copy, so callers adding per-client settings never mutate the hook's cached dict.
    return dict(extra)


def without_consumer_settings(client_config: Mapping[str, Any]) -> dict[str, Any]:
    """The client config for a producer or an admin client: the connection's settings but the
    consumer-only ones (`CONSUMER_ONLY_SETTINGS`), which such a client would only warn about."""
    return {key: value for key, value in client_config.items() if key not in CONSUMER_ONLY_SETTINGS}


def admin_client(client_config: Mapping[str, Any]) -> AdminClient:
    """A confluent-kafka AdminClient for the connection's client config (`without_consumer_settings`)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(without_consumer_settings(client_config))


def bootstrap_servers(client_config: dict[str, Any]) -> str:
    """The bootstrap servers of a client config, for error messages and logs (never credentials)."""
    return str(client_config.get("bootstrap.servers", "<no bootstrap.servers>"))


def client_security(
    client_config: dict[str, Any], *, conn_id: str = DEFAULT_KAFKA_CONN_ID
) -> KafkaClientSecurity:
    """The security settings (protocol, SASL login, CA) of a connection's client config, for the Spark
    apps' Kafka clients; ``KafkaConnectionConfigError`` naming the key when one cannot be carried over."""
    try:
        return KafkaClientSecurity.from_client_config(client_config, f"Airflow connection {conn_id!r}")
    except KafkaSecurityError as error:
        raise KafkaConnectionConfigError(str(error)) from None


def client_security_from_connection(conn_id: str = DEFAULT_KAFKA_CONN_ID) -> KafkaClientSecurity | None:
    """``client_security`` of Airflow connection ``conn_id`` (call inside a task, never at parse time).

    None without a usable connection, as for the bootstrap servers: the app then uses its config's
    servers in plaintext. Security settings the apps cannot use fail, naming the key.
    """
    try:
        client_config = client_config_from_connection(conn_id)
    except KafkaConnectionConfigError:
        return None
    return client_security(client_config, conn_id=conn_id)


def client_security_environment(conn_id: str = DEFAULT_KAFKA_CONN_ID) -> dict[str, str]:
    """The connection's security settings as the variable a driver reads ({} for plaintext or no
    connection), for a spark-submit child's environment only
    (`spark_submit_operator.PlatformSparkSubmitOperator`'s `secret_environment`).

    Not ``env_vars``: that is a rendered template field, stored in the metadata DB and shown in the UI.
    Not this process's ``os.environ`` either: a process that runs more than one task (``dag.test()``,
    ``airflow dags test``) would keep one task's login for the next, also when that one's connection
    is plaintext.
    """
    security = client_security_from_connection(conn_id)
    if security is None or security.protocol == "PLAINTEXT":
        return {}
    return security.environment()


def optional_client_config(conn_id: str = DEFAULT_KAFKA_CONN_ID) -> dict[str, Any] | None:
    """The connection's client config; None without a usable connection (then the app config's
    `kafka.bootstrap_servers` applies and nothing is checked against the broker up front)."""
    try:
        return client_config_from_connection(conn_id)
    except KafkaConnectionConfigError:
        return None


def optional_bootstrap_servers(conn_id: str = DEFAULT_KAFKA_CONN_ID) -> str | None:
    """Bootstrap servers of the connection; None without one (the config file's default applies)."""
    client_config = optional_client_config(conn_id)
    return None if client_config is None else bootstrap_servers(client_config)
