"""`trigger.min_records` / `trigger.max_wait`: what the config accepts and what it asks of Spark's Kafka
source (`minOffsetsPerTrigger`, `maxTriggerDelay`). Spark's pacing itself is measured by the bench
(docs/performance.md, "Batches back to back once a backlog waits")."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_apps.contract.config import AppConfigError, load_config
from spark_apps.storage.kafka import batch_size_options

SHIPPED_CONFIG = Path(__file__).resolve().parents[4] / "include" / "config" / "streaming_app.yaml"


def test_the_shipped_config_paces_batches_by_the_interval_alone() -> None:
    config = load_config(SHIPPED_CONFIG)

    assert config.trigger.min_records is None
    assert batch_size_options(config) == {"maxOffsetsPerTrigger": "500000"}


def test_min_records_asks_the_source_for_a_backlog_or_the_longest_wait() -> None:
    config = load_config(
        SHIPPED_CONFIG,
        ["trigger.interval=0 seconds", "trigger.min_records=1000", "trigger.max_wait=3 seconds"],
    )

    assert batch_size_options(config) == {
        "maxOffsetsPerTrigger": "500000",
        "minOffsetsPerTrigger": "1000",
        "maxTriggerDelay": "3s",
    }


def test_min_records_waits_two_seconds_at_most_unless_told_otherwise() -> None:
    # Spark's own default delay is 15 minutes: a trickle of orders would wait that long for its batch.
    config = load_config(SHIPPED_CONFIG, ["trigger.min_records=1"])

    assert batch_size_options(config)["maxTriggerDelay"] == "2s"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (
            ["trigger.mode=available_now", "trigger.min_records=10"],
            r"trigger.min_records \(10\) applies to mode processing_time",
        ),
        (
            ["trigger.min_records=500001"],
            r"min_records \(500001\) is more than kafka.max_offsets_per_trigger",
        ),
        (["trigger.min_records=0"], "trigger.min_records"),
        (["trigger.min_records=many"], "trigger.min_records"),
        (["trigger.min_records=10", "trigger.max_wait=0 seconds"], "trigger.max_wait"),
        (["trigger.min_records=10", "trigger.max_wait=2 hours"], "trigger.max_wait"),
    ],
)
def test_a_pacing_that_cannot_work_fails_before_anything_starts_naming_the_field(
    overrides: list[str], named: str
) -> None:
    with pytest.raises(AppConfigError, match=named):
        load_config(SHIPPED_CONFIG, overrides)
