"""Kafka clients built from the Airflow connection's client config get only the settings they take."""

from __future__ import annotations

from typing import Any

from revenue_platform.kafka_connection import admin_client, without_consumer_settings
from tests.kafka_helpers import ClientLog

# What the local stack's kafka_default connection holds: a consumer group for the provider's consumers.
LOCAL_EXTRA: dict[str, Any] = {"bootstrap.servers": "localhost:1", "group.id": "airflow-control-plane"}


def _librdkafka_says(build: Any, client_config: dict[str, Any]) -> list[str]:
    """What librdkafka logs while creating a client from `client_config` (no broker needed)."""
    collected = ClientLog()
    client = build({**client_config, "logger": collected.logger})
    client.poll(0.5)  # librdkafka hands its log lines to the logger on poll
    return collected.lines


def test_an_admin_client_from_the_connection_logs_no_configuration_warning() -> None:
    from confluent_kafka.admin import AdminClient

    # The extra as it is: librdkafka warns once per consumer setting (the red ERROR lines in task logs).
    said = _librdkafka_says(AdminClient, LOCAL_EXTRA)
    assert any("group.id is a consumer property" in line for line in said), said
    said = _librdkafka_says(admin_client, LOCAL_EXTRA)
    assert not [line for line in said if "CONFWARN" in line], said


def test_producers_and_admin_clients_keep_every_setting_but_the_consumer_ones() -> None:
    secured = {
        **LOCAL_EXTRA,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "client.id": "platform",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    assert without_consumer_settings(secured) == {
        "bootstrap.servers": "localhost:1",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "client.id": "platform",
    }
