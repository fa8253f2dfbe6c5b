"""The streaming app's typed config and the deployment naming helper: pure logic."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_apps.contract.config import AppConfigError, load_config
from spark_apps.contract.config_rules import interval_seconds
from spark_apps.contract.naming import (
    HISTORY_CHECKPOINT,
    PIPELINE_CHECKPOINT,
    RETIRED_CHECKPOINTS,
    REVENUE_QUERY_ROLE,
    DeploymentNames,
    local_path,
    query_role,
)
from spark_apps.engine.observability import offsets_behind_latest, summarize_progress

SHIPPED_CONFIG = Path(__file__).resolve().parents[4] / "include" / "config" / "streaming_app.yaml"


def test_the_shipped_config_loads_with_the_seed_window() -> None:
    config = load_config(SHIPPED_CONFIG)
    assert config.window.size == "15 seconds"
    assert config.window.slide is None
    assert config.kafka.orders_topic == "orders"


def test_overrides_are_parsed_as_yaml_and_applied() -> None:
    config = load_config(
        SHIPPED_CONFIG, ["window.slide=5 seconds", "kafka.max_offsets_per_trigger=10", "deployment_id=green"]
    )
    assert config.window.slide == "5 seconds"
    assert config.kafka.max_offsets_per_trigger == 10
    assert config.names.gold_revenue_table.endswith("/gold/revenue_windows/green")


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("window.size=fifteen", "window.size"),
        ("window.slide=1 minute", "window"),  # longer than the 15-second size
        ("kafka.max_offsets_per_trigger=0", "kafka.max_offsets_per_trigger"),
        ("trigger.mode=sometimes", "trigger.mode"),
        ("deployment_id=Blue Team", "deployment_id"),
        ("window.sizee=1 minute", "window.sizee"),
        ("shuffle_partitions=-1", "shuffle_partitions"),
        ("engine=three_queries", "engine"),
    ],
)
def test_invalid_config_fails_naming_the_field(override: str, field: str) -> None:
    with pytest.raises(AppConfigError, match=rf"invalid streaming app config: {field}\b"):
        load_config(SHIPPED_CONFIG, [override])


@pytest.mark.parametrize("engine", ["micro_batch", "one_query", "two_queries", None])
def test_every_name_the_engine_had_still_loads_as_written(tmp_path: Path, engine: str | None) -> None:
    # micro_batch is today's name; one_query its former one, in registered configs and users' YAML
    # (kept as written: a registered config's document and hash stay the same); two_queries the retired
    # engine's, which loads and is refused at start (`engine.checkpoints.refuse_retired_checkpoints`).
    path = tmp_path / "app.yaml"
    path.write_text(f"engine: {engine if engine is not None else 'null'}\n")
    assert load_config(path).engine == engine
    assert load_config(overrides={"engine": engine}).engine == engine


def test_unreadable_config_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("- just\n- a list\n")
    with pytest.raises(AppConfigError, match="mapping at the top level"):
        load_config(tmp_path / "bad.yaml")
    with pytest.raises(AppConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("text", "seconds"), [("15 seconds", 15), ("1 minute", 60), ("2 hours", 7200), ("1 day", 86400)]
)
def test_interval_seconds(text: str, seconds: int) -> None:
    assert interval_seconds(text) == seconds


def _owned(names: DeploymentNames) -> set[str]:
    return {
        names.gold_revenue_table,
        names.bronze_orders_table,
        names.checkpoint("revenue"),
        names.progress_dir,
        names.consumer_group,
        names.spark_app_name,
        names.revenue_producer_id,
    }


def test_names_keep_deployments_apart() -> None:
    blue, green = DeploymentNames("s3a://lake/", "blue"), DeploymentNames("s3a://lake/", "green")
    assert _owned(blue).isdisjoint(_owned(green))
    assert blue.checkpoint("revenue") == "s3a://lake/checkpoints/blue/revenue"
    with pytest.raises(ValueError, match="deployment_id"):
        DeploymentNames("/lake", "../etc")


def test_persistent_names_stay_what_running_deployments_wrote() -> None:
    # Checkpoints and the producer's transactional id are state a restarted driver must find again:
    # renaming one strands every running deployment.
    names = DeploymentNames("/lake", "blue")
    assert [names.checkpoint(n) for n in (PIPELINE_CHECKPOINT, HISTORY_CHECKPOINT)] == [
        "/lake/checkpoints/blue/pipeline",
        "/lake/checkpoints/blue/history",
    ]
    assert RETIRED_CHECKPOINTS == ("ingest", "archive")
    assert names.revenue_producer_id == "orders-revenue-blue-revenue-topic"
    assert names.spark_app_name == names.consumer_group == "orders-revenue-blue"
    assert names.reprocess_app_name == "reprocess-revenue-blue"


def test_progress_files_and_query_roles_round_trip() -> None:
    names = DeploymentNames("file:/lake", "blue")
    assert names.progress_file(REVENUE_QUERY_ROLE) == "file:/lake/progress/blue/blue__revenue.json"
    assert local_path(names.progress_file(REVENUE_QUERY_ROLE)) == Path(
        "/lake/progress/blue/blue__revenue.json"
    )
    assert local_path("/lake/progress") == Path("/lake/progress")
    # Deployment ids may contain '_' (even '__'): the role is what follows the last separator.
    assert (
        query_role(DeploymentNames("/lake", "blue__v2").query_name(REVENUE_QUERY_ROLE)) == REVENUE_QUERY_ROLE
    )


def test_progress_summary_reads_lag_late_rows_and_offsets() -> None:
    progress = {
        "name": "blue__ingest",
        "batchId": 7,
        "numInputRows": 120,
        "durationMs": {"triggerExecution": 900},
        "sources": [
            {
                "description": "KafkaV2[Subscribe[orders]]",
                "endOffset": '{"orders":{"0":40,"1":80}}',
                "metrics": {"maxOffsetsBehindLatest": "12"},
            }
        ],
        "stateOperators": [{"numRowsDroppedByWatermark": 3}, {"numRowsDroppedByWatermark": 2}],
        "eventTime": {"watermark": "2026-11-22T09:00:00.000Z"},
    }
    summary = summarize_progress(progress, {"dead_letters": 4})
    assert summary["end_offsets"] == {"orders": {"0": 40, "1": 80}}
    assert summary["max_offsets_behind_latest"] == 12
    assert summary["rows_dropped_by_watermark"] == 5
    assert summary["batch_duration_ms"] == 900
    assert summary["counters"] == {"dead_letters": 4}


def test_a_query_reading_bronze_reports_no_kafka_offsets_of_its_own() -> None:
    """A replay's history query reads a Delta table: its offsets are no Kafka position to commit."""
    bronze = {
        "description": "DeltaSource[file:/lake/bronze/replay_history/green]",
        "endOffset": '{"reservoirVersion": 4}',
    }
    summary = summarize_progress({"name": "green__history", "sources": [bronze]}, {})
    assert summary["end_offsets"] == {}


