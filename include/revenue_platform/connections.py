"""The Airflow connections the platform's DAGs use, named once.

The local stack creates the Kafka and Spark ones (`local_stack.airflow_local.connection_env`),
docker-compose declares them, and every task reads them through these ids: Kafka client settings
(including credentials) live in the Kafka connection's extra, the Spark master in the Spark
connection. The alerts connection is the operator's to create (docs/operations.md, Notifications).

How a connection is read is the caller's process's business: `read_connection` asks the reader this
process installed. Outside Airflow that is the `AIRFLOW_CONN_<ID>` variable; the Airflow face
(`revenue_platform.airflow`) installs Airflow's own lookup when it is imported, so nothing below the
face imports Airflow.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from revenue_platform.errors import ConfigError

KAFKA_CONN_ID: Final = "kafka_default"
SPARK_CONN_ID: Final = "spark_default"
# The S3-compatible store the lake is on when its root is s3a:// (endpoint and region in the extra, the
# access key pair as login and password); optional: without it the local stack's store is used.
LAKE_OBJECT_STORE_CONN_ID: Final = "lake_object_store"
# Where alerts go (SMTP server in its fields, channels in its extra); optional: without it nothing is sent.
ALERTS_CONN_ID: Final = "platform_alerts"


def connection_env_var(conn_id: str) -> str:
    """The environment variable Airflow reads a connection from (`AIRFLOW_CONN_<ID>`)."""
    return f"AIRFLOW_CONN_{conn_id.upper()}"


@dataclass(frozen=True)
class ConnectionFields:
    """What the platform reads of a connection: Airflow's `Connection` fields, without Airflow."""

    host: str | None = None
    port: int | None = None
    login: str | None = None
    password: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


ConnectionReader = Callable[[str], "ConnectionFields | None"]


def connection_from_environment(conn_id: str) -> ConnectionFields | None:
    """The connection `AIRFLOW_CONN_<ID>` defines in Airflow's JSON form, None when it is not set.

    What a process outside Airflow (the demo, a benchmark) can read without Airflow; inside Airflow
    the face's reader (`revenue_platform.airflow.connections`) asks Airflow itself, which also knows
    the URI form, the metadata DB and secrets backends. A variable this reader cannot read is a
    ConfigError naming it."""
    name = connection_env_var(conn_id)
    text = os.environ.get(name)
    if text is None:
        return None
    expected = (
        f"{name} must be a connection in Airflow's JSON form, e.g. "
        '{"conn_type": "kafka", "extra": {"bootstrap.servers": "localhost:9092"}} (outside Airflow the '
        "platform reads no other form)"
    )
    try:
        fields = json.loads(text)
    except ValueError:
        raise ConfigError(expected) from None
    if not isinstance(fields, dict):
        raise ConfigError(expected)
    extra = fields.get("extra") or {}
    if isinstance(extra, str):
        try:
            extra = json.loads(extra) if extra.strip() else {}
        except ValueError:
            raise ConfigError(f"{name}: its extra is not JSON. {expected}") from None
    if not isinstance(extra, dict):
        raise ConfigError(f"{name}: its extra must be a JSON object. {expected}")
    port = fields.get("port")
    whole = isinstance(port, int) and not isinstance(port, bool)
    if port is not None and not (whole or (isinstance(port, str) and port.isdigit())):
        raise ConfigError(f"{name}: port {str(port)[:20]!r} is not a number. {expected}")
    return ConnectionFields(
        host=_text(fields.get("host")),
        port=int(port) if port is not None else None,
        login=_text(fields.get("login")),
        password=_text(fields.get("password")),
        extra=extra,
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


_reader: ConnectionReader = connection_from_environment


def use_connection_reader(reader: ConnectionReader) -> None:
    """Read connections with `reader` from now on in this process (the Airflow face installs Airflow's)."""
    global _reader
    _reader = reader


def read_connection(conn_id: str) -> ConnectionFields | None:
    """Connection `conn_id`'s fields, None when no such connection is defined (call inside a task,
    never at parse time: Airflow's reader may ask the metadata DB or a secrets backend)."""
    return _reader(conn_id)
