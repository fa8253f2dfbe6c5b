"""Topics, launches and exactly-once checks shared by the cluster fault tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from revenue_platform import processes
from revenue_platform.orders_generator import GeneratedRecord, expected_windows
from revenue_platform.spark_submit import spark_submit_command, spark_submit_env
from spark_apps.contract.config import StreamingAppConfig
from spark_apps.contract.naming import local_path
from tests.kafka_helpers import APP_TOPIC_FIELDS, COMPACTED_APP_TOPICS, app_topic_overrides

Gold = dict[tuple[str, str, datetime], tuple[int, Decimal]]


def create_replicated_app_topics(bootstrap: str, suffix: str) -> dict[str, str]:
    """The app's topics for `suffix` as the spec's `cluster` environment makes them: 3 replicas,
    min ISR 2 (an acknowledged write survives one broker). Returns the app's topic overrides."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = []
    for base in APP_TOPIC_FIELDS.values():
        config = {"min.insync.replicas": "2"}
        if base in COMPACTED_APP_TOPICS:
            config["cleanup.policy"] = "compact"
        topics.append(NewTopic(f"{base}_{suffix}", 4 if base == "orders" else 2, 3, config=config))
    for future in admin.create_topics(topics).values():
        future.result(timeout=60)
    return app_topic_overrides(suffix)


def partition_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> leader broker id."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=15)
    return {p: meta.leader for p, meta in metadata.topics[topic].partitions.items()}


def launch_app(
    master: str, overrides: dict[str, Any], log: Path, extra_env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """The streaming app as its own process group (spark-submit JVM + Python driver), client mode."""
    args: list[str] = []
    for key, value in overrides.items():
        args += ["--set", f"{key}={value}"]
    with log.open("ab") as out:
        return subprocess.Popen(
            spark_submit_command("orders_streaming_app.py", args, master=master),
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**spark_submit_env(), **(extra_env or {})},
            start_new_session=True,
        )


def stop_app(app: subprocess.Popen[bytes], config: StreamingAppConfig, timeout_s: float = 120) -> None:
    """Graceful stop (SIGTERM to the Python driver: the batch in flight commits first), then the
    group is killed."""
    if app.poll() is None:
        status_file = Path(local_path(config.names.driver_status_file))
        python_pid = None
        with contextlib.suppress(OSError, ValueError, KeyError):
            python_pid = int(json.loads(status_file.read_text())["pid"])
        processes.terminate(app.pid, timeout_s, signal.SIGTERM, signal_pid=python_pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            app.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(app.pid, signal.SIGKILL)
    app.wait(timeout=30)


def revenue_batch(config: StreamingAppConfig, query: str = "revenue") -> int:
    """The query's last committed batch id, from the progress file the app writes (-1: none)."""
    progress = Path(config.names.progress_dir) / f"{config.names.query_name(query)}.json"
    try:
        return int(json.loads(progress.read_text())["batch_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return -1


def wait_for(
    condition: Callable[[], bool],
    what: str,
    timeout_s: float,
    app: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        tail = log.read_text(errors="replace")[-3000:] if log else ""
        if app is not None:
            assert app.poll() is None, f"app exited ({app.returncode}) while waiting for {what}:\n{tail}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}; app log tail:\n{tail}"
        time.sleep(1)


def oracle(records: list[GeneratedRecord]) -> Gold:
    return {k: (w.order_count, w.revenue) for k, w in expected_windows(records, window_seconds=15).items()}


def gold(table_path: str) -> Gold:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(table_path)
    except TableNotFoundError:
        return {}
    rows = table.to_pyarrow_table().to_pylist()
    found = {
        (r["location_id"], r["order_type"], r["window_start"].replace(tzinfo=None)): (
            r["order_count"],
            r["revenue"],
        )
        for r in rows
    }
    assert len(found) == len(rows), "a window key appears twice in gold"
    return found


def bronze_offsets(table_path: str) -> list[tuple[int, int]]:
    """(partition, offset) of every bronze row: each consumed record must be there exactly once."""
    from deltalake import DeltaTable

    rows = DeltaTable(table_path).to_pyarrow_table(columns=["partition", "offset"]).to_pylist()
    return [(r["partition"], r["offset"]) for r in rows]


def cents(gold_rows: Gold) -> int:
    return int(sum((revenue for _, revenue in gold_rows.values()), Decimal("0")) * 100)
