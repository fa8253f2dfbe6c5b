"""The bench's and the soak's Kafka topics, as the provisioning spec (include/topics/topics.yaml) has them.

The names of the app's topics come from its config (`kafka.*_topic`); partitions, compaction and every
other topic config from the spec's entry of that name, resolved for the spec environment the broker
stands for (the bench's one broker: `local`; the soak's cluster: `cluster`). A topic of the bench's own
(a live phase's orders, the window-heavy replay's) takes the settings of the spec entry it stands in
for, so nothing here restates what the spec declares.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from revenue_platform.topics.spec import TopicSpec, default_spec_path, load_topic_spec
from spark_apps.contract.config import StreamingAppConfig
from spark_apps.contract.kafka_config import INPUT_TOPIC_FIELDS, OUTPUT_TOPIC_FIELDS


class UndeclaredTopicError(LookupError):
    """The app's config names a topic the spec does not declare."""


def app_topics(config: StreamingAppConfig) -> dict[str, str]:
    """Config field (`orders_topic`, ...) -> topic, of every topic the app reads or writes."""
    return {field: getattr(config.kafka, field) for field in (*INPUT_TOPIC_FIELDS, *OUTPUT_TOPIC_FIELDS)}


def spec_topics(environment: str) -> dict[str, TopicSpec]:
    """Every topic the spec declares, resolved for `environment`, by name."""
    return {spec.name: spec for spec in load_topic_spec(default_spec_path(), environment)}


def declared(specs: dict[str, TopicSpec], name: str) -> TopicSpec:
    """The spec's entry for topic `name`; UndeclaredTopicError if the spec has none."""
    if name not in specs:
        raise UndeclaredTopicError(
            f"topic {name!r} of the app's config is not declared in {default_spec_path()}: declare it "
            "there (or point the app's kafka.*_topic at a declared topic)"
        )
    return specs[name]


def like(spec: TopicSpec, name: str) -> TopicSpec:
    """A topic named `name` with `spec`'s partitions, replication factor and configs."""
    return replace(spec, name=name)


def stamped_by_producer(spec: TopicSpec) -> TopicSpec:
    """`spec` keeping the producer's timestamps (CreateTime), for a history stamped on its event-time line."""
    return replace(spec, configs={**spec.configs, "message.timestamp.type": "CreateTime"})


def create_topics(bootstrap: str, topics: Iterable[TopicSpec], timeout_s: float = 60) -> None:
    """Create each of `topics` the broker does not have yet; one it has is left as it is."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    new = [
        NewTopic(topic.name, topic.partitions, topic.replication_factor, config=dict(topic.configs))
        for topic in topics
        if topic.name not in existing
    ]
    if not new:
        return
    for future in admin.create_topics(new).values():
        future.result(timeout=timeout_s)
