"""Issue 29, items 1, 2 and 5: what a form, a release or `--set` can no longer do (pure logic).

1. Kafka servers and security come only from the Airflow connection: no form names a host, and
   `kafka.options` is an allow-list of the Java client's tuning keys.
2. A deployment writes only topics no deployment reads and no other deployment writes.
5. Every value has a bound, identifiers are full-string matched, every request refuses unknown keys.

Each refusal is the platform's ConfigError (or the app's AppConfigError) naming the field, raised by
the functions the DAGs' first tasks call, before anything is registered, launched or written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from revenue_platform.bluegreen.release import publish
from revenue_platform.bluegreen.request import ReplayRequest
from revenue_platform.errors import ConfigError
from revenue_platform.registry import DeploymentRegistry
from revenue_platform.streaming.deploy import resolve_config
from revenue_platform.streaming.request import DeployRequest
from spark_apps.contract.config import AppConfigError, load_config
from spark_apps.contract.naming import validate_deployment_id
from tests.registry_helpers import register_deployment


def _resolve(lake: Path, overrides: dict[str, Any], deployment_id: str = "green", **kwargs: Any) -> Any:
    return resolve_config(
        DeployRequest(deployment_id, config_overrides=overrides, **kwargs),
        str(lake),
        "connection-broker:9092",
        DeploymentRegistry(str(lake)),
    )


def _nothing_written(lake: Path) -> bool:
    return not (lake / "_registry").exists() or DeploymentRegistry(str(lake)).find("green") is None


# --- 1. hosts come from the connection only ------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"kafka.bootstrap_servers": "elsewhere.example:9092"}, "kafka.bootstrap_servers"),
        ({"kafka": {"bootstrap_servers": "elsewhere.example:9092"}}, "kafka.bootstrap_servers"),
        ({"kafka.options": {"bootstrap.servers": "elsewhere.example:9092"}}, "bootstrap.servers"),
        ({"kafka.options": {"kafka.bootstrap.servers": "elsewhere.example:9092"}}, "bootstrap.servers"),
        ({"kafka.options": {"client.dns.lookup": "use_all_dns_ips"}}, "client.dns.lookup"),
        ({"kafka.options": {"interceptor.classes": "evil.Interceptor"}}, "interceptor.classes"),
        ({"kafka.options": {"metric.reporters": "evil.Reporter"}}, "metric.reporters"),
        ({"kafka.options": {"auto.offset.reset": "earliest"}}, "auto.offset.reset"),
        ({"kafka.options": {"request.timeout.ms": "elsewhere.example:9092"}}, "request.timeout.ms"),
        ({"kafka.options": {"request.timeout.ms": "9" * 40}}, "request.timeout.ms"),
    ],
)
def test_a_form_cannot_send_the_credentials_to_another_host(
    tmp_path: Path, overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        _resolve(tmp_path, overrides)
    assert _nothing_written(tmp_path)


def test_the_connection_servers_win_and_tuning_keys_pass(tmp_path: Path) -> None:
    config = _resolve(
        tmp_path,
        {"kafka.options": {"request.timeout.ms": "30000", "linger.ms": "5", "compression.type": "zstd"}},
    )
    assert config.kafka.bootstrap_servers == "connection-broker:9092"
    assert config.kafka.options["compression.type"] == "zstd"


@pytest.mark.parametrize(
    "options",
    [
        {"bootstrap.servers": "elsewhere.example:9092"},
        {"interceptor.classes": "x"},
        {"fetch.max.bytes": "-1"},
    ],
)
def test_kafka_options_are_an_allow_list_everywhere(options: dict[str, str]) -> None:
    # --set and config files go through the same model as the forms.
    with pytest.raises(AppConfigError, match=r"kafka\.options"):
        load_config(None, {"kafka.options": options})


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        # Kafka's internal topics: dead letters or split orders written into them corrupt the cluster.
        ({"kafka.dlq_topic": "__consumer_offsets"}, "kafka.dlq_topic"),
        ({"kafka.revenue_topic": "__transaction_state"}, "kafka.revenue_topic"),
        ({"kafka.general_orders_topic": "__share_group_state"}, "kafka.general_orders_topic"),
        ({"kafka.orders_topic": "__consumer_offsets"}, "kafka.orders_topic"),
        # The client id the broker lets write internal topics.
        ({"kafka.options": {"client.id": "__admin_client"}}, "client.id"),
        # Silent loss of dead letters and split-topic records.
        ({"kafka.options": {"acks": "0"}}, "acks"),
        ({"kafka.options": {"acks": "1"}}, "acks"),
        ({"kafka.options": {"enable.idempotence": "false"}}, "enable.idempotence"),
        ({"kafka.options": {"check.crcs": "false"}}, "check.crcs"),
    ],
)
def test_a_form_cannot_write_kafka_internals_or_weaken_delivery(
    tmp_path: Path, overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        _resolve(tmp_path, overrides)
    assert _nothing_written(tmp_path)
    with pytest.raises(AppConfigError, match=field.rsplit(".", 1)[-1]):
        load_config(None, overrides)


def test_a_release_cannot_name_a_host(tmp_path: Path) -> None:
    registry = DeploymentRegistry(str(tmp_path))
    for overrides in (
        {"kafka.bootstrap_servers": "elsewhere.example:9092"},
        {"kafka.options": {"bootstrap.servers": "elsewhere.example:9092"}},
    ):
        with pytest.raises(ConfigError, match="bootstrap"):
            publish(registry, "2.0.0", overrides, True, "", "test", progress=lambda _: None)
    assert registry.releases() == []


# --- 2. outputs never land in anybody's inputs ---------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"kafka.general_orders_topic": "stores"}, "kafka.general_orders_topic"),
        ({"kafka.dlq_topic": "orders"}, "kafka.dlq_topic"),
        ({"kafka.revenue_topic": "orders"}, "kafka.revenue_topic"),
        ({"kafka.dlq_topic": "general_orders"}, "kafka.dlq_topic"),
        ({"kafka.stores_topic": "orders"}, "kafka.stores_topic"),
    ],
)
def test_the_config_refuses_outputs_that_are_its_own_inputs_or_each_other(
    overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(AppConfigError, match=field.replace(".", r"\.")):
        load_config(None, overrides)


def test_a_deployment_cannot_write_what_another_deployment_reads(tmp_path: Path) -> None:
    register_deployment(tmp_path, None, **{"deployment_id": "blue", "kafka.orders_topic": "orders_eu"})
    with pytest.raises(ConfigError, match=r"kafka\.dlq_topic.*'orders_eu'.*blue"):
        _resolve(tmp_path, {"kafka.dlq_topic": "orders_eu"})
    assert _nothing_written(tmp_path)


def test_a_deployment_cannot_read_what_another_deployment_writes(tmp_path: Path) -> None:
    # Reading blue's revenue topic as its "orders" would make blue a writer of a topic someone reads,
    # and blue's next restart would be refused.
    register_deployment(tmp_path, None, **{"deployment_id": "blue"})
    with pytest.raises(
        ConfigError, match=r"kafka\.orders_topic: topic 'revenue_windows' is written by deployment 'blue'"
    ):
        _resolve(tmp_path, {"kafka.orders_topic": "revenue_windows", "kafka.revenue_topic": "evil_revenue"})
    assert _nothing_written(tmp_path)


def test_only_deployments_desired_running_are_checked_at_a_drivers_start(tmp_path: Path) -> None:
    from revenue_platform.registry import DeploymentRegistry
    from spark_apps.contract.topic_ownership import verify_topic_ownership

    register_deployment(tmp_path, None, **{"deployment_id": "old", "kafka.orders_topic": "orders_eu"})
    DeploymentRegistry(str(tmp_path)).update("old", {"desired_state": "stopped"}, "test")
    # A stopped deployment's registration never keeps another from (re)starting.
    verify_topic_ownership(
        str(tmp_path),
        load_config(
            None, {"deployment_id": "blue", "lake_root": str(tmp_path), "kafka.dlq_topic": "orders_eu"}
        ),
    )


def test_a_release_cannot_name_output_topics(tmp_path: Path) -> None:
    registry = DeploymentRegistry(str(tmp_path))
    with pytest.raises(ConfigError, match=r"kafka\.dlq_topic"):
        publish(registry, "2.0.0", {"kafka.dlq_topic": "orders"}, True, "", "test", progress=lambda _: None)
    assert registry.releases() == []


def test_the_app_checks_the_registry_at_start(tmp_path: Path) -> None:
    from spark_apps.contract.topic_ownership import TopicOwnershipError, verify_topic_ownership

    register_deployment(tmp_path, None, **{"deployment_id": "blue", "kafka.orders_topic": "orders_eu"})
    mine = load_config(
        None, {"deployment_id": "green", "lake_root": str(tmp_path), "kafka.dlq_topic": "orders_eu"}
    )
    with pytest.raises(TopicOwnershipError, match=r"kafka\.dlq_topic"):
        verify_topic_ownership(str(tmp_path), mine)
    taken = load_config(None, {"deployment_id": "green", "lake_root": str(tmp_path)})
    with pytest.raises(TopicOwnershipError, match=r"kafka\.revenue_topic.*written by deployment 'blue'"):
        verify_topic_ownership(str(tmp_path), taken)
    own = load_config(
        None,
        {
            "deployment_id": "green",
            "lake_root": str(tmp_path),
            **{
                f"kafka.{name}": f"{name}_green"
                for name in ("dlq_topic", "general_orders_topic", "restaurant_orders_topic", "revenue_topic")
            },
        },
    )
    verify_topic_ownership(str(tmp_path), own)
    # Its own registry row (a restart) is not "another deployment".
    verify_topic_ownership(
        str(tmp_path),
        load_config(
            None, {"deployment_id": "blue", "lake_root": str(tmp_path), "kafka.orders_topic": "orders_eu"}
        ),
    )


# --- 5. bounds, full-string identifiers, unknown keys --------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"shuffle_partitions": 10**9}, "shuffle_partitions"),
        ({"kafka.max_offsets_per_trigger": 10**18}, "kafka.max_offsets_per_trigger"),
        ({"kafka.min_partitions": 10**6}, "kafka.min_partitions"),
        ({"kafka.min_partitions": 0}, "kafka.min_partitions"),
        ({"kafka.starting_timestamp_ms": 9 * 10**18}, "kafka.starting_timestamp_ms"),
        ({"app_version": "v" * 1_000_000}, "app_version"),
        ({"app_version": "1.0\n"}, "app_version"),
        ({"kafka.orders_topic": "orders\n"}, "kafka.orders_topic"),
        ({"deployment_id": "blue\n"}, "deployment_id"),
        ({"kafka.starting_offsets": "somewhere"}, "kafka.starting_offsets"),
        ({"kafka.starting_offsets": '{"orders": {"0": ' + "1" * 70_000 + "}}"}, "kafka.starting_offsets"),
        ({"history": {"bronze_table": "/etc", "kafka_offsets": {0: 5}}}, "history.bronze_table"),
        ({"lease_token": "x" * 10_000}, "lease_token"),
        ({"registry_root": "/lake\n"}, "registry_root"),
        ({"lake_root": "/lake\x00"}, "lake_root"),
    ],
)
def test_every_config_value_has_a_bound(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(AppConfigError, match=field.replace(".", r"\.")):
        load_config(None, overrides)


def test_the_shipped_config_and_ordinary_values_stay_valid() -> None:
    config = load_config(
        Path("include/config/streaming_app.yaml"),
        {
            "shuffle_partitions": 10_000,
            "kafka.max_offsets_per_trigger": 50_000_000,
            "kafka.min_partitions": 10_000,
            "kafka.starting_offsets": '{"orders": {"0": 5, "1": -2}}',
            "app_version": "2.1.0+build.7",
            "history": {"bronze_table": "/lake/bronze/orders_raw/blue", "kafka_offsets": {0: 5}},
        },
    )
    assert config.shuffle_partitions == 10_000


def test_a_trailing_newline_is_no_deployment_id() -> None:
    with pytest.raises(ValueError, match="deployment_id"):
        validate_deployment_id("blue\n")


def test_a_replay_from_bronze_reads_only_a_registered_deployments_bronze(tmp_path: Path) -> None:
    register_deployment(tmp_path, deployment_id="blue")
    outside = {
        "history": {
            "bronze_table": str(tmp_path / "gold" / "revenue_windows" / "blue"),
            "kafka_offsets": {0: 1},
        }
    }
    with pytest.raises(ConfigError, match=r"history\.bronze_table"):
        _resolve(tmp_path, outside)
    unknown = {
        "history": {
            "bronze_table": str(tmp_path / "bronze" / "orders_raw" / "nobody"),
            "kafka_offsets": {0: 1},
        }
    }
    with pytest.raises(ConfigError, match=r"history\.bronze_table.*not the bronze table of a registered"):
        _resolve(tmp_path, unknown)
    known = {
        "history": {"bronze_table": str(tmp_path / "bronze" / "orders_raw" / "blue"), "kafka_offsets": {0: 1}}
    }
    assert _resolve(tmp_path, known).history is not None


def test_a_deploy_form_with_an_unbounded_timeout_or_a_loose_version_is_refused() -> None:
    form: dict[str, Any] = {
        "deployment_id": "green",
        "colour": None,
        "version": "1.0",
        "config_overrides": {},
        "starting_offsets": "earliest",
        "start_timeout_s": 180,
    }
    for field, value in (
        ("start_timeout_s", 10**12),
        ("start_timeout_s", float("nan")),
        ("version", "1.0\n"),
        ("version", "a b"),
        ("starting_offsets", "12\n"),
        ("starting_offsets", "١٢٣"),
        ("config_overrides", {f"k{i}": 1 for i in range(500)}),
    ):
        with pytest.raises(ConfigError, match=field):
            resolve_config(DeployRequest.from_params({**form, field: value}), "/lake")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_offsets_behind", 10**15),
        ("catch_up_timeout_s", float("inf")),
        ("poll_interval_s", float("nan")),
        ("poll_interval_s", 0),
        ("grace_period_s", 10**9),
        ("start_timeout_s", 10**9),
        ("stop_timeout_s", 0),
        ("count_tolerance", 10**12),
        ("revenue_tolerance", "1e400"),
        ("revenue_tolerance", "NaN"),
        ("version", "x\n"),
        ("blue_deployment_id", "blue\n"),
        ("green_deployment_id", "green\n"),
        ("quality_thresholds", {"watermark": "100000 days"}),
        ("quality_thresholds", {"window_size": "1 day"}),
        ("quality_thresholds", {"window_slide": "1 second"}),
        ("quality_thresholds", {"bronze_lookback": "3650 days"}),
        ("quality_thresholds", {"freshness_max_lag": "3650 days"}),
        ("quality_thresholds", {"revenue_cieling": "1.00"}),
    ],
)
def test_a_replay_form_is_bounded(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=field):
        ReplayRequest.from_params({"green_deployment_id": "green", field: value})


def test_publish_refuses_unknown_keys_in_its_request() -> None:
    # What the DAG's first task does (`refuse_unknown_conf`) with the form's fields: a misspelled
    # `config_overides` must not publish an immutable version without its config.
    from revenue_platform.airflow.trigger_conf import check_conf_keys
    from revenue_platform.bluegreen.release import PUBLISH_DAG_ID
    from revenue_platform.bluegreen.request import PublishRequest

    conf = {"version": "2.0.0", "config_overides": {"shuffle_partitions": 4}}
    with pytest.raises(ConfigError, match=r"'config_overides' \(did you mean 'config_overrides'\?\)"):
        check_conf_keys(conf, PublishRequest.model_fields, PUBLISH_DAG_ID)