def test_offsets_behind_latest_is_that_of_the_furthest_behind_partition() -> None:
    end = {"orders": {"0": 180, "1": 90}}
    assert offsets_behind_latest(end, {"orders": {"0": 200, "1": 90}}) == 20
    assert offsets_behind_latest(end, {"orders": {"0": 180, "1": 90}}) == 0
    # A partition the batch did not read yet is behind by all it holds.
    assert offsets_behind_latest(end, {"orders": {"0": 180, "1": 90, "2": 7}}) == 7
    # Unknown until both are known: never a made-up "0 behind".
    assert offsets_behind_latest(end, {}) is None
    assert offsets_behind_latest({}, {"orders": {"0": 200}}) is None


def test_history_config_validates_cut_over_offsets() -> None:
    config = load_config(
        None,
        {"history": {"bronze_table": "/lake/bronze/orders_raw/blue", "kafka_offsets": {"0": 10, "1": -2}}},
    )
    assert config.history is not None
    assert config.history.kafka_offsets == {0: 10, 1: -2}
    with pytest.raises(AppConfigError, match=r"history\.kafka_offsets"):
        load_config(
            None, {"history": {"bronze_table": "/lake/bronze/orders_raw/blue", "kafka_offsets": {"0": -1}}}
        )
    with pytest.raises(AppConfigError, match=r"history\.kafka_offsets"):
        load_config(None, {"history": {"bronze_table": "/lake/bronze/orders_raw/blue", "kafka_offsets": {}}})


@pytest.mark.parametrize("location", ["/lake", "file:/lake", "file:///lake"])
def test_every_spelling_of_a_local_lake_is_the_same_folder(location: str) -> None:
    from revenue_platform.quality.runner import quality_root

    assert local_path(location) == Path("/lake")
    # Quality reports used to land in a relative folder named "file:" for a `file:/lake` root.
    assert quality_root(location) == Path("/lake/quality")


def test_an_object_store_lakes_quality_folder_is_a_mirror_under_the_state_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from revenue_platform.errors import ConfigError
    from revenue_platform.quality.runner import data_docs_index, data_docs_link, quality_root

    monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path))
    assert quality_root("s3a://lake/teams/revenue") == tmp_path / "quality-mirror/lake/teams/revenue/quality"
    assert (
        data_docs_index("s3a://lake/teams/revenue/")
        == "s3a://lake/teams/revenue/quality/data_docs/index.html"
    )
    assert data_docs_link(data_docs_index("/lake")) == "file:///lake/quality/data_docs/index.html"
    assert "operations view" in data_docs_link(data_docs_index("s3a://lake/x"))
    # A key's `..` must not move the mirror out of the state dir.
    with pytest.raises(ConfigError, match=r"must not contain '\.\.'"):
        quality_root("s3a://lake/../../etc")
