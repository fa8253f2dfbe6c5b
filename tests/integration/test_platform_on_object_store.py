"""The platform's own Python readers and writers on a lake in a real S3-compatible store.

The driver's gold MERGE (delta-rs) with its epoch fencing, `read_gold`, the deployment registry with
the driver's lease check, the driver's heartbeat and progress files read by the supervisor, and the
serving endpoints (operations view, metrics), each given nothing but an `s3a://` lake root: the
store's settings come from the Airflow connection, as in a deployment. Spark's side of a shared table
on the store is `test_lake_on_object_store.py`'s.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from fastapi.testclient import TestClient

from revenue_platform.gold_table import open_gold, read_gold
from revenue_platform.lake_storage import delta_storage_options, lake_object_store, read_lake_file
from revenue_platform.local_object_store import ObjectStoreSettings
from revenue_platform.paths import REPO_ROOT
from revenue_platform.quality.report import QualityReport
from revenue_platform.quality.results import results_table_path, store_report
from revenue_platform.quality.runner import run_revenue_checks
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry, RegistryConflictError
from revenue_platform.serving.auth import require_airflow_user
from revenue_platform.serving.gold import read_live_gold
from revenue_platform.serving.metadata import read_lag
from revenue_platform.serving.metrics import StreamingMetricsCollector, create_metrics_app
from revenue_platform.serving.operations_view import create_operations_app
from revenue_platform.streaming.finality import app_watermark
from revenue_platform.streaming.launcher import SparkTarget
from revenue_platform.streaming.supervisor import RestartPolicy, supervise
from spark_apps.contract.delta_reads import open_delta, read_delta
from spark_apps.contract.fencing import (
    GOLD_COMMIT_APP_ID,
    CommitStamp,
    LeaseFence,
    LeaseRejectedError,
    write_driver_status,
)
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, DeploymentNames
from spark_apps.contract.object_store import LakeObjectStore, delta_rs_uri
from spark_apps.contract.records import GOLD_COLUMNS, STORE_ADDRESS_COLUMNS
from spark_apps.contract.side_files import _s3_client, read_json
from spark_apps.contract.topic_ownership import registered_configs
from spark_apps.engine.observability import BatchCounters, ProgressPublisher
from spark_apps.storage.gold_from_driver import gold_writable_from_driver, merge_gold_from_driver
from tests.quality_helpers import (
    GOLD_ARROW_SCHEMA,
    INTERVAL_END,
    INTERVAL_START,
    bronze_rows,
    check_outcome,
    gold_rows,
    scenario_orders,
    write_tables,
)

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 24, 9, 0, 0, tzinfo=UTC)
W = timedelta(seconds=15)
ADDRESS = ("1 Main St", "", "Springfield", "IL", "62701", "5550100")
# The largest total gold's DECIMAL(38,2) holds: nothing may round it on the way to the store and back.
LARGEST = Decimal("999999999999999999999999999999999999.99")


@pytest.fixture
def lake(lake_connection: str) -> str:
    """A lake root of this test's own in the store's bucket."""
    return f"{lake_connection}/{uuid.uuid4().hex[:12]}"


def _row(location: str, start: datetime, count: int, revenue: str | Decimal, batch: int) -> tuple[Any, ...]:
    address = (None,) * len(STORE_ADDRESS_COLUMNS) if location == "store_unknown" else ADDRESS
    return (location, "GENERAL", start, start + W, count, Decimal(revenue), *address, batch)


def _by_key(rows: list[dict[str, Any]]) -> dict[tuple[str, datetime], dict[str, Any]]:
    return {(row["location_id"], row["window_start"]): row for row in rows}


def _commits_in_the_bucket(object_store: ObjectStoreSettings, table: str) -> list[str]:
    url = urlparse(table)
    log = object_store.blobs_dir / url.netloc / url.path.lstrip("/") / "_delta_log"
    return sorted(path.name for path in log.glob("*.json"))


def _create_gold(table: str) -> None:
    """An empty gold table in the schema, hourly layout and plain protocol `ensure_gold_table` gives it."""
    layout = GOLD_ARROW_SCHEMA.append(pa.field(GOLD_HOUR_COLUMN, pa.string(), nullable=False))
    write_deltalake(
        delta_rs_uri(table),
        layout.empty_table(),
        partition_by=[GOLD_HOUR_COLUMN],
        storage_options=delta_storage_options(table),
    )


def test_the_driver_merges_gold_on_the_store_fenced_and_read_gold_reads_it_back_exactly(
    lake: str, object_store: ObjectStoreSettings
) -> None:
    table = DeploymentNames(lake, "blue").gold_revenue_table
    _create_gold(table)
    options = delta_storage_options(table)
    assert gold_writable_from_driver(table, options)
    assert not gold_writable_from_driver(
        table, {k: v for k, v in options.items() if k != "AWS_CONDITIONAL_PUT"}
    )

    first = [_row("store_a", T0, 2, "10.50", 0), _row("store_a", T0 + W, 1, "0.01", 0)]
    merge_gold_from_driver(first, table, stamp=CommitStamp(5, 0), storage_options=options)
    # Batch 1 updates a window (absolute totals), inserts one of a store with no address and the
    # largest total.
    second = [
        _row("store_a", T0 + W, 3, "7.77", 1),
        _row("store_unknown", T0, 1, "0.10", 1),
        _row("store_a", T0 + 2 * W, 9, LARGEST, 1),
    ]
    merge_gold_from_driver(second, table, stamp=CommitStamp(5, 1), storage_options=options)
    # A predecessor (epoch 4) that stalled past its lease check: the commit itself refuses it.
    with pytest.raises(LeaseRejectedError, match="lease epoch 5, newer than this driver's 4"):
        merge_gold_from_driver(
            [_row("store_a", T0, 99, "99.00", 2)], table, stamp=CommitStamp(4, 2), storage_options=options
        )

    expected = [dict(zip(GOLD_COLUMNS, row, strict=True)) for row in [first[0], *second]]
    assert _by_key(read_gold(table).to_pylist()) == _by_key(expected)
    served = read_gold(
        table, ["window_start", "order_count"], [("location_id", "=", "store_a"), ("window_start", ">", T0)]
    )
    assert sorted(served.to_pylist(), key=lambda r: r["window_start"]) == [
        {"window_start": T0 + W, "order_count": 3},
        {"window_start": T0 + 2 * W, "order_count": 9},
    ]
    gold = open_gold(table)
    assert gold is not None
    assert gold.transaction_version(GOLD_COMMIT_APP_ID) == CommitStamp(5, 1).version
    # Created, then two MERGEs; the refused one wrote nothing. All of it is in the bucket.
    assert _commits_in_the_bucket(object_store, table) == [f"{v:020d}.json" for v in range(3)]


def test_the_registry_and_the_drivers_lease_check_round_trip_on_the_store(lake: str) -> None:
    config = {"deployment_id": "blue", "kafka": {"revenue_topic": "revenue_windows"}}
    registry = DeploymentRegistry(lake)
    registry.register(
        DeploymentRecord("blue", lake_root=lake, config_json=json.dumps(config), desired_state="running"),
        "tester",
    )
    registry.register(DeploymentRecord("green", lake_root=lake), "tester")
    leased = registry.acquire_lease("blue", 1, "deploy", {"observed_state": "starting"}, "first launch")
    assert registry.switch_live("blue", "tester", "first deployment") is None

    # Another process, given only the root, reads what this one wrote.
    reader = DeploymentRegistry(lake)
    assert reader.live_deployment() == "blue"
    assert reader.get("blue").lease_token == leased.lease_token
    assert [(e.deployment_id, e.kind) for e in reader.events(involving=["blue"])] == [
        ("blue", "registered"),
        ("blue", "lease_acquired"),
        ("blue", "live_switched"),
    ]
    with pytest.raises(RegistryConflictError):
        reader.update("blue", {"observed_state": "running"}, "stale", expected_version=1)

    # The driver's side: its lease and the topics it may write, read from the store.
    options = delta_storage_options(lake)
    assert leased.lease_token is not None
    fence = LeaseFence(lake, "blue", leased.lease_token, options)
    fence.check("the bronze append")
    assert registered_configs(lake, running_only=True, storage_options=options) == [("blue", config)]
    registry.acquire_lease("blue", registry.get("blue").row_version, "supervisor", {}, "restart")
    with pytest.raises(LeaseRejectedError, match="not the registry's current token"):
        fence.check("the gold MERGE")


def test_the_operations_view_and_the_metrics_serve_a_lake_on_the_store(lake: str) -> None:
    registry = DeploymentRegistry(lake)
    registry.register(DeploymentRecord("blue", lake_root=lake, desired_state="running"), "tester")
    registry.switch_live("blue", "tester", "first deployment")
    rows = [_row("store_1", T0, 2, "3.50", 0), _row("store_1", T0 + W, 1, "1.25", 0)]
    table = DeploymentNames(lake, "blue").gold_revenue_table
    gold = pa.Table.from_pylist([dict(zip(GOLD_COLUMNS, r, strict=True)) for r in rows], GOLD_ARROW_SCHEMA)
    write_deltalake(delta_rs_uri(table), gold, storage_options=delta_storage_options(table))
    outcomes = (check_outcome("keys_unique", True), check_outcome("window_start_aligned", False, 1))
    store_report(QualityReport("run-1", "blue", T0, T0 + timedelta(hours=1), outcomes, "unused"), lake, T0)

    app = create_operations_app(lake)
    app.dependency_overrides[require_airflow_user] = lambda: {"name": "tester"}
    with TestClient(app) as client:
        stores = client.get("/api/stores").json()
        revenue = client.get("/api/revenue", params={"location_id": "store_1"}).json()
        quality = client.get("/api/quality").json()
    assert stores == {"deployment_id": "blue", "stores": [{"location_id": "store_1", "city": "Springfield"}]}
    assert [(p["order_count"], p["revenue"]) for p in revenue["points"]] == [(2, "3.50"), (1, "1.25")]
    assert (quality["latest"]["run_id"], quality["latest"]["passed"], quality["latest"]["failed"]) == (
        "run-1",
        1,
        1,
    )
    assert read_live_gold(lake).table.num_rows == 2

    with TestClient(create_metrics_app(StreamingMetricsCollector(lake))) as client:
        metrics = client.get("/metrics").text
    assert 'revenue_metrics_source_up{source="registry"} 1.0' in metrics
    assert 'revenue_metrics_source_up{source="quality"} 1.0' in metrics
    assert re.search(r'revenue_quality_checks_failed\{deployment="blue",role="\w+"\} 1\.0', metrics), metrics


def test_tables_not_written_yet_on_the_store_read_as_empty(lake: str) -> None:
    assert DeploymentRegistry(lake).deployments() == []
    assert DeploymentRegistry(lake).events() == []
    assert read_gold(DeploymentNames(lake, "blue").gold_revenue_table).num_rows == 0


def _revenue_batch(names: DeploymentNames, batch_id: int, at: datetime) -> SimpleNamespace:
    """The progress event Spark gives the listener after a batch of the revenue query."""
    name = names.query_name(REVENUE_QUERY_ROLE)
    document = {
        "id": str(uuid.uuid4()),
        "runId": str(uuid.uuid4()),
        "name": name,
        "batchId": batch_id,
        "timestamp": at.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "numInputRows": 5,
        "eventTime": {"watermark": "2026-11-24T08:59:00.000Z"},
        "sources": [],
    }
    return SimpleNamespace(progress=SimpleNamespace(json=json.dumps(document), name=name, batchId=batch_id))


def _revenue_listener(names: DeploymentNames, storage_options: dict[str, str]) -> ProgressPublisher:
    """The driver's progress listener of the revenue query (no offsets to commit: no Kafka source)."""
    return ProgressPublisher(
        names.progress_dir,
        BatchCounters(),
        names.consumer_group,
        {},
        query=names.query_name(REVENUE_QUERY_ROLE),
        storage_options=storage_options,
    )


