"""The topic spec loader: shipped specs are valid, and every kind of mistake names its topic and field."""

from __future__ import annotations

import pickle
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from revenue_platform.kafka_connection import KafkaConnectionConfigError, client_config_from_extra
from revenue_platform.topics.configs import TOPIC_CONFIGS, normalize_config_value
from revenue_platform.topics.errors import TopicSpecError
from revenue_platform.topics.provision import load_spec_step
from revenue_platform.topics.spec import (
    DEFAULT_SPEC_PATH,
    TopicSpec,
    default_spec_path,
    load_topic_spec,
    parse_topic_spec,
    resolve_environment,
    select_topics,
)

SHIPPED_SPECS = sorted(DEFAULT_SPEC_PATH.parent.glob("*.y*ml"))
PLATFORM_TOPICS = {
    "orders",
    "stores",
    "general_orders",
    "restaurant_orders",
    "orders_dlq",
    "revenue_windows",
}

VALID = """
version: 1
environments:
  local:
    replication_factor: 1
    configs:
      min.insync.replicas: "1"
  cluster:
    replication_factor: 3
    configs:
      min.insync.replicas: 2
topics:
  - name: orders
    description: Raw orders.
    partitions: 4
    replication_factor: 3
    configs:
      cleanup.policy: delete
      retention.ms: 604800000
  - name: stores
    description: Stores.
    partitions: 1
    replication_factor: 3
    configs:
      cleanup.policy: compact
"""


def edited(edit: object) -> str:
    """VALID with ``edit(document)`` applied, as YAML text."""
    document = yaml.safe_load(VALID)
    assert callable(edit)
    edit(document)
    return yaml.safe_dump(document, sort_keys=False)


def orders(document: dict) -> dict:
    return document["topics"][0]


def spec_error(text: str, environment: str = "local") -> TopicSpecError:
    with pytest.raises(TopicSpecError) as caught:
        parse_topic_spec(text, environment)
    return caught.value


# --- the shipped spec ---------------------------------------------------------------------------


def test_a_spec_file_is_shipped() -> None:
    assert DEFAULT_SPEC_PATH in SHIPPED_SPECS


@pytest.mark.parametrize("path", SHIPPED_SPECS, ids=lambda p: p.name)
def test_every_shipped_spec_is_valid_in_every_environment(path: Path) -> None:
    environments = yaml.safe_load(path.read_text())["environments"]
    assert environments, f"{path} declares no environments"
    for environment in environments:
        specs = load_topic_spec(path, environment)
        assert specs, environment
        assert all(spec.description for spec in specs)


def test_the_shipped_spec_declares_every_platform_topic_as_the_platform_needs_it() -> None:
    local = {spec.name: spec for spec in load_topic_spec(DEFAULT_SPEC_PATH, "local")}
    # Exactly what the platform reads or writes: the registry lives in Delta (`<lake>/_registry`),
    # so no `platform_registry` topic is declared for it.
    assert set(local) == PLATFORM_TOPICS
    week_ms = str(7 * 24 * 3600 * 1000)
    assert local["orders"].partitions == 4
    assert local["orders"].configs["cleanup.policy"] == "delete"
    assert local["orders"].configs["retention.ms"] == week_ms
    for compacted in ("stores", "revenue_windows"):
        assert local[compacted].compacted, compacted
    assert 1 <= local["stores"].partitions <= 4
    assert int(local["orders_dlq"].configs["retention.ms"]) > int(week_ms)
    assert "location|type|window_start" in local["revenue_windows"].description


def test_environment_overrides_apply_to_every_topic() -> None:
    local = load_topic_spec(DEFAULT_SPEC_PATH, "local")
    cluster = load_topic_spec(DEFAULT_SPEC_PATH, "cluster")
    assert {(s.replication_factor, s.configs["min.insync.replicas"]) for s in local} == {(1, "1")}
    assert {(s.replication_factor, s.configs["min.insync.replicas"]) for s in cluster} == {(3, "2")}
    # Everything else is the same spec.
    assert [s.partitions for s in local] == [s.partitions for s in cluster]


