"""A second deployment never writes into the first one's output topics (real Kafka, Spark, Delta).

The first deployment keeps the configured DLQ, split and revenue topics; a second deployment of the
same config gets `<topic>_<deployment>` for each (created at deploy), so consumers of the live
topics count every record once however many deployments run. Asking for a taken topic is refused.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from revenue_platform.errors import ConfigError
from revenue_platform.orders_generator import GeneratorSettings, generate_orders, generate_stores, produce
from revenue_platform.registry import DeploymentRegistry
from revenue_platform.streaming import deploy
from revenue_platform.streaming.deploy import ensure_output_topics, resolve_config
from revenue_platform.streaming.request import DeployRequest
from spark_apps.contract.config import StreamingAppConfig
from spark_apps.orders_streaming_app import run
from tests.kafka_helpers import app_topic_overrides, create_app_topics, read_topic, unique_suffix
from tests.registry_helpers import register_deployment

pytestmark = pytest.mark.integration

BOUNDED = {"trigger.mode": "available_now", "shuffle_partitions": 2}


def output_counts(bootstrap: str, config: StreamingAppConfig) -> dict[str, int]:
    return {field: len(read_topic(bootstrap, topic)) for field, topic in config.output_topics().items()}


def test_a_second_deployment_leaves_the_live_topics_unchanged(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suffix = unique_suffix()
    lake = str(tmp_path / "lake")
    # The platform's YAML, with this test's private topics: both deployments are configured alike.
    shipped = yaml.safe_load(deploy.APP_CONFIG_PATH.read_text())
    for dotted, topic in app_topic_overrides(suffix).items():
        shipped["kafka"][dotted.removeprefix("kafka.")] = topic
    shipped["kafka"]["bootstrap_servers"] = kafka_bootstrap
    platform_yaml = tmp_path / "streaming_app.yaml"
    platform_yaml.write_text(yaml.safe_dump(shipped))
    monkeypatch.setattr(deploy, "APP_CONFIG_PATH", platform_yaml)

    create_app_topics(kafka_bootstrap, suffix)
    settings = GeneratorSettings(
        orders=120, stores=2, start=datetime(2026, 11, 22, 9), span_seconds=60, seed=5, bad_every=20
    )
    produce(kafka_bootstrap, f"stores_{suffix}", generate_stores(2))
    produce(kafka_bootstrap, f"orders_{suffix}", generate_orders(settings))
    registry = DeploymentRegistry(lake)

    first = resolve_config(DeployRequest("first", config_overrides=BOUNDED), lake, None, registry)
    register_deployment(lake, first)
    run(first, spark)
    live = output_counts(kafka_bootstrap, first)
    assert live["dlq_topic"] == 6, live
    assert live["revenue_topic"] > 0, live

    second = resolve_config(DeployRequest("second", config_overrides=BOUNDED), lake, None, registry)
    assert second.output_topics() == {f: f"{t}_second" for f, t in first.output_topics().items()}
    assert second.kafka.orders_topic == first.kafka.orders_topic, "inputs are shared, outputs are not"
    created = ensure_output_topics({"bootstrap.servers": kafka_bootstrap}, second)
    assert created == sorted(second.output_topics().values())
    register_deployment(lake, second)
    run(second, spark)

    assert output_counts(kafka_bootstrap, first) == live, "the live topics gained records"
    assert output_counts(kafka_bootstrap, second) == live, "the second deployment's own topics"

    with pytest.raises(ConfigError, match=r"config_overrides\.kafka\.dlq_topic: topic .* 'first'"):
        resolve_config(
            DeployRequest("third", config_overrides={**BOUNDED, "kafka.dlq_topic": first.kafka.dlq_topic}),
            lake,
            None,
            registry,
        )
