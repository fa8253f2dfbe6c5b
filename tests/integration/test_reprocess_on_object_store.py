"""The `reprocess_revenue` DAG through real Airflow (`dag.test()`) and spark-submit, on a lake in a real
S3-compatible store: the deployment is registered on an `s3a://` lake root, its gold (written with
delta-rs, as the driver's MERGE writes it) holds one wrong, one missing and one phantom window, the orders
are in Kafka, and the app's published progress says the windows are final. The run repairs gold on the
store to the cent, writes its report as an object in the bucket, and leaves nothing of the lake on local
disk; the store's credentials never appear in the task's rendered fields.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from revenue_platform.gold_table import read_gold
from revenue_platform.lake_storage import delta_storage_options, read_side_file
from revenue_platform.local_object_store import ObjectStoreSettings, local_credentials
from revenue_platform.local_stack.airflow_local import AirflowLocalSettings
from revenue_platform.orders_generator import (
    GeneratorSettings,
    expected_windows,
    generate_orders,
    generate_stores,
    produce,
)
from revenue_platform.paths import DAGS_DIR, REPO_ROOT
from revenue_platform.reprocessing import report_path
from spark_apps.contract.config import load_config
from spark_apps.contract.naming import REVENUE_QUERY_ROLE
from spark_apps.contract.object_store import ACCESS_KEY_ENV, SECRET_KEY_ENV, delta_rs_uri
from spark_apps.contract.side_files import write_json
from tests.kafka_helpers import app_topic_overrides, create_app_topics, unique_suffix
from tests.object_store_helpers import local_paths_naming
from tests.quality_helpers import GOLD_ARROW_SCHEMA
from tests.registry_helpers import register_deployment

pytestmark = pytest.mark.integration

START = datetime(2026, 11, 22, 9, 0, 0)
END = START + timedelta(minutes=1)
ADDRESS = {"address_line1": None, "address_line2": None, "city": None, "state": None, "zip": None}


def _gold_row(key: tuple[str, str, datetime], count: int, revenue: Decimal) -> dict[str, Any]:
    location, order_type, start = key
    start = start.replace(tzinfo=UTC)
    return {
        "location_id": location,
        "order_type": order_type,
        "window_start": start,
        "window_end": start + timedelta(seconds=15),
        "order_count": count,
        "revenue": revenue,
        **ADDRESS,
        "contact_num": None,
        "batch_id": 3,
    }


def test_reprocess_repairs_gold_on_the_store_and_reports_there(
    kafka_bootstrap: str,
    airflow_db: AirflowLocalSettings,
    object_store: ObjectStoreSettings,
    lake_connection: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lake_id = uuid.uuid4().hex[:12]
    lake = f"{lake_connection}/{lake_id}"
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", lake)
    state = tmp_path / "state"
    monkeypatch.setenv("PLATFORM_STATE_DIR", str(state))
    # dag.test() runs the submit task's pre_execute in this process: its exported credentials go when
    # the test ends (setenv first, so the teardown restores "unset").
    for name in (ACCESS_KEY_ENV, SECRET_KEY_ENV):
        monkeypatch.setenv(name, "unset by this test")
        monkeypatch.delenv(name)
    suffix = unique_suffix()
    config = load_config(
        overrides={
            "deployment_id": "onstore",
            "lake_root": lake,
            "kafka.bootstrap_servers": kafka_bootstrap,
            "window.watermark": "10 seconds",
            "shuffle_partitions": 2,
            **app_topic_overrides(suffix),
        }
    )
    register_deployment(lake, config)
    create_app_topics(kafka_bootstrap, suffix)
    orders = list(
        generate_orders(GeneratorSettings(orders=80, stores=2, start=START, span_seconds=50, seed=31))
    )
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(2))
    produce(kafka_bootstrap, config.kafka.orders_topic, orders)
    expected = {key: (w.order_count, w.revenue) for key, w in expected_windows(orders, 15).items()}
    assert len(expected) >= 3

    # Gold on the store as a faulty writer left it: one window wrong by a cent, one missing, one phantom.
    keys = sorted(expected)
    wrong, missing = keys[0], keys[1]
    rows = [
        _gold_row(key, count, revenue + Decimal("0.01") if key == wrong else revenue)
        for key, (count, revenue) in expected.items()
        if key != missing
    ]
    rows.append(_gold_row(("store_9", keys[0][1], keys[0][2]), 1, Decimal("12.34")))
    gold_table = config.names.gold_revenue_table
    options = delta_storage_options(gold_table)
    write_deltalake(
        delta_rs_uri(gold_table),
        pa.Table.from_pylist(rows, schema=GOLD_ARROW_SCHEMA),
        storage_options=options,
    )
    # The app's published progress: its watermark passed the range end, so the windows are final.
    write_json(
        config.names.progress_file(REVENUE_QUERY_ROLE),
        {"watermark": f"{END + timedelta(minutes=1):%Y-%m-%dT%H:%M:%S}.000Z", "batch_id": 4},
        options,
    )

    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS_DIR / "reprocess_revenue.py"))
    assert bag.import_errors == {}
    dag_run = bag.dags["reprocess_revenue"].test(
        run_conf={
            "range_start": f"{START.isoformat()}Z",
            "range_end": f"{END.isoformat()}Z",
            "deployment_id": "onstore",
            "source": "kafka",
            "repair": True,
        }
    )
    assert dag_run.state == "success"

    gold = {
        (row["location_id"], row["order_type"], row["window_start"].replace(tzinfo=None)): (
            row["order_count"],
            row["revenue"],
        )
        for row in read_gold(gold_table, storage_options=options).to_pylist()
    }
    assert gold == expected
    assert all(isinstance(revenue, Decimal) for _, revenue in gold.values())

    report_location = report_path(lake, "onstore", START.replace(tzinfo=UTC), END.replace(tzinfo=UTC))
    assert report_location.startswith(f"{lake}/reports/reconciliation/onstore/")
    report = read_side_file(report_location)
    assert report is not None
    assert (report["missing"], report["extra"], report["different"]) == (1, 1, 1)
    assert (report["repaired"], report["source"], report["records_read"]) == (True, "kafka", len(orders))
    summary = _task_return(dag_run, "summarize_reconciliation")
    assert (summary["missing"], summary["extra"], summary["different"], summary["repaired"]) == (
        1,
        1,
        1,
        True,
    )

    # The store's login is in no rendered field of the submit task (env_vars, conf, jars, arguments).
    secret = local_credentials(object_store)["secret_access_key"]
    rendered = _rendered_fields(dag_run, "submit_reprocess_job")
    assert rendered
    assert secret not in rendered
    assert "spark.hadoop.fs.s3a.endpoint" in rendered

    # Nothing of the lake on local disk: the state dir holds the job's config file only, and no file
    # or folder elsewhere (the test's folder, the working directory, the repository) names the lake.
    (config_file,) = [path for path in state.rglob("*") if path.is_file()]
    assert config_file.name == Path(report_location).name.replace(".json", ".config.json")
    assert config_file.is_relative_to(state / "reprocess" / "lake")
    elsewhere = [path for path in tmp_path.iterdir() if path != state]
    assert elsewhere == []
    # (The store's own folder of blobs is the bucket, not local disk of the platform.)
    # (os.walk: the other test worker's state under .local/test changes while this walks it.)
    assert local_paths_naming(lake_id, [Path.cwd(), REPO_ROOT], object_store.blobs_dir) == []
    assert not (Path.cwd() / "s3a:").exists()
    assert not (REPO_ROOT / "s3a:").exists()


def _task_return(dag_run: Any, task_id: str) -> dict[str, Any]:
    (instance,) = [ti for ti in dag_run.get_task_instances() if ti.task_id == task_id]
    value = instance.xcom_pull(task_ids=task_id)
    assert isinstance(value, dict)
    return value


def _rendered_fields(dag_run: Any, task_id: str) -> str:
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.utils.session import create_session

    with create_session() as session:
        stored = (
            session.query(RenderedTaskInstanceFields)
            .filter_by(dag_id=dag_run.dag_id, run_id=dag_run.run_id, task_id=task_id)
            .one()
        )
        return str(stored.rendered_fields)
