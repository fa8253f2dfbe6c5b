"""`make demo`: the platform's main job on the embedded stack, as a user would run it.

Assumes `make up` has started Kafka and Airflow (the Makefile does that first; after `make
cluster-up`, `make up` keeps using the cluster and so does the demo: its three brokers, its
Spark master). Then:
provision the topics through the `provision_topics` DAG and deploy the streaming app
through the `deploy_streaming_app` DAG (both triggered over Airflow's REST API; the app
keeps running, supervised), produce stores and a batch of orders in the seed's JSON
format (with a few malformed and duplicate records), wait until the app has caught up,
and print the windowed revenue it wrote to gold, read back with the `deltalake` package
(no Spark needed to read the results). Last, it queues a `revenue_quality_checks` run over
those windows that Airflow starts once they have closed (not waited for), so the operations
view shows a quality verdict a minute or two after the demo, not after the next full hour.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from revenue_platform.errors import PlatformError
from revenue_platform.local_stack.airflow_api import AirflowApiClient
from revenue_platform.local_stack.airflow_local import (
    LOCAL_ADMIN_USER,
    AirflowLocalSettings,
    local_admin_password,
)
from revenue_platform.local_stack.cluster import stack_bootstrap_servers
from revenue_platform.orders_generator import (
    GeneratedRecord,
    GeneratorSettings,
    expected_windows,
    generate_orders,
    generate_stores,
    produce,
)
from revenue_platform.paths import state_dir
from revenue_platform.registry import registry_lake_root
from revenue_platform.serving.metrics import METRICS_URL_PREFIX

DEMO_DEPLOYMENT = "demo"
DEMO_ORDERS = 3000
# The orders are produced in about a second. With broker-stamped (LogAppendTime) records the arrival
# order across partitions is that of the broker's appends, so an event-time span longer than the
# watermark delay would make the quality gate count the burst's earlier orders as late.
DEMO_SPAN_S = 30
DEMO_WINDOW_S = 15  # the shipped window.size


def _say(message: str) -> None:
    print(message, flush=True)


def provision_topics(client: AirflowApiClient) -> None:
    _say("[demo] 1/5 provisioning topics with the provision_topics DAG ...")
    client.run_and_wait("provision_topics", {"dry_run": False}, timeout_s=300, progress=_say)


def produce_sample_data(bootstrap: str) -> tuple[GeneratorSettings, list[GeneratedRecord]]:
    # Event times run up to now, so every demo run adds new windows, and none is ahead of the broker's
    # clock (an order more than the watermark delay ahead of its Kafka timestamp is a dead letter).
    # They start on a window boundary, so the windows printed from `start` on hold every order.
    now = datetime.now(UTC).replace(microsecond=0, tzinfo=None)
    start = now - timedelta(seconds=DEMO_SPAN_S + now.second % DEMO_WINDOW_S)
    settings = GeneratorSettings(
        orders=DEMO_ORDERS,
        stores=5,
        start=start,
        span_seconds=DEMO_SPAN_S,
        seed=int(now.timestamp()),
        duplicate_every=50,
        bad_every=100,
        first_order_id=int(now.timestamp()) * 10_000,
    )
    records = list(generate_orders(settings))
    _say(
        f"[demo] 3/5 producing 5 stores and {DEMO_ORDERS} orders "
        f"(event times from {start:%H:%M:%S} UTC, {DEMO_SPAN_S} s) ..."
    )
    produce(bootstrap, "stores", generate_stores(settings.stores), progress=_say)
    produce(bootstrap, "orders", records, total=len(records), progress=_say)
    return settings, records


def deploy_streaming_app(client: AirflowApiClient) -> None:
    _say(
        f"[demo] 2/5 deploying the streaming app as deployment {DEMO_DEPLOYMENT!r} with the "
        "deploy_streaming_app DAG (runs until stopped) ..."
    )
    client.run_and_wait(
        "deploy_streaming_app",
        {
            "deployment_id": DEMO_DEPLOYMENT,
            "colour": None,
            "version": "demo",
            "config_overrides": {"trigger.mode": "processing_time"},
            "starting_offsets": "earliest",
            "start_timeout_s": 240,
        },
        timeout_s=420,
        progress=_say,
    )
    make_live_if_nothing_is()


def make_live_if_nothing_is() -> None:
    """On a fresh stack nothing is live yet: point live at the demo deployment (audited in the registry),
    so scheduled quality checks and reprocessing, which read the live deployment, work on the demo."""
    from revenue_platform.registry import DeploymentRegistry

    registry = DeploymentRegistry()
    current = registry.live_deployment()
    if current is None:
        registry.switch_live(DEMO_DEPLOYMENT, actor="make demo", reason="first deployment on this stack")
        _say(f"[demo]     {DEMO_DEPLOYMENT!r} is now the live deployment (nothing was live)")
    elif current != DEMO_DEPLOYMENT:
        _say(f"[demo]     live deployment stays {current!r}")


def _gold_windows(lake_root: str) -> dict[tuple[str, str, datetime], tuple[int, Decimal]]:
    from revenue_platform.gold_table import read_gold
    from spark_apps.contract.naming import DeploymentNames

    table = read_gold(DeploymentNames(lake_root, DEMO_DEPLOYMENT).gold_revenue_table)
    return {
        (r["location_id"], r["order_type"], r["window_start"].replace(tzinfo=None)): (
            r["order_count"],
            r["revenue"],
        )
        for r in table.to_pylist()
    }


def _revenue_lag(lake_root: str) -> int | None:
    from revenue_platform.lake_storage import read_side_file
    from spark_apps.contract.naming import REVENUE_QUERY_ROLE, DeploymentNames

    names = DeploymentNames(lake_root, DEMO_DEPLOYMENT)
    lag = (read_side_file(names.progress_file(REVENUE_QUERY_ROLE)) or {}).get("max_offsets_behind_latest")
    return int(lag) if lag is not None else None


def wait_until_caught_up(lake_root: str, records: list[GeneratedRecord], timeout_s: float = 300.0) -> None:
    """Block until gold holds exactly this run's windows and the app reports no lag (bounded)."""
    windows = expected_windows(records, DEMO_WINDOW_S)
    expected = {key: (w.order_count, w.revenue) for key, w in windows.items()}
    _say(f"[demo] 4/5 waiting until the running app has caught up ({len(expected)} windows expected) ...")
    started = time.monotonic()
    while True:
        gold = _gold_windows(lake_root)
        done = sum(1 for key, value in expected.items() if gold.get(key) == value)
        lag = _revenue_lag(lake_root)
        if done == len(expected) and lag == 0:
            _say(f"[demo]     caught up after {time.monotonic() - started:.0f}s")
            return
        if time.monotonic() - started > timeout_s:
            raise PlatformError(
                f"the streaming app did not catch up within {timeout_s:.0f}s ({done}/{len(expected)} windows "
                f"exact, offsets behind latest: {lag}); see the driver log under "
                f"{state_dir() / 'streaming_apps' / DEMO_DEPLOYMENT} and the deploy_streaming_app task log"
            )
        _say(
            f"[demo]     ... {done}/{len(expected)} windows complete in gold, offsets behind latest: {lag} "
            f"({time.monotonic() - started:.0f}s)"
        )
        time.sleep(5)


