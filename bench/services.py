"""The services a benchmark run starts beside the app: its own Kafka broker with the app's topics, and
Airflow standalone (the control plane as `make up` runs it). Never the demo's or the tests'."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import Any

from bench.run import OBJECT_STORE_LAKE, BenchRun
from bench.topics import app_topics, create_topics, declared, like, spec_topics, stamped_by_producer
from revenue_platform.connections import LAKE_OBJECT_STORE_CONN_ID, connection_env_var
from revenue_platform.local_stack.kafka_broker import KafkaBrokerSettings, LocalKafkaBroker

# The bench's broker is one node: the spec's environment for one broker.
BROKER_SPEC_ENVIRONMENT = "local"
# Live latency is measured from each record's append time: the orders topic must stamp it.
APPEND_TIME = ("message.timestamp.type", "LogAppendTime")


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
    # Every run starts from empty topics and an empty lake (a lake on the store: `start_object_store`).
    shutil.rmtree(data_dir, ignore_errors=True)
    if run.settings.lake != OBJECT_STORE_LAKE:
        shutil.rmtree(run.lake_root, ignore_errors=True)
    broker.start(progress=run.log)
    return broker


def start_object_store(run: BenchRun) -> Any:
    """The run's own S3 server, empty, holding the lake; this process (the bench's readers, its
    Airflow) reaches it through the `lake_object_store` connection, as a deployment does."""
    from revenue_platform.local_object_store import local_store_connection_json
    from revenue_platform.local_stack.object_store import LocalObjectStore

    store = LocalObjectStore(run.object_store)
    store.stop(progress=run.log)  # a store left by an interrupted run
    shutil.rmtree(run.object_store.data_dir, ignore_errors=True)
    store.start(progress=run.log)
    os.environ[connection_env_var(LAKE_OBJECT_STORE_CONN_ID)] = local_store_connection_json(run.object_store)
    return store


def create_run_topics(run: BenchRun, orders_topics: Sequence[str] = ()) -> None:
    """The app's topics as the spec declares them, and `orders_topics` of the bench's own made like the
    app's orders topic (which stamps LogAppendTime, the append time latency is measured from)."""
    specs = spec_topics(BROKER_SPEC_ENVIRONMENT)
    orders = declared(specs, run.orders_topic)
    if orders.configs.get(APPEND_TIME[0]) != APPEND_TIME[1]:
        raise ValueError(
            f"the spec's {orders.name!r} topic must have {APPEND_TIME[0]}={APPEND_TIME[1]}: the bench "
            "measures live latency from each record's append time"
        )
    app = [declared(specs, topic) for topic in app_topics(run.app_config).values()]
    if run.settings.kafka_time == "event":
        app = [stamped_by_producer(spec) if spec.name == run.orders_topic else spec for spec in app]
    create_topics(run.bootstrap, [*app, *(like(orders, topic) for topic in orders_topics)])


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
