"""The services a benchmark run starts beside the app: its own Kafka broker with the app's topics, and
Airflow standalone (the control plane as `make up` runs it). Never the demo's or the tests'."""

from __future__ import annotations

import os
import shutil
from typing import Any

from bench.run import BenchRun
from revenue_platform.local_stack.kafka_broker import KafkaBrokerSettings, LocalKafkaBroker

ORDERS_PARTITIONS = 4


def start_broker(run: BenchRun) -> LocalKafkaBroker:
    data_dir = run.settings.state_dir / "kafka"
    broker = LocalKafkaBroker(
        KafkaBrokerSettings(
            port=run.settings.kafka_port,
            controller_port=run.settings.controller_port,
            data_dir=data_dir,
            heap=os.environ.get("KAFKA_HEAP", "1g"),
        )
    )
    broker.stop(progress=run.log)  # a broker left by an interrupted run
    # Every run starts from empty topics and an empty lake.
    shutil.rmtree(data_dir, ignore_errors=True)
    shutil.rmtree(run.lake_root, ignore_errors=True)
    broker.start(progress=run.log)
    return broker


def create_topics(bootstrap: str, orders_topics: list[str]) -> None:
    """The app's topics; orders topics stamp LogAppendTime, the append time latency is measured from."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = [
        NewTopic(t, ORDERS_PARTITIONS, 1, config={"message.timestamp.type": "LogAppendTime"})
        for t in orders_topics
    ]
    wanted += [
        NewTopic("stores", 1, 1, config={"cleanup.policy": "compact"}),
        NewTopic("revenue_windows", 1, 1, config={"cleanup.policy": "compact"}),
        *(NewTopic(t, 1, 1) for t in ("orders_dlq", "general_orders", "restaurant_orders")),
    ]
    existing = set(admin.list_topics(timeout=30).topics)
    futures = admin.create_topics([t for t in wanted if t.topic not in existing])
    for future in futures.values():
        future.result(timeout=30)


def bench_airflow_settings(run: BenchRun) -> Any:
    from revenue_platform.local_stack.airflow_local import AirflowLocalSettings

    return AirflowLocalSettings(
        home=run.settings.state_dir / "airflow",
        port=run.settings.airflow_port,
        kafka_bootstrap_servers=run.bootstrap,
    )


def start_airflow(run: BenchRun) -> Any:
    """The control plane as `make up` runs it, pointed at the bench's lake, with DAG schedules off.

    Schedules off (no supervise runs every minute) keeps the measured Spark work the bench's own;
    what remains is the idle control plane's memory and CPU: API server, scheduler, DAG processor.
    """
    from revenue_platform.local_stack.airflow_local import LocalAirflow

    os.environ["PLATFORM_STATE_DIR"] = str(run.settings.state_dir)
    os.environ["PLATFORM_LAKE_ROOT"] = run.lake_root
    os.environ["AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE"] = "False"
    airflow = LocalAirflow(bench_airflow_settings(run))
    airflow.start(progress=run.log)
    return airflow