def print_windowed_revenue(lake_root: str, since: datetime) -> None:
    from revenue_platform.gold_table import read_gold
    from spark_apps.contract.naming import DeploymentNames

    table_path = DeploymentNames(lake_root, DEMO_DEPLOYMENT).gold_revenue_table
    rows = [
        row for row in read_gold(table_path).to_pylist() if row["window_start"].replace(tzinfo=None) >= since
    ]
    rows.sort(key=lambda r: (r["window_start"], r["location_id"], r["order_type"]))
    _say(f"[demo] 5/5 windowed revenue (gold table {table_path}), windows from this run:\n")
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


def queue_quality_check(client: AirflowApiClient, lake_root: str, records: list[GeneratedRecord]) -> None:
    """Queue a run of the quality checks on the demo's deployment that the scheduler starts once the
    demo's last window has closed (its end plus the watermark delay): the run's interval, the hour up to
    then, holds every window of this run, so the operations view shows a verdict a minute or two after
    the demo instead of after the next full hour. Not waited for: the demo takes no longer than before.
    A stack that cannot take it only loses the early check: the hourly run still comes."""
    from revenue_platform.quality.request import QUALITY_DAG_ID
    from revenue_platform.registry import DeploymentRegistry
    from spark_apps.contract.config_rules import interval_seconds

    last_start = max(start for _, _, start in expected_windows(records, DEMO_WINDOW_S))
    watermark = interval_seconds(
        DeploymentRegistry(lake_root).get(DEMO_DEPLOYMENT).app_config().window.watermark
    )
    closed_at = last_start.replace(tzinfo=UTC) + timedelta(seconds=DEMO_WINDOW_S + watermark)
    try:
        run_id = client.trigger(QUALITY_DAG_ID, {"deployment_id": DEMO_DEPLOYMENT}, run_after=closed_at)
    except PlatformError as error:
        _say(
            f"[demo]     could not queue a quality check ({error}); "
            f"trigger {QUALITY_DAG_ID} in the Airflow UI"
        )
        return
    _say(
        f"[demo]     queued {QUALITY_DAG_ID} run {run_id}: it checks {DEMO_DEPLOYMENT!r} over the hour up to "
        f"{closed_at:%H:%M:%S} UTC, when this run's last window has closed, and starts then; the operations "
        "view shows its verdict when it is done"
    )


def main() -> int:
    bootstrap_servers = stack_bootstrap_servers()
    airflow = AirflowLocalSettings.from_env(bootstrap_servers)
    lake_root = registry_lake_root()
    password = local_admin_password(airflow)
    client = AirflowApiClient(airflow.base_url, LOCAL_ADMIN_USER, password)
    try:
        provision_topics(client)
        deploy_streaming_app(client)
        settings, records = produce_sample_data(bootstrap_servers)
        wait_until_caught_up(lake_root, records)
        print_windowed_revenue(lake_root, settings.start)
        queue_quality_check(client, lake_root, records)
    except PlatformError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    _say(
        f"\nThe stack keeps running: Airflow UI {airflow.base_url} "
        f"(login {LOCAL_ADMIN_USER} / {password}), Kafka {bootstrap_servers}, and the "
        f"streaming app (deployment {DEMO_DEPLOYMENT!r}, supervised every minute by "
        "supervise_streaming_apps)."
        f"\nPrometheus scrapes its metrics (lag, rates, watermark, dead letters, quality) from "
        f"{airflow.base_url}{METRICS_URL_PREFIX}/metrics; alert rules: include/monitoring/alert_rules.yml "
        '(docs/operations.md, "Metrics and alerts").'
        '\nStop everything with `make down`, or only the app with:\n  make airflow CMD="dags trigger '
        f'stop_streaming_app --conf \'{{\\"deployment_id\\": \\"{DEMO_DEPLOYMENT}\\"}}\'"'
    )
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: a native (C++) worker thread of the Arrow/Kafka clients still being
    # torn down at exit was seen to abort the process ("terminate called without an active
    # exception", status -6) after the demo had printed its result. Everything is written by now.
    os._exit(status)
