"""The Airflow connections the platform's DAGs use, named once.

The local stack creates the Kafka and Spark ones (`local_stack.airflow_local.connection_env`),
docker-compose declares them, and every task reads them through these ids: Kafka client settings
(including credentials) live in the Kafka connection's extra, the Spark master in the Spark
connection. The alerts connection is the operator's to create (docs/operations.md, Notifications).
"""

from __future__ import annotations

from typing import Final

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
