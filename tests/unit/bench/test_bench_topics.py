"""The bench's and the soak's topics come from the provisioning spec, not from copies of it."""

from __future__ import annotations

import pytest

from bench.topics import UndeclaredTopicError, app_topics, declared, like, spec_topics, stamped_by_producer
from revenue_platform.paths import APP_CONFIG_PATH
from spark_apps.contract.config import StreamingAppConfig, load_config


def shipped_config() -> StreamingAppConfig:
    """The config the bench runs the app with (include/config/streaming_app.yaml)."""
    return load_config(str(APP_CONFIG_PATH))


def test_every_topic_of_the_app_is_declared_in_the_spec_for_both_environments() -> None:
    topics = app_topics(shipped_config())
    assert set(topics) == {
        "orders_topic",
        "stores_topic",
        "dlq_topic",
        "general_orders_topic",
        "restaurant_orders_topic",
        "revenue_topic",
    }
    for environment in ("local", "cluster"):
        specs = spec_topics(environment)
        assert [declared(specs, name).name for name in topics.values()] == list(topics.values())


def test_a_topic_of_the_bench_s_own_takes_the_settings_of_the_entry_it_mirrors() -> None:
    orders = declared(spec_topics("local"), shipped_config().kafka.orders_topic)
    live = like(orders, "orders_live_1000")
    assert live.name == "orders_live_1000"
    assert (live.partitions, live.replication_factor, live.configs) == (
        orders.partitions,
        orders.replication_factor,
        orders.configs,
    )
    # Live latency is measured from the append time the orders topic stamps.
    assert live.configs["message.timestamp.type"] == "LogAppendTime"


def test_the_cluster_environment_replicates_and_the_local_one_does_not() -> None:
    name = shipped_config().kafka.revenue_topic
    local, cluster = declared(spec_topics("local"), name), declared(spec_topics("cluster"), name)
    assert (local.replication_factor, cluster.replication_factor) == (1, 3)
    assert cluster.configs["min.insync.replicas"] == "2"
    assert local.compacted
    assert cluster.compacted


def test_a_topic_the_spec_does_not_declare_is_named_in_the_error() -> None:
    with pytest.raises(UndeclaredTopicError, match="'orders_typo'"):
        declared(spec_topics("local"), "orders_typo")


def test_a_history_stamped_on_its_event_time_line_keeps_the_producer_s_timestamps() -> None:
    orders = declared(spec_topics("local"), "orders")
    assert orders.configs["message.timestamp.type"] == "LogAppendTime"
    stamped = stamped_by_producer(orders)
    assert stamped.configs["message.timestamp.type"] == "CreateTime"
    assert {k: v for k, v in stamped.configs.items() if k != "message.timestamp.type"} == {
        k: v for k, v in orders.configs.items() if k != "message.timestamp.type"
    }
    assert (stamped.name, stamped.partitions) == (orders.name, orders.partitions)
