"""The streaming app's exit status for each way a start can end: a refusal (which a restart would meet
again) apart from a failure a restart may get past. The app's run is replaced; nothing starts Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_apps import orders_streaming_app
from spark_apps.contract.driver_exit import DRIVER_CRASHED, DRIVER_REFUSED
from spark_apps.contract.kafka_cluster import (
    KafkaClusterChangedError,
    KafkaClusterCheckError,
    KafkaClusterUnreachableError,
)
from spark_apps.engine.checkpoints import CheckpointMigrationError


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (KafkaClusterChangedError("deployment 'demo' may not start: another cluster"), DRIVER_REFUSED),
        (KafkaClusterCheckError("_kafka_cluster.json names no kafka_cluster_id"), DRIVER_REFUSED),
        (CheckpointMigrationError("deployment demo was started by a retired engine"), DRIVER_REFUSED),
        (KafkaClusterUnreachableError("cannot read the Kafka cluster id within 30s"), DRIVER_CRASHED),
    ],
)
def test_a_start_that_cannot_pass_again_exits_refused_and_one_that_may_does_not(
    error: Exception,
    status: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def refuse(_config: object) -> None:
        raise error

    monkeypatch.setattr(orders_streaming_app, "run", refuse)
    assert orders_streaming_app.main(["--set", f"lake_root={tmp_path / 'lake'}"]) == status
    assert capsys.readouterr().err.strip() == f"ERROR: {error}"


def test_a_config_that_does_not_load_is_a_refusal(tmp_path: Path) -> None:
    assert orders_streaming_app.main(["--config", str(tmp_path / "missing.yaml")]) == DRIVER_REFUSED
