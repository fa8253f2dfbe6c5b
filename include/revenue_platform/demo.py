"""`make demo`: the platform's main job on the embedded stack, as a user would run it.

Assumes `make up` has started Kafka and Airflow (the Makefile does that first). Then:
provision the topics through the `provision_topics` DAG (triggered over Airflow's REST
API), produce stores and a batch of orders in the seed's JSON format (with a few
malformed and duplicate records), run the streaming app over them with spark-submit
(a bounded `availableNow` run), and print the windowed revenue it wrote to gold, read
back with the `deltalake` package (no Spark needed to read the results).
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime
from decimal import Decimal

from revenue_platform.errors import PlatformError
from revenue_platform.local_stack.airflow_api import AirflowApiClient
from revenue_platform.local_stack.airflow_local import (
    LOCAL_ADMIN_PASSWORD,
    LOCAL_ADMIN_USER,
    AirflowLocalSettings,
)
from revenue_platform.local_stack.kafka_broker import KafkaBrokerSettings
from revenue_platform.orders_generator import GeneratorSettings, generate_orders, generate_stores, produce
from revenue_platform.paths import REPO_ROOT, state_dir
from revenue_platform.spark_submit import spark_submit_command, spark_submit_env

DEMO_DEPLOYMENT = "demo"
DEMO_ORDERS = 3000


def _say(message: str) -> None:
    print(message, flush=True)


def provision_topics(airflow: AirflowLocalSettings) -> None:
    client = AirflowApiClient(airflow.base_url, LOCAL_ADMIN_USER, LOCAL_ADMIN_PASSWORD)
    _say("[demo] 1/4 provisioning topics with the provision_topics DAG ...")
    client.run_and_wait("provision_topics", {"dry_run": False}, timeout_s=300, progress=_say)


def produce_sample_data(bootstrap: str) -> GeneratorSettings:
    # Event times start at the current minute, so every demo run adds new windows.
    now = datetime.now(UTC).replace(second=0, microsecond=0, tzinfo=None)
    settings = GeneratorSettings(
        orders=DEMO_ORDERS,
        stores=5,
        start=now,
        span_seconds=90,
        seed=int(now.timestamp()),
        duplicate_every=50,
        bad_every=100,
        first_order_id=int(now.timestamp()) * 10_000,
    )
    _say(f"[demo] 2/4 producing 5 stores and {DEMO_ORDERS} orders (event time from {now:%H:%M} UTC) ...")
    produce(bootstrap, "stores", generate_stores(settings.stores), progress=_say)
    produce(bootstrap, "orders", generate_orders(settings), total=DEMO_ORDERS, progress=_say)
    return settings


def run_streaming_app(bootstrap: str, lake_root: str) -> None:
    log_path = state_dir() / "demo" / "orders_streaming_app.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = spark_submit_command(
        "orders_streaming_app.py",
        [
            "--config",
            str(REPO_ROOT / "include" / "config" / "streaming_app.yaml"),
            "--set",
            f"deployment_id={DEMO_DEPLOYMENT}",
            "--set",
            f"lake_root={lake_root}",
            "--set",
            f"kafka.bootstrap_servers={bootstrap}",
            "--set",
            "trigger.mode=available_now",
        ],
    )
    _say(f"[demo] 3/4 running the streaming app (spark-submit, availableNow); log: {log_path}")
    started = time.monotonic()
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=spark_submit_env())
        while process.poll() is None:
            time.sleep(5)
            _say(f"[demo]     ... Spark still working ({time.monotonic() - started:.0f}s)")
    if process.returncode != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-25:])
        raise PlatformError(f"the streaming app failed (exit {process.returncode}); last log lines:\n{tail}")
    _say(f"[demo]     done in {time.monotonic() - started:.0f}s")


def print_windowed_revenue(lake_root: str, since: datetime) -> None:
    from deltalake import DeltaTable

    from spark_apps.naming import DeploymentNames

    table = DeltaTable(DeploymentNames(lake_root, DEMO_DEPLOYMENT).gold_revenue_table)
    rows = [
        row
        for row in table.to_pyarrow_table().to_pylist()
        if row["window_start"].replace(tzinfo=None) >= since
    ]
    rows.sort(key=lambda r: (r["window_start"], r["location_id"], r["order_type"]))
    _say(f"[demo] 4/4 windowed revenue (gold table {table.table_uri}), windows from this run:\n")
    header = (
        f"{'window_start (UTC)':20} {'window_end':9} {'location':11} {'type':10} "
        f"{'orders':>6} {'revenue':>10}  city"
    )
    _say(header)
    _say("-" * len(header))
    for row in rows:
        _say(
            f"{row['window_start']:%Y-%m-%d %H:%M:%S} {row['window_end']:%H:%M:%S} {row['location_id']:11} "
            f"{row['order_type']:10} {row['order_count']:>6} {row['revenue']:>10}  {row['city'] or '-'}"
        )
    total = sum((row["revenue"] for row in rows), Decimal("0.00"))
    _say(
        f"\n{len(rows)} windows, {sum(r['order_count'] for r in rows)} orders, "
        f"revenue {total} (DECIMAL, exact)"
    )


def main() -> int:
    kafka = KafkaBrokerSettings.from_env()
    airflow = AirflowLocalSettings.from_env(kafka.bootstrap_servers)
    lake_root = str(state_dir() / "lake")
    try:
        provision_topics(airflow)
        settings = produce_sample_data(kafka.bootstrap_servers)
        run_streaming_app(kafka.bootstrap_servers, lake_root)
        print_windowed_revenue(lake_root, settings.start)
    except PlatformError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    _say(
        f"\nThe stack keeps running: Airflow UI {airflow.base_url} "
        f"(login {LOCAL_ADMIN_USER}/{LOCAL_ADMIN_PASSWORD}), "
        f"Kafka {kafka.bootstrap_servers}.\nStop it with `make down`."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