def test_environment_comes_from_the_argument_then_platform_env_then_local(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PLATFORM_ENV", raising=False)
    assert resolve_environment(None) == "local"
    monkeypatch.setenv("PLATFORM_ENV", "cluster")
    assert resolve_environment(None) == "cluster"
    assert resolve_environment("local") == "local"


def test_the_spec_path_can_be_overridden(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TOPIC_SPEC_PATH", raising=False)
    assert default_spec_path() == DEFAULT_SPEC_PATH
    monkeypatch.setenv("TOPIC_SPEC_PATH", str(tmp_path / "x.yaml"))
    assert default_spec_path() == tmp_path / "x.yaml"


# --- values are normalised to what Kafka reports ------------------------------------------------


def test_config_values_are_normalised_to_kafka_strings() -> None:
    specs = parse_topic_spec(VALID, "cluster")
    assert specs[0].configs == {
        "cleanup.policy": "delete",
        "retention.ms": "604800000",
        "min.insync.replicas": "2",
    }
    assert normalize_config_value("cleanup.policy", "delete, compact") == "compact,delete"
    assert normalize_config_value("preallocate", True) == "true"
    assert normalize_config_value("min.cleanable.dirty.ratio", 0.50) == "0.5"
    assert normalize_config_value("retention.ms", "-1") == "-1"


def test_the_config_catalogue_has_no_config_removed_in_kafka_4() -> None:
    assert "message.downconversion.enable" not in TOPIC_CONFIGS
    assert "message.format.version" not in TOPIC_CONFIGS
    assert {"cleanup.policy", "retention.ms", "min.insync.replicas", "segment.bytes"} <= set(TOPIC_CONFIGS)


def test_topic_spec_round_trips_through_a_dict() -> None:
    for spec in parse_topic_spec(VALID):
        assert TopicSpec.from_dict(spec.to_dict()) == spec


# --- every mistake names the topic and the field ------------------------------------------------

CASES = [
    ("unknown key", lambda d: orders(d).update(partition_count=4), "partition_count", "unknown key"),
    ("string partitions", lambda d: orders(d).update(partitions="4"), "partitions", "valid integer"),
    ("bool partitions", lambda d: orders(d).update(partitions=True), "partitions", "valid integer"),
    ("zero partitions", lambda d: orders(d).update(partitions=0), "partitions", "greater than or equal to 1"),
    (
        "zero replicas",
        lambda d: orders(d).update(replication_factor=0),
        "replication_factor",
        "greater than or equal to 1",
    ),
    ("missing description", lambda d: orders(d).pop("description"), "description", "Field required"),
    ("two-line description", lambda d: orders(d).update(description="a\nb"), "description", "single line"),
    (
        "unknown config",
        lambda d: orders(d)["configs"].update({"retention.msec": 1}),
        "configs.retention.msec",
        "unknown Kafka topic config",
    ),
    (
        "config removed in Kafka 4",
        lambda d: orders(d)["configs"].update({"message.downconversion.enable": True}),
        "configs.message.downconversion.enable",
        "removed in Kafka 4.0",
    ),
    (
        "bad cleanup.policy",
        lambda d: orders(d)["configs"].update({"cleanup.policy": "compacted"}),
        "configs.cleanup.policy",
        "compact, delete",
    ),
    (
        "empty cleanup.policy",
        lambda d: orders(d)["configs"].update({"cleanup.policy": ""}),
        "configs.cleanup.policy",
        "at least one",
    ),
    (
        "duration with a unit",
        lambda d: orders(d)["configs"].update({"retention.ms": "7d"}),
        "configs.retention.ms",
        "milliseconds",
    ),
    (
        "impossible retention",
        lambda d: orders(d)["configs"].update({"retention.ms": -2}),
        "configs.retention.ms",
        "between -1",
    ),
    (
        "boolean config as a number",
        lambda d: orders(d)["configs"].update({"preallocate": 1}),
        "configs.preallocate",
        "true or false",
    ),
    (
        "ratio above 1",
        lambda d: orders(d)["configs"].update({"min.cleanable.dirty.ratio": 1.5}),
        "configs.min.cleanable.dirty.ratio",
        "between",
    ),
    (
        "segment below Kafka 4's floor",
        lambda d: orders(d)["configs"].update({"segment.bytes": 1024}),
        "configs.segment.bytes",
        "between 1048576",
    ),
    (
        "min.insync.replicas above the replication factor",
        lambda d: (
            d["environments"]["local"].pop("configs"),
            orders(d)["configs"].update({"min.insync.replicas": 2}),
        ),
        "configs.min.insync.replicas",
        "exceeds replication_factor 1",
    ),
    (
        "min compaction lag above max",
        lambda d: orders(d)["configs"].update({"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5}),
        "configs.min.compaction.lag.ms",
        "greater than max.compaction.lag.ms",
    ),
    ("illegal name", lambda d: orders(d).update(name="orders v2"), "name", "letters, digits"),
    ("reserved name", lambda d: orders(d).update(name="__orders"), "name", "reserved"),
]


@pytest.mark.parametrize(("edit", "field", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_invalid_topic_entry_is_reported_with_topic_and_field(
    edit: object, field: str, message: str
) -> None:
    error = spec_error(edited(edit))
    assert len(error.issues) == 1, error
    issue = error.issues[0]
    assert issue.field == field
    assert issue.topic in ("orders", "orders v2", "__orders")
    assert f"topic {issue.topic!r}, field {field!r}" in str(error)
    assert re.search(message, issue.message), issue.message


def test_a_duplicate_topic_name_names_the_topic() -> None:
    error = spec_error(edited(lambda d: d["topics"][1].update(name="orders")))
    assert [(i.topic, i.field) for i in error.issues] == [("orders", "name")]
    assert "duplicate topic name" in str(error)


def test_a_duplicate_yaml_key_is_an_error_not_a_silent_overwrite() -> None:
    text = VALID.replace("    partitions: 4\n", "    partitions: 4\n    partitions: 8\n")
    error = spec_error(text)
    assert error.issues[0].field == "partitions"
    assert "duplicate key" in str(error)


def test_an_unnamed_topic_entry_is_named_by_its_position() -> None:
    error = spec_error(edited(lambda d: d["topics"][1].pop("name")))
    assert [(i.topic, i.field) for i in error.issues] == [("topics[1]", "name")]


def test_unknown_environment_lists_the_available_ones() -> None:
    error = spec_error(VALID, environment="staging")
    assert error.issues[0].field == "environment"
    assert "local" in str(error)
    assert "cluster" in str(error)


def test_file_level_mistakes_name_the_field() -> None:
    error = spec_error(edited(lambda d: d.update(defaults={"partitions": 1})))
    assert [(i.topic, i.field) for i in error.issues] == [(None, "defaults")]
    error = spec_error(edited(lambda d: d["environments"]["local"]["configs"].update({"retention.msec": 1})))
    assert [i.field for i in error.issues] == ["environments.local.configs.retention.msec"]
    error = spec_error(edited(lambda d: d.update(version=2)))
    assert [i.field for i in error.issues] == ["version"]


def test_all_problems_are_reported_at_once() -> None:
    def break_both(document: dict) -> None:
        orders(document).update(partitions=0)
        document["topics"][1]["configs"]["cleanup.policy"] = "compactt"

    error = spec_error(edited(break_both))
    assert {(i.topic, i.field) for i in error.issues} == {
        ("orders", "partitions"),
        ("stores", "configs.cleanup.policy"),
    }


def test_the_file_name_is_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "topics.yaml"
    path.write_text(edited(lambda d: orders(d).update(partitions=0)))
    with pytest.raises(TopicSpecError, match=str(path)):
        load_topic_spec(path, "local")
    with pytest.raises(TopicSpecError, match="cannot read"):
        load_topic_spec(tmp_path / "missing.yaml", "local")


def test_invalid_yaml_is_a_spec_error() -> None:
    assert spec_error("topics: [unclosed").issues[0].field == "yaml"


def test_spec_errors_survive_pickling() -> None:
    error = spec_error(edited(lambda d: orders(d).update(partitions=0)))
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


# --- the run's request is validated against the spec --------------------------------------------


def test_selecting_topics_keeps_spec_order_and_rejects_unknown_names() -> None:
    specs = parse_topic_spec(VALID)
    assert [s.name for s in select_topics(specs, [])] == ["orders", "stores"]
    assert [s.name for s in select_topics(specs, ["stores"])] == ["stores"]
    with pytest.raises(TopicSpecError, match="topic 'payments', field 'topics'"):
        select_topics(specs, ["payments"])


def test_load_spec_step_validates_the_whole_request(tmp_path: Path) -> None:
    path = tmp_path / "topics.yaml"
    path.write_text(textwrap.dedent(VALID))
    payload = load_spec_step("cluster", ["stores"], ["orders"], spec_path=path)
    assert payload["environment"] == "cluster"
    assert [t["name"] for t in payload["topics"]] == ["stores"]
    assert payload["allow_destructive"] == ["orders"]
    with pytest.raises(TopicSpecError, match="topic 'payments', field 'allow_destructive'"):
        load_spec_step("local", [], ["payments"], spec_path=path)


# --- the Kafka connection --------------------------------------------------------------------------


def test_a_connection_without_bootstrap_servers_fails_clearly() -> None:
    with pytest.raises(KafkaConnectionConfigError, match=r"'kafka_default' has no 'bootstrap\.servers'"):
        client_config_from_extra({"security.protocol": "SASL_SSL"})
    config = {"bootstrap.servers": "broker:9092", "security.protocol": "SASL_SSL"}
    assert client_config_from_extra(config) == config
    assert client_config_from_extra(config) is not config