def test_the_drivers_heartbeat_and_progress_reach_the_supervisor_through_the_store(
    lake: str, object_store: ObjectStoreSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver on another host shares no disk with the supervisor: its side files go to the bucket."""
    monkeypatch.chdir(tmp_path)  # a lake location taken for a local path would land here
    names = DeploymentNames(lake, "blue")
    registry = DeploymentRegistry(lake)
    registry.register(
        DeploymentRecord("blue", lake_root=lake, desired_state="running", progress_dir=names.progress_dir),
        "tester",
    )
    leased = registry.acquire_lease(
        "blue", 1, "deploy", {"observed_state": "starting", "driver_kind": "cluster"}, "first launch"
    )

    # The driver finds the store as the launcher handed it over: S3A settings and its environment.
    store = lake_object_store(lake)
    assert store is not None
    driver_options = LakeObjectStore.from_spark_hadoop_conf(
        store.spark_hadoop_conf(), store.credentials_environment()
    ).delta_rs_storage_options()
    write_driver_status(names, leased.lease_token, datetime.now(UTC), [], True, driver_options)
    listener = _revenue_listener(names, driver_options)
    listener.onQueryProgress(_revenue_batch(names, 0, T0))

    in_bucket = object_store.blobs_dir / "lake" / urlparse(names.progress_dir).path.lstrip("/")
    assert sorted(path.name for path in in_bucket.iterdir()) == ["_driver.json", "blue__revenue.json"]

    said: list[str] = []
    report = supervise(
        registry,
        SparkTarget("spark://unused:7077", "cluster"),
        RestartPolicy(),
        "tester",
        ["blue"],
        said.append,
    )
    (entry,) = report["deployments"]
    assert entry["action"] == "healthy", said
    assert entry["heartbeat_age_s"] is not None
    assert entry["heartbeat_age_s"] < 60
    assert entry["last_batch_at"] == "2026-11-24T09:00:00.000Z"
    assert registry.get("blue").observed_state == "running"
    lag = read_lag(names)
    assert lag is not None
    assert (lag.heartbeat_at is not None, lag.last_batch_at) == (True, "2026-11-24T09:00:00.000Z")
    assert app_watermark(names.progress_file(REVENUE_QUERY_ROLE)) == datetime(2026, 11, 24, 8, 59, tzinfo=UTC)

    # A restarted driver's listener goes on from what its predecessor published in the bucket.
    restarted = _revenue_listener(names, driver_options)
    assert restarted._read_published() == listener._read_published()
    # Nothing of the lake on local disk: not under the working directory, nor the repository.
    assert list(tmp_path.iterdir()) == []
    assert not (REPO_ROOT / "s3a:").exists()


def test_heartbeats_on_the_store_reuse_one_client_and_stay_whole(lake: str) -> None:
    """The driver rewrites its heartbeat every 5 s: every write reuses the one client built for the
    store (a write's cost is measured in docs/object-store.md, not asserted here), and a reader
    between writes always finds a whole document, the latest one."""
    options = delta_storage_options(lake)
    names = DeploymentNames(lake, "blue")
    _s3_client.cache_clear()
    for beat in range(20):
        token = f"{beat + 1}-000000000000"
        write_driver_status(names, token, datetime.now(UTC), [], True, options)
        status = read_json(names.driver_status_file, options)
        assert status is not None
        assert status["lease_token"] == token
    assert _s3_client.cache_info().currsize == 1
    assert _s3_client.cache_info().hits >= 39  # 20 writes and 20 reads, one client built


def test_quality_checks_run_on_the_store_and_their_data_docs_are_served_from_it(
    lake: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    orders = scenario_orders()
    write_tables(lake, "blue", gold_rows(orders), bronze_rows(orders))
    # Two hosts, each with its own state dir (where GX's local mirror lives), check the same lake.
    monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path / "first-host"))
    first = run_revenue_checks("blue", lake, INTERVAL_START, INTERVAL_END, raise_on_failure=False)
    monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path / "second-host"))
    second = run_revenue_checks("blue", lake, INTERVAL_START, INTERVAL_END, raise_on_failure=False)
    assert first.success, first.failure_summary()
    assert second.success, second.failure_summary()
    assert second.data_docs_index == f"{lake}/quality/data_docs/index.html"

    # The site is on the store; the second host's index lists the first host's run too.
    index = read_lake_file(second.data_docs_index)
    assert index is not None
    assert first.run_id in index.decode()
    assert second.run_id in index.decode()
    results = open_delta(results_table_path(lake), delta_storage_options(lake))
    assert results is not None
    assert set(read_delta(results, ["run_id"], []).column("run_id").to_pylist()) == {
        first.run_id,
        second.run_id,
    }

    app = create_operations_app(lake)
    app.dependency_overrides[require_airflow_user] = lambda: {"name": "tester"}
    with TestClient(app) as client:
        served = client.get("/data-docs/index.html")
        page = re.search(r"'(validations/[^']+\.html)'", served.text)  # the index's table data
        assert page is not None, served.text[:2000]
        run_page = client.get(f"/data-docs/{page.group(1)}")
        stylesheet = client.get("/data-docs/static/styles/data_docs_default_styles.css")
        outside = client.get("/data-docs/..%2F..%2Fregistry%2F_delta_log%2F00000000000000000000.json")
    assert served.status_code == 200
    assert first.run_id in served.text
    assert run_page.status_code == 200
    assert run_page.headers["content-type"].startswith("text/html")
    assert stylesheet.status_code == 200
    assert stylesheet.headers["content-type"].startswith("text/css")
    assert outside.status_code == 404
    # Nothing of the lake itself on local disk: each host's mirror holds Data Docs and GX's results.
    key = urlparse(lake).netloc + urlparse(lake).path
    for host in ("first-host", "second-host"):
        mirror = tmp_path / host / "quality-mirror" / key.strip("/") / "quality"
        files = [p for p in (tmp_path / host).rglob("*") if p.is_file()]
        assert files
        assert all(p.is_relative_to(mirror) for p in files)
        assert {p.relative_to(mirror).parts[0] for p in files} == {"data_docs", "gx"}
