"""Declarative, idempotent, drift-aware provisioning of the platform's Kafka topics.

``spec`` loads and validates ``include/topics/topics.yaml``; ``plan`` diffs it against the cluster
(pure, no I/O); ``admin`` reads and changes the cluster through confluent_kafka; ``provision`` glues
them into the steps the ``provision_topics`` DAG runs. Only the pure parts are re-exported here so
importing this package (e.g. from a DAG file for its exception types) never loads confluent_kafka.
"""

from revenue_platform.topics.errors import DestructiveChangeRefused, SpecIssue, TopicSpecError
from revenue_platform.topics.plan import (
    Action,
    ConfigDrift,
    ObservedTopic,
    RefusalKind,
    RefusedChange,
    TopicChange,
    TopicPlan,
    compute_plan,
)
from revenue_platform.topics.spec import (
    TopicSpec,
    default_spec_path,
    load_topic_spec,
    parse_topic_spec,
    resolve_environment,
    select_topics,
)

__all__ = [
    "Action",
    "ConfigDrift",
    "DestructiveChangeRefused",
    "ObservedTopic",
    "RefusalKind",
    "RefusedChange",
    "SpecIssue",
    "TopicChange",
    "TopicPlan",
    "TopicSpec",
    "TopicSpecError",
    "compute_plan",
    "default_spec_path",
    "load_topic_spec",
    "parse_topic_spec",
    "resolve_environment",
    "select_topics",
]
