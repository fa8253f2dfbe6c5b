"""Kafka security settings: read from a connection extra, translated once per client library, never dumped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark_apps.contract.config import AppConfigError, load_config, with_kafka_security
from spark_apps.contract.kafka_security import KAFKA_SECURITY_ENV, KafkaClientSecurity, KafkaSecurityError
from spark_apps.storage.kafka import kafka_admin_config, kafka_client_options

PASSWORD = 'p@ss "word" \\ with quotes'
SCRAM_EXTRA: dict[str, Any] = {
    "bootstrap.servers": "broker:9093",
    "group.id": "airflow-control-plane",
    "security.protocol": "sasl_ssl",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "platform",
    "sasl.password": PASSWORD,
    "ssl.ca.location": "/etc/kafka/ca.pem",
}


def scram() -> KafkaClientSecurity:
    return KafkaClientSecurity.from_client_config(SCRAM_EXTRA, "test connection")


def test_a_scram_login_becomes_the_java_client_s_jaas_config_and_librdkafka_s_own_keys() -> None:
    security = scram()
    assert security.java_options() == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="platform" password="p@ss \\"word\\" \\\\ with quotes";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/kafka/ca.pem",
    }
    assert security.librdkafka_config() == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "platform",
        "sasl.password": PASSWORD,
        "ssl.ca.location": "/etc/kafka/ca.pem",
    }


def test_plain_and_plaintext_and_hostname_checks_translate_too() -> None:
    plain = KafkaClientSecurity.from_client_config(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
        },
        "c",
    )
    assert plain.java_options()["kafka.sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule required"
    )
    assert KafkaClientSecurity.from_client_config({"bootstrap.servers": "b:1"}, "c").java_options() == {}
    assert KafkaClientSecurity.from_client_config({}, "c").librdkafka_config() == {}
    unchecked = KafkaClientSecurity.from_client_config(
        {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none"}, "c"
    )
    assert unchecked.java_options()["kafka.ssl.endpoint.identification.algorithm"] == ""
    assert unchecked.librdkafka_config()["ssl.endpoint.identification.algorithm"] == "none"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "needs sasl.mechanism, sasl.username"),
        (
            {"sasl.username": "u", "sasl.password": "p", "sasl.mechanism": "PLAIN"},
            "security.protocol is PLAINTEXT",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.username": "u"},
            "sasl_mechanism",
        ),
        ({"security.protocol": "SSL", "ssl.certificate.location": "/c.pem"}, "ssl.certificate.location"),
        ({"security.protocol": "TLS"}, "protocol"),
    ],
)
def test_settings_that_cannot_reach_both_clients_are_refused_naming_the_key(
    extra: dict[str, Any], message: str
) -> None:
    with pytest.raises(KafkaSecurityError, match=message) as refused:
        KafkaClientSecurity.from_client_config({**extra, "sasl.password": "secret-value"}, "connection 'k'")
    assert "connection 'k'" in str(refused.value)
    assert "secret-value" not in str(refused.value)


def test_the_password_is_masked_in_repr_and_dumps_and_travels_only_in_the_environment() -> None:
    security = scram()
    assert PASSWORD not in repr(security)
    assert PASSWORD not in security.model_dump_json()
    environment = security.environment()
    assert set(environment) == {KAFKA_SECURITY_ENV}
    assert KafkaClientSecurity.from_environment(environment) == security
    assert KafkaClientSecurity.from_environment({}) is None
    with pytest.raises(KafkaSecurityError) as broken:
        KafkaClientSecurity.from_environment({KAFKA_SECURITY_ENV: '{"protocol": "SASL_SSL", "x": "leak"}'})
    assert "leak" not in str(broken.value)


def test_the_app_config_carries_security_but_never_dumps_or_reads_it() -> None:
    config = with_kafka_security(load_config(None, {"kafka.bootstrap_servers": "broker:9093"}), scram())
    assert config.kafka.security == scram()
    assert "security" not in config.model_dump()["kafka"]
    assert PASSWORD not in config.model_dump_json()
    assert PASSWORD not in repr(config)
    assert with_kafka_security(config, None) is config
    with pytest.raises(AppConfigError, match="never part of the app's config"):
        load_config(None, {"kafka.security": {"protocol": "SASL_SSL"}})


def test_security_settings_are_refused_in_kafka_options(tmp_path: Path) -> None:
    with pytest.raises(AppConfigError, match="Airflow Kafka connection"):
        load_config(None, {"kafka.options": {"sasl.jaas.config": "x"}})
    config_file = tmp_path / "app.yaml"
    config_file.write_text(json.dumps({"kafka": {"options": {"kafka.security.protocol": "SSL"}}}))
    with pytest.raises(AppConfigError, match="security settings"):
        load_config(config_file)
    assert load_config(None, {"kafka.options": {"request.timeout.ms": "5000"}}).kafka.options


def test_spark_gets_java_keys_and_the_side_channels_get_librdkafka_keys_only() -> None:
    config = with_kafka_security(
        load_config(
            None, {"kafka.bootstrap_servers": "broker:9093", "kafka.options": {"fetch.max.wait.ms": "100"}}
        ),
        scram(),
    )
    spark_options = kafka_client_options(config)
    assert spark_options["kafka.bootstrap.servers"] == "broker:9093"
    assert spark_options["kafka.fetch.max.wait.ms"] == "100"
    assert "ScramLoginModule" in spark_options["kafka.sasl.jaas.config"]
    # librdkafka would reject the Java client's keys (fetch.max.wait.ms, sasl.jaas.config).
    assert kafka_admin_config(config) == {"bootstrap.servers": "broker:9093", **scram().librdkafka_config()}
    plaintext = load_config(None, {"kafka.bootstrap_servers": "b:1"})
    assert kafka_admin_config(plaintext) == {"bootstrap.servers": "b:1"}
    assert kafka_client_options(plaintext) == {"kafka.bootstrap.servers": "b:1"}


def test_a_stored_config_never_takes_the_connections_login_to_its_own_servers() -> None:
    """A restart or a reprocess launches a config stored in the registry; the servers it names (a form
    could set them before this was refused) give way to the connection's, whose login it carries."""
    stored = load_config(None, {"kafka.bootstrap_servers": "elsewhere.example:9092"})
    security = KafkaClientSecurity.from_client_config(
        {
            "bootstrap.servers": "broker-1:9096,broker-2:9096",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "platform",
            "sasl.password": "s3cret",
        },
        "test",
    )
    handed_over = KafkaClientSecurity.from_environment(security.environment())
    assert handed_over is not None
    launched = with_kafka_security(stored, handed_over)
    assert launched.kafka.bootstrap_servers == "broker-1:9096,broker-2:9096"
    assert launched.kafka.security == security
