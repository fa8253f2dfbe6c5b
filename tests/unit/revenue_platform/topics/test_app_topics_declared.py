"""topics.yaml is where the platform's topics are declared: every topic the app reads or writes by
default, or with the shipped config, is one of its entries (the bench and the soak take their topics
from it too: tests/unit/bench/test_bench_topics.py)."""

from __future__ import annotations

import pytest

from revenue_platform.paths import APP_CONFIG_PATH
from revenue_platform.topics.spec import default_spec_path, load_topic_spec
from spark_apps.contract.config import load_config
from spark_apps.contract.kafka_config import INPUT_TOPIC_FIELDS, OUTPUT_TOPIC_FIELDS, KafkaConfig

TOPIC_FIELDS = (*INPUT_TOPIC_FIELDS, *OUTPUT_TOPIC_FIELDS)


def declared_topics() -> set[str]:
    return {spec.name for spec in load_topic_spec(default_spec_path())}


@pytest.mark.parametrize("field", TOPIC_FIELDS)
def test_the_default_topic_of_each_field_is_declared(field: str) -> None:
    default = KafkaConfig.model_fields[field].default
    assert default in declared_topics(), f"kafka.{field} defaults to {default!r}, which topics.yaml lacks"


def test_the_shipped_config_reads_and_writes_only_declared_topics() -> None:
    kafka = load_config(str(APP_CONFIG_PATH)).kafka
    used = {field: getattr(kafka, field) for field in TOPIC_FIELDS}
    assert {f: t for f, t in used.items() if t not in declared_topics()} == {}
    # Every field is checked: a new topic field must join INPUT_ or OUTPUT_TOPIC_FIELDS.
    assert {f for f in KafkaConfig.model_fields if f.endswith("_topic")} == set(TOPIC_FIELDS)
