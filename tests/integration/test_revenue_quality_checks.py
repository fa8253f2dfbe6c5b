"""The revenue quality checks end to end on real Delta tables: a correct gold passes; each way of
corrupting it fails exactly the expectation(s) that describe that corruption; Data Docs and the
results history record the run; the DAG runs with `dag.test()`.

Gold and bronze are tiny and written with delta-rs (`tests/quality_helpers.py`); the correct gold is
computed in the helper with plain Python and Decimal, independently of the code under test.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from revenue_platform.paths import DAGS_DIR
from revenue_platform.quality import QualityCheckFailed, QualityConfig, QualityInputMissing
from revenue_platform.quality.results import failing_windows_table_path, results_table_path
from revenue_platform.quality.runner import run_revenue_checks
from tests.quality_helpers import (
    GOLD_ARROW_SCHEMA,
    INTERVAL_END,
    INTERVAL_START,
    bronze_record,
    bronze_rows,
    closed_row,
    gold_rows,
    open_row,
    order_value,
    scenario_orders,
    write_tables,
)
from tests.registry_helpers import register_deployment

pytestmark = pytest.mark.integration

DEPLOYMENT = "blue"
CONFIG = QualityConfig()  # the defaults: 15 s tumbling windows, 30 s watermark, as the app's YAML


@pytest.fixture(scope="module")
def base() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    orders = scenario_orders()
    return gold_rows(orders), bronze_rows(orders)


def run_checks(
    lake: Path,
    gold: list[dict[str, Any]],
    bronze: list[dict[str, Any]],
    *,
    config: QualityConfig = CONFIG,
    interval: tuple[datetime, datetime] = (INTERVAL_START, INTERVAL_END),
    gold_schema: pa.Schema = GOLD_ARROW_SCHEMA,
) -> Any:
    write_tables(lake, DEPLOYMENT, gold, bronze, gold_schema)
    return run_revenue_checks(DEPLOYMENT, str(lake), *interval, config, raise_on_failure=False)


def read_history(table_path: str) -> pd.DataFrame:
    """One of the quality history tables, as any Delta reader sees it (a test's lake has one deployment)."""
    return DeltaTable(table_path).to_pandas()


def test_correct_gold_passes_and_records_the_run(
    tmp_path: Path, base: Any, caplog: pytest.LogCaptureFixture
) -> None:
    gold, bronze = base
    caplog.set_level(logging.INFO)
    report = run_checks(tmp_path, gold, bronze)
    gx_info = [r.getMessage() for r in caplog.records if r.name.startswith("great_expectations")]
    assert gx_info == [], "GX's INFO lines would drown the verdict in the task log"

    assert report.success, report.failure_summary()
    assert len(report.outcomes) == 23
    assert report.stats["closed_windows_reconciled"] > 40
    index = Path(report.data_docs_index)
    assert index == tmp_path / "quality" / "data_docs" / "index.html"
    assert report.run_id in index.read_text()
    assert_data_docs_are_offline(index.parent)
    history = read_history(results_table_path(str(tmp_path)))
    assert set(history["run_id"]) == {report.run_id}
    assert history["success"].all()
    assert len(history) == 23


def test_importing_gx_for_the_checks_logs_nothing_below_warning() -> None:
    # A fresh interpreter, as a task process is: GX logs ~200 INFO lines while it is first imported.
    code = (
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "from revenue_platform.quality.runner import quiet_gx_logging\n"
        "quiet_gx_logging()\n"
        "import great_expectations, great_expectations.checkpoint\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "great_expectations" not in done.stderr, done.stderr[:2000]


def assert_data_docs_are_offline(site: Path) -> None:
    """Every page loads its scripts, styles, fonts and images from the site itself (no CDN)."""
    from revenue_platform.quality.data_docs import external_references

    pages = [*site.rglob("*.html"), *(site / "static" / "styles").glob("*.css")]
    assert len(pages) > 5
    assert {str(page): external_references(page.read_text()) for page in pages} == {
        str(page): [] for page in pages
    }
    for page in site.rglob("*.html"):
        assert "vegaEmbed" not in page.read_text(), f"{page} draws a Vega chart; vendor Vega for it"
        # Each local reference resolves to a file of the site (relative to the page).
        for ref in re.findall(r"""(?:src|href)="([^"#?]+\.(?:js|css|png|ico))""", page.read_text()):
            assert (page.parent / ref).resolve().is_file(), f"{page}: {ref}"
    fonts = site / "static" / "vendor" / "fontawesome" / "webfonts"
    assert (fonts / "fa-solid-900.woff2").stat().st_size > 10_000


# Each case: a corruption of the correct data, and exactly the checks it must fail. Corruptions of
# row-level rules touch an open window (not reconciled yet), so reconciliation stays green.
Rows = list[dict[str, Any]]


def _drop_column(column: str) -> Callable[[Rows, Rows], None]:
    def corrupt(gold: Rows, bronze: Rows) -> None:
        for row in gold:
            row.pop(column)

    return corrupt


def _set_open(**values: Any) -> Callable[[Rows, Rows], None]:
    def corrupt(gold: Rows, bronze: Rows) -> None:
        open_row(gold).update(values)

    return corrupt


def _shift_open_window(gold: Rows, bronze: Rows) -> None:
    row = open_row(gold)
    row["window_start"] += timedelta(seconds=5)
    row["window_end"] += timedelta(seconds=5)


def _stretch_open_window(gold: Rows, bronze: Rows) -> None:
    open_row(gold)["window_end"] += timedelta(seconds=1)


def _duplicate_closed_window(gold: Rows, bronze: Rows) -> None:
    gold.append({**closed_row(gold), "batch_id": 1})


def _cent_off(gold: Rows, bronze: Rows) -> None:
    closed_row(gold)["revenue"] += Decimal("0.01")


def _count_off(gold: Rows, bronze: Rows) -> None:
    closed_row(gold)["order_count"] += 1


def _missing_window(gold: Rows, bronze: Rows) -> None:
    gold.remove(closed_row(gold))


def _dlq_flood(gold: Rows, bronze: Rows) -> None:
    for n in range(20):
        arrived = INTERVAL_START + timedelta(minutes=10, seconds=n)
        bronze.append(bronze_record(b"", arrived, 1000 + n, dlq_reason="empty_value", ordered_at=None))


def _late_records(gold: Rows, bronze: Rows) -> None:
    # Valid orders an hour behind the event time already seen: late, and outside this interval's
    # windows (so they do not touch the reconciliation of this interval).
    from tests.quality_helpers import Order

    for n in range(3):
        ordered_at = INTERVAL_START - timedelta(minutes=45)
        order = Order(9000 + n, "store_1", "GENERAL", Decimal("5.00"), ordered_at)
        arrived = INTERVAL_START + timedelta(minutes=30, seconds=n)
        bronze.append(
            bronze_record(order_value(order), arrived, 2000 + n, dlq_reason=None, ordered_at=ordered_at)
        )


def _accepted_but_unparseable(gold: Rows, bronze: Rows) -> None:
    arrived = INTERVAL_START + timedelta(minutes=20)
    bronze.append(bronze_record(b'{"orderId": 1', arrived, 3000, dlq_reason=None, ordered_at=arrived))


CORRUPTIONS: dict[str, tuple[Callable[[Rows, Rows], None], set[str]]] = {
    "missing column": (_drop_column("contact_num"), {"schema_columns_present"}),
    "unexpected column": (lambda g, b: [r.update(note="x") for r in g], {"schema_no_unexpected_columns"}),
    "null key": (_set_open(location_id=None), {"not_null_location_id"}),
    "null revenue": (_set_open(revenue=None), {"not_null_revenue"}),
    "unknown order type": (_set_open(order_type="ONLINE"), {"order_type_known"}),
    "zero order count": (_set_open(order_count=0), {"order_count_positive"}),
    "negative revenue": (_set_open(revenue=Decimal("-0.01")), {"revenue_in_range"}),
    "revenue at the ceiling": (_set_open(revenue=Decimal("1000000.00")), {"revenue_in_range"}),
    "window longer than size": (_stretch_open_window, {"window_duration"}),
    "misaligned window": (_shift_open_window, {"window_start_aligned"}),
    "duplicate window key": (_duplicate_closed_window, {"window_key_unique"}),
    "revenue off by one cent": (_cent_off, {"reconciliation_revenue"}),
    "order count off by one": (_count_off, {"reconciliation_order_count"}),
    "closed window missing": (_missing_window, {"reconciliation_window_present"}),
    "DLQ flood": (_dlq_flood, {"dlq_share"}),
    "late records": (_late_records, {"late_share"}),
    "accepted record the independent parser rejects": (_accepted_but_unparseable, {"valid_records_parse"}),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_each_corruption_fails_exactly_its_expectations(tmp_path: Path, base: Any, case: str) -> None:
    corrupt, expected_failures = CORRUPTIONS[case]
    gold, bronze = copy.deepcopy(base)
    corrupt(gold, bronze)
    schema = pa.schema([f for f in GOLD_ARROW_SCHEMA if f.name in gold[0]])
    if "note" in gold[0]:
        schema = schema.append(pa.field("note", pa.string()))

    report = run_checks(tmp_path, gold, bronze, gold_schema=schema)

    assert report.failed_checks == expected_failures, report.failure_summary()
    message = report.failure_summary()
    for check in expected_failures:
        assert check in message


def test_wrong_column_type_fails_the_type_check(tmp_path: Path, base: Any) -> None:
    gold, bronze = copy.deepcopy(base)
    narrow = pa.schema(
        [pa.field("order_count", pa.int32()) if f.name == "order_count" else f for f in GOLD_ARROW_SCHEMA]
    )
    report = run_checks(tmp_path, gold, bronze, gold_schema=narrow)
    assert report.failed_checks == {"schema_column_types"}
    assert "order_count (actual integer, expected long)" in report.failure_summary()


def test_output_behind_flowing_input_fails_freshness(tmp_path: Path, base: Any) -> None:
    gold, bronze = copy.deepcopy(base)
    # Orders keep arriving for another hour, but gold stopped at INTERVAL_END (a stuck revenue query).
    next_hour = [
        dataclasses.replace(o, order_id=o.order_id + 10_000, ordered_at=o.ordered_at + timedelta(hours=1))
        for o in scenario_orders()
    ]
    bronze += [
        bronze_record(
            order_value(o),
            o.ordered_at + timedelta(seconds=2),
            10_000 + i,
            dlq_reason=None,
            ordered_at=o.ordered_at,
        )
        for i, o in enumerate(next_hour)
    ]
    later = (INTERVAL_END, INTERVAL_END + timedelta(hours=1))
    report = run_checks(tmp_path, gold, bronze, interval=later)
    assert "freshness_lag" in report.failed_checks
    # The windows gold lacks are reconciliation failures too; nothing else fails.
    datasets = {outcome.dataset for outcome in report.outcomes if not outcome.success}
    assert datasets == {"freshness", "reconciliation"}


def test_an_idle_stream_is_not_stale(tmp_path: Path, base: Any) -> None:
    gold, bronze = base
    # The hour after the last order, and the hours before any: gold is as fresh as its input allows.
    for interval in (
        (INTERVAL_END + timedelta(hours=1), INTERVAL_END + timedelta(hours=2)),
        (INTERVAL_START - timedelta(hours=2), INTERVAL_START - timedelta(hours=1)),
    ):
        report = run_checks(tmp_path, gold, bronze, interval=interval)
        assert report.success, report.failure_summary()


def test_failure_raises_a_readable_error_and_records_failing_windows(tmp_path: Path, base: Any) -> None:
    gold, bronze = copy.deepcopy(base)
    _cent_off(gold, bronze)
    target = closed_row(gold)
    write_tables(tmp_path, DEPLOYMENT, gold, bronze)

    with pytest.raises(QualityCheckFailed) as failure:
        run_revenue_checks(DEPLOYMENT, str(tmp_path), INTERVAL_START, INTERVAL_END, CONFIG)

    message = str(failure.value)
    key = f"{target['location_id']}|{target['order_type']}|{target['window_start']:%Y-%m-%dT%H:%M:%SZ}"
    assert "reconciliation_revenue" in message
    assert "1 of" in message
    assert key in message
    assert "Data Docs:" in message
    windows = read_history(failing_windows_table_path(str(tmp_path)))
    assert windows[["check", "location_id", "order_type"]].values.tolist() == [
        ["reconciliation_revenue", target["location_id"], target["order_type"]]
    ]
    assert windows["window_start"].iloc[0] == target["window_start"]
    assert failure.value.report.run_id in Path(failure.value.report.data_docs_index).read_text()


def test_a_lower_ceiling_from_config_is_enforced(tmp_path: Path, base: Any) -> None:
    gold, bronze = base
    report = run_checks(tmp_path, gold, bronze, config=CONFIG.with_overrides({"revenue_ceiling": "40.00"}))
    assert report.failed_checks == {"revenue_in_range"}


def test_a_missing_gold_table_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(QualityInputMissing, match="gold revenue table not found"):
        run_revenue_checks("green", str(tmp_path), INTERVAL_START, INTERVAL_END, CONFIG)


# --- the DAG ---------------------------------------------------------------------------------------
DAG_ID = "revenue_quality_checks"


@pytest.fixture(scope="module")
def quality_dag(airflow_db: Any) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS_DIR / "revenue_quality_checks.py"))
    assert bag.import_errors == {}
    return bag.dags[DAG_ID]


def dag_conf(lake: Path, **overrides: Any) -> dict[str, Any]:
    # dag.test() keeps params between runs in one process: always pass every param.
    return {
        "deployment_id": DEPLOYMENT,
        "interval_start": INTERVAL_START.isoformat(),
        "interval_end": INTERVAL_END.isoformat(),
        "freshness_max_lag": "15 minutes",
        "revenue_ceiling": "1000000.00",
        "max_dlq_share": 0.05,
        "max_late_share": 0.01,
        "lake_root": str(lake),
        **overrides,
    }


def test_the_dag_passes_on_correct_gold_and_fails_loudly_on_a_bad_one(
    quality_dag: Any, tmp_path: Path, base: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from revenue_platform.paths import LAKE_ROOT_ENV

    # The form's lake_root must be the platform's lake (or inside it): this test's lake is.
    monkeypatch.setenv(LAKE_ROOT_ENV, str(tmp_path))
    gold, bronze = copy.deepcopy(base)
    write_tables(tmp_path, DEPLOYMENT, gold, bronze)
    # The DAG checks a registered deployment with its registered window geometry and tables.
    register_deployment(tmp_path, deployment_id=DEPLOYMENT)
    good = quality_dag.test(run_conf=dag_conf(tmp_path))
    assert good.state == "success"
    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(run_id=good.run_id, dag_ids=DAG_ID, key="return_value")
        ).first()
        assert row is not None
        report = XComModel.deserialize_value(row)
    assert report["success"]
    assert report["data_docs_index"].startswith(str(tmp_path))

    # The same data fails under a stricter DLQ threshold passed through the trigger form.
    bad = quality_dag.test(run_conf=dag_conf(tmp_path, max_dlq_share=0.001))
    assert bad.state == "failed"
    states = {ti.task_id: ti.state for ti in bad.get_task_instances()}
    assert states == {"quality_gate.check_revenue_quality": "failed"}
    history = read_history(results_table_path(str(tmp_path)))
    failed = history[~history["success"]]
    assert failed["check"].tolist() == ["dlq_share"]
    assert failed["run_id"].iloc[0].endswith(bad.run_id)
    assert datetime.fromisoformat(report["interval_end"]) == INTERVAL_END.astimezone(UTC)
