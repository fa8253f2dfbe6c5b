"""The operations view's JSON endpoints against a real registry, gold table and quality history in a tmp lake.

The registry and tables are real Delta tables written with delta-rs; the progress JSON is what
`spark_apps.engine.observability` writes. Only authentication is replaced (by a fixed user) in the data
tests: it is Airflow's own token check, exercised against a running Airflow by the e2e browser test.
The unauthenticated tests run the real dependency.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from fastapi.testclient import TestClient

from revenue_platform.quality.report import CheckOutcome, QualityReport
from revenue_platform.quality.results import store_report
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry, RegistryEvent
from revenue_platform.serving.auth import require_airflow_user
from revenue_platform.serving.operations_view import create_operations_app
from spark_apps.contract.json_files import write_json_atomically
from spark_apps.contract.naming import DeploymentNames
from tests.quality_helpers import GOLD_ARROW_SCHEMA, check_outcome

pytestmark = pytest.mark.integration

W0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=15)


def _gold_row(
    location_id: str, order_type: str, index: int, count: int, revenue: str, city: str
) -> dict[str, Any]:
    start = W0 + index * WINDOW
    return {
        "location_id": location_id,
        "order_type": order_type,
        "window_start": start,
        "window_end": start + WINDOW,
        "order_count": count,
        "revenue": Decimal(revenue),
        "address_line1": "1 Main St",
        "address_line2": None,
        "city": city,
        "state": "CA",
        "zip": "90001",
        "contact_num": "555-0100",
        "batch_id": 1,
    }


def _write_gold(lake_root: str, deployment_id: str, rows: list[dict[str, Any]]) -> None:
    names = DeploymentNames(lake_root, deployment_id)
    write_deltalake(names.gold_revenue_table, pa.Table.from_pylist(rows, schema=GOLD_ARROW_SCHEMA))


def _write_progress(lake_root: str, deployment_id: str, document: dict[str, Any]) -> None:
    names = DeploymentNames(lake_root, deployment_id)
    folder = Path(names.progress_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{names.query_name('revenue')}.json").write_text(json.dumps(document))
    # The archive query's file and the driver's status file must not be mistaken for the revenue query's.
    (folder / f"{names.query_name('archive')}.json").write_text(
        json.dumps({"max_offsets_behind_latest": 999})
    )


def _register(registry: DeploymentRegistry, deployment_id: str, **fields: Any) -> None:
    names = DeploymentNames(registry.lake_root, deployment_id)
    registry.register(
        DeploymentRecord(
            deployment_id, lake_root=registry.lake_root, progress_dir=names.progress_dir, **fields
        ),
        "tester",
    )


@pytest.fixture
def lake(tmp_path: Path) -> str:
    """A lake with blue (was live, stopped), green (live, after a rollback-free promotion), candidate red."""
    root = str(tmp_path / "lake")
    registry = DeploymentRegistry(root)
    _register(registry, "blue", colour="blue", app_version="1.0.0", desired_state="stopped")
    _register(
        registry,
        "green",
        colour="green",
        app_version="1.1.0",
        desired_state="running",
        observed_state="running",
        restart_history_json=json.dumps(
            [
                {
                    "at": "2026-11-22T10:01:00+00:00",
                    "reason": "driver process is gone",
                    "outcome": "launched",
                },
                {
                    "at": "2026-11-22T10:03:00+00:00",
                    "reason": "driver process is gone",
                    "outcome": "launched",
                },
            ]
        ),
    )
    _register(registry, "red", app_version="1.2.0-rc1", desired_state="running", observed_state="starting")
    registry.switch_live("blue", actor="make demo", reason="first deployment")
    registry.switch_live("green", actor="blue_green_replay", reason="replay passed every gate")
    registry.append_events([RegistryEvent("red", "lease_acquired", "deploy", None, "1-x", "deploy")])

    _write_progress(
        root,
        "green",
        {
            "query_name": "green__revenue",
            "batch_id": 41,
            "batch_timestamp": "2026-11-22T10:05:00.000Z",
            "heartbeat_at": "2026-11-22T10:05:02+00:00",
            "input_rows_per_second": 12.5,
            "processed_rows_per_second": 30.25,
            "max_offsets_behind_latest": 7,
        },
    )
    # The driver's status file: rewritten every ~5 s while idle, unlike the progress file above.
    write_json_atomically(
        Path(DeploymentNames(root, "green").driver_status_file),
        {"deployment_id": "green", "heartbeat_at": "2026-11-22T10:26:58+00:00", "ready": True},
    )
    _write_gold(
        root,
        "green",
        [
            _gold_row("store_2", "GENERAL", 1, 2, "10.05", "Springfield"),
            _gold_row("store_1", "RESTAURANT", 0, 1, "0.10", "Shelbyville"),
            _gold_row("store_1", "GENERAL", 0, 3, "123456789.99", "Shelbyville"),
            _gold_row("store_1", "GENERAL", 2, 1, "0.01", "Shelbyville"),
            _gold_row("store_1", "GENERAL", 1, 2, "19.90", "Shelbyville"),
        ],
    )
    # blue's gold has a store green never saw: the picker must list the live deployment's stores only.
    _write_gold(root, "blue", [_gold_row("store_9", "GENERAL", 0, 1, "1.00", "Ogdenville")])

    def report(run_id: str, deployment_id: str, outcomes: tuple[CheckOutcome, ...]) -> QualityReport:
        return QualityReport(run_id, deployment_id, W0, W0 + timedelta(hours=1), outcomes, "unused")

    store_report(
        report("run-old", "green", (check_outcome("keys_unique", True),)), root, W0 + timedelta(hours=1)
    )
    store_report(
        report(
            "run-new",
            "green",
            (check_outcome("keys_unique", True), check_outcome("window_start_aligned", False, 2)),
        ),
        root,
        W0 + timedelta(hours=2),
    )
    # The newest run overall is blue's: the default (live) view must not show it.
    store_report(
        report("run-blue", "blue", (check_outcome("keys_unique", True),)), root, W0 + timedelta(hours=3)
    )
    docs = tmp_path / "lake" / "quality" / "data_docs"
    docs.mkdir(parents=True)
    (docs / "index.html").write_text("<html><body>Data Docs index</body></html>")
    (tmp_path / "lake" / "quality" / "secret.txt").write_text("outside the docs site")
    return root


# Ten seconds after green's last batch: its rates are current (tests of idle and stale rates move the clock).
NOW = datetime(2026, 11, 22, 10, 5, 10, tzinfo=UTC)


@pytest.fixture
def client(lake: str) -> Iterator[TestClient]:
    app = create_operations_app(lake, clock=lambda: NOW)
    app.dependency_overrides[require_airflow_user] = lambda: {"name": "tester"}
    with TestClient(app) as test_client:
        yield test_client


def test_deployments_show_live_first_with_lag_rates_and_restarts(client: TestClient) -> None:
    body = client.get("/api/deployments").json()

    assert body["live_deployment_id"] == "green"
    assert [(d["deployment_id"], d["role"], d["is_live"]) for d in body["deployments"]] == [
        ("green", "live", True),
        ("red", "candidate", False),
        ("blue", "stopped", False),
    ]
    green = body["deployments"][0]
    assert green["colour"] == "green"
    assert green["app_version"] == "1.1.0"
    assert (green["desired_state"], green["observed_state"]) == ("running", "running")
    assert green["restarts"] == 2
    assert green["offsets_behind_latest"] == 7, "the revenue query's lag, not the archive query's 999"
    assert (green["rates_state"], green["rates_age_s"]) == ("current", pytest.approx(10.0))
    assert green["input_rows_per_second"] == pytest.approx(12.5)
    assert green["processed_rows_per_second"] == pytest.approx(30.25)
    assert green["last_batch_id"] == 41
    assert datetime.fromisoformat(green["last_batch_at"]) == datetime(2026, 11, 22, 10, 5, tzinfo=UTC)
    # Heartbeat from the driver (idle for 21 min but alive), not the last batch's progress file.
    assert datetime.fromisoformat(green["heartbeat_at"]) == datetime(2026, 11, 22, 10, 26, 58, tzinfo=UTC)
    red = body["deployments"][1]
    assert red["colour"] == "other"
    assert red["observed_state"] == "starting"
    assert red["offsets_behind_latest"] is None, "no progress published yet"


def test_live_history_lists_switches_newest_first(client: TestClient) -> None:
    body = client.get("/api/live-history").json()

    assert body["live_deployment_id"] == "green"
    assert [(s["from_deployment"], s["to_deployment"], s["actor"]) for s in body["switches"]] == [
        ("blue", "green", "blue_green_replay"),
        (None, "blue", "make demo"),
    ]
    assert body["switches"][0]["reason"] == "replay passed every gate"


def test_stores_come_from_the_live_gold_with_their_city(client: TestClient) -> None:
    body = client.get("/api/stores").json()

    assert body["deployment_id"] == "green"
    assert body["stores"] == [
        {"location_id": "store_1", "city": "Shelbyville"},
        {"location_id": "store_2", "city": "Springfield"},
    ]
    assert [s["location_id"] for s in client.get("/api/stores?deployment_id=blue").json()["stores"]] == [
        "store_9"
    ]


def test_revenue_series_is_exact_to_the_cent_and_ordered(client: TestClient) -> None:
    body = client.get("/api/revenue", params={"location_id": "store_1"}).json()

    assert (body["deployment_id"], body["location_id"]) == ("green", "store_1")
    points = [
        (datetime.fromisoformat(p["window_start"]) - W0, p["order_type"], p["order_count"], p["revenue"])
        for p in body["points"]
    ]
    # Money is a decimal string in JSON, never a float (123456789.99 does not survive a float round trip
    # through many JSON libraries' formatting; a string does, to the cent).
    assert points == [
        (timedelta(0), "GENERAL", 3, "123456789.99"),
        (timedelta(0), "RESTAURANT", 1, "0.10"),
        (WINDOW, "GENERAL", 2, "19.90"),
        (2 * WINDOW, "GENERAL", 1, "0.01"),
    ]
    # Placed on a time axis, and summed over the range, per order type and overall, as decimal strings.
    assert [p["x"] for p in body["points"]] == [0.0, 0.0, 0.5, 1.0]
    totals = {
        scope: {kind: (t["order_count"], t["revenue"]) for kind, t in body[scope]["by_order_type"].items()}
        | {"overall": (body[scope]["overall"]["order_count"], body[scope]["overall"]["revenue"])}
        for scope in ("store_totals", "all_stores_totals")
    }
    assert totals == {
        "store_totals": {
            "GENERAL": (6, "123456809.90"),
            "RESTAURANT": (1, "0.10"),
            "overall": (7, "123456810.00"),
        },
        "all_stores_totals": {
            "GENERAL": (8, "123456819.95"),
            "RESTAURANT": (1, "0.10"),
            "overall": (9, "123456820.05"),
        },
    }
    latest_two = client.get("/api/revenue", params={"location_id": "store_1", "limit": 2}).json()
    assert [p["revenue"] for p in latest_two["points"]] == ["19.90", "0.01"]
    assert client.get("/api/revenue", params={"location_id": "store_404"}).json()["points"] == []


def test_latest_quality_run_of_the_live_deployment_with_failures_first(client: TestClient) -> None:
    body = client.get("/api/quality").json()

    latest = body["latest"]
    assert (latest["run_id"], latest["deployment_id"]) == ("run-new", "green")
    assert (latest["passed"], latest["failed"]) == (1, 1)
    assert [(c["check"], c["success"], c["unexpected_count"]) for c in latest["checks"]] == [
        ("window_start_aligned", False, 2),
        ("keys_unique", True, None),
    ]
    assert latest["checks"][0]["failing_keys_sample"] == ["store_1|GENERAL|2026-11-22T10:00:15"]
    assert body["data_docs_url"] == "data-docs/index.html"
    assert client.get("/api/quality?deployment_id=blue").json()["latest"]["run_id"] == "run-blue"


def test_data_docs_are_served_but_nothing_outside_them(client: TestClient) -> None:
    index = client.get("/data-docs/index.html")
    assert index.status_code == 200
    assert "Data Docs index" in index.text
    assert client.get("/data-docs/../secret.txt").status_code == 404
    assert client.get("/data-docs/%2E%2E/secret.txt").status_code == 404
    # An encoded slash survives URL normalization and reaches the handler as `../secret.txt`.
    assert client.get("/data-docs/..%2Fsecret.txt").status_code == 404
    assert client.get("/data-docs/missing.html").status_code == 404


def test_an_invalid_deployment_id_is_a_400_naming_it(client: TestClient) -> None:
    response = client.get("/api/revenue", params={"location_id": "store_1", "deployment_id": "../etc"})
    assert response.status_code == 400
    assert "deployment_id '../etc'" in response.json()["detail"]


def test_an_empty_lake_shows_nothing_live_instead_of_failing(tmp_path: Path) -> None:
    app = create_operations_app(str(tmp_path / "empty"))
    app.dependency_overrides[require_airflow_user] = lambda: {"name": "tester"}
    with TestClient(app) as client:
        assert client.get("/api/deployments").json() == {
            "live_deployment_id": None,
            "deployments": [],
            "awaiting_approval": [],
        }
        quality = client.get("/api/quality").json()
        assert (quality["latest"], quality["deployment_id"], quality["data_docs_url"]) == (
            None,
            None,
            "data-docs/index.html",
        )
        assert quality["no_run_reason"].startswith("Nothing is live yet, so the hourly run skips")
        assert client.get("/api/live-history").json()["switches"] == []
        assert client.get("/api/stores").json() == {"deployment_id": None, "stores": []}
        missing = client.get("/api/revenue", params={"location_id": "store_1"})
        assert missing.status_code == 404
        assert "no deployment is live" in missing.json()["detail"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/deployments",
        "/api/quality",
        "/api/live-history",
        "/api/stores",
        "/api/revenue?location_id=store_1",
        "/data-docs/index.html",
    ],
)
def test_data_endpoints_require_an_airflow_user(lake: str, path: str) -> None:
    from revenue_platform.airflow.auth import with_airflow_auth

    # As the plugin mounts it: Airflow's auth manager checks the user.
    with TestClient(with_airflow_auth(create_operations_app(lake))) as anonymous:
        response = anonymous.get(path)
    assert response.status_code == 401
    assert response.json() == {"detail": "Not authenticated"}
    # Served without the Airflow face's check, the app lets nobody in.
    with TestClient(create_operations_app(lake)) as unchecked:
        response = unchecked.get(path)
    assert response.status_code == 503
    assert "must be served by the Airflow API server" in response.json()["detail"]


def test_page_shell_and_icon_are_public_and_carry_no_data(lake: str) -> None:
    with TestClient(create_operations_app(lake)) as anonymous:
        page = anonymous.get("/")
        icon = anonymous.get("/icon.svg")
    assert page.status_code == 200
    assert "<title>Revenue operations</title>" in page.text
    assert 'id="revenue-chart"' in page.text
    assert "store_1" not in page.text
    assert "1.1.0" not in page.text
    assert icon.headers["content-type"] == "image/svg+xml"


def test_airflow_loads_the_plugin_with_its_nav_entry_and_app() -> None:
    """Airflow's own plugin loader (plugins folder from the test session's Airflow environment)."""
    from airflow import plugins_manager

    errors = {path: error for path, error in plugins_manager.get_import_errors().items() if "revenue" in path}
    assert errors == {}
    info = {p["name"]: p for p in plugins_manager.get_plugin_info()}
    plugin = info["revenue_operations_view"]
    [view] = plugin["external_views"]
    assert (view["name"], view["href"], view["url_route"], view["destination"]) == (
        "Revenue operations",
        "/revenue-ops/",
        "revenue-operations",
        "nav",
    )
    apps, _ = plugins_manager.get_fastapi_plugins()
    prefixes = [app["url_prefix"] for app in apps]
    assert prefixes.count("/revenue-ops") == 1
    assert len(prefixes) == len(set(prefixes)), f"two plugin apps share a url_prefix: {prefixes}"


@pytest.mark.parametrize(("role", "sees_paths"), [("VIEWER", False), ("OP", False), ("ADMIN", True)])
def test_a_failed_drivers_error_shows_server_paths_to_admins_only(
    lake: str, role: str, sees_paths: bool
) -> None:
    from types import SimpleNamespace

    log = f"{lake}/progress/red/driver-1.log"
    error = (
        f'File "{lake}/../spark_apps/micro_batch.py", line 131, in __call__\n'
        f"ValueError: bad input; log {log}, file:{lake}/checkpoints/red at 1545.0 rows/s"
    )
    DeploymentRegistry(lake).update("red", {"last_error": error}, "tester")
    app = create_operations_app(lake)
    app.dependency_overrides[require_airflow_user] = lambda: SimpleNamespace(username="u", role=role)
    with TestClient(app) as client:
        [red] = [
            d for d in client.get("/api/deployments").json()["deployments"] if d["deployment_id"] == "red"
        ]
    if sees_paths:
        assert red["last_error"] == error
    else:
        assert lake not in red["last_error"]
        assert red["last_error"] == (
            'File "<path>", line 131, in __call__\nValueError: bad input; log <path>, <path> at 1545.0 rows/s'
        )


def test_relative_lake_paths_and_paths_with_spaces_are_hidden_from_non_admins() -> None:
    from revenue_platform.serving.operations_view import without_server_paths

    error = "DeltaTable at .local/lake/gold/x failed; see /tmp/my lake/driver.log (1545.0 rows/s)"
    assert without_server_paths(error, [".local/lake", "/tmp/my lake"]) == (
        "DeltaTable at <path> failed; see <path> (1545.0 rows/s)"
    )


def _deployments(lake: str, now: datetime) -> dict[str, dict[str, Any]]:
    app = create_operations_app(lake, clock=lambda: now)
    app.dependency_overrides[require_airflow_user] = lambda: {"name": "tester"}
    with TestClient(app) as client:
        return {d["deployment_id"]: d for d in client.get("/api/deployments").json()["deployments"]}


def test_an_idle_deployment_shows_no_rates_but_how_long_ago_its_last_batch_was(lake: str) -> None:
    """The user's report: idle for 16 minutes, the view still said "1545.0 / 334.2 rows/s"."""
    _write_progress(
        lake,
        "green",
        {
            "batch_id": 1,
            "batch_timestamp": "2026-11-22T10:05:00.000Z",
            "batch_duration_ms": 6443,
            "num_input_rows": 3090,
            "input_rows_per_second": 1545.0,
            "processed_rows_per_second": 334.2,
            # Spark's idle report after the batch: the query found nothing new in Kafka.
            "caught_up_at": "2026-11-22T10:05:26+00:00",
            "max_offsets_behind_latest": 0,
        },
    )
    green = _deployments(lake, datetime(2026, 11, 22, 10, 21, 6, 443000, tzinfo=UTC))["green"]

    assert green["rates_state"] == "idle"
    assert green["rates_age_s"] == pytest.approx(16 * 60)
    assert (green["input_rows_per_second"], green["processed_rows_per_second"]) == (None, None)
    assert (green["last_batch_id"], green["last_batch_input_rows"]) == (1, 3090)
    assert datetime.fromisoformat(green["last_batch_ended_at"]) == datetime(
        2026, 11, 22, 10, 5, 6, 443000, tzinfo=UTC
    )


def test_rates_older_than_three_trigger_intervals_are_stale(tmp_path: Path) -> None:
    root = str(tmp_path / "lake")
    registry = DeploymentRegistry(root)
    # A 20 s trigger: its rates are current for 60 s after the batch ended (the 30 s floor is below).
    _register(
        registry,
        "slow",
        desired_state="running",
        config_json=json.dumps({"trigger": {"interval": "20 seconds"}}),
    )
    _write_progress(
        root,
        "slow",
        {
            "batch_id": 3,
            "batch_timestamp": "2026-11-22T10:00:00Z",
            "batch_duration_ms": 5000,
            "num_input_rows": 40,
            "input_rows_per_second": 2.0,
            "processed_rows_per_second": 8.0,
        },
    )
    batch_end = datetime(2026, 11, 22, 10, 0, 5, tzinfo=UTC)

    fresh = _deployments(root, batch_end + timedelta(seconds=60))["slow"]
    assert (fresh["rates_state"], fresh["rates_current_for_s"]) == ("current", 60.0)
    assert (fresh["input_rows_per_second"], fresh["processed_rows_per_second"]) == (2.0, 8.0)
    stale = _deployments(root, batch_end + timedelta(seconds=61))["slow"]
    assert stale["rates_state"] == "stale"
    assert (stale["input_rows_per_second"], stale["processed_rows_per_second"]) == (None, None)


REPLAY_RUN = "manual__2026-11-22T10:00:00+00:00"
REPLAY_ACTOR = f"airflow:blue_green_replay/{REPLAY_RUN} (user alice)"
"""As revenue_platform.airflow.dag_defaults.actor_from_context writes it for a run alice triggered."""


def _get(lake: str, path: str) -> Any:
    app = create_operations_app(lake, clock=lambda: W0 + timedelta(hours=1))
    app.dependency_overrides[require_airflow_user] = lambda: {"name": "tester"}
    with TestClient(app) as client:
        return client.get(path).json()


def _roles(lake: str) -> list[tuple[str, str]]:
    return [(d["deployment_id"], d["role"]) for d in _get(lake, "/api/deployments")["deployments"]]


def test_a_blue_green_switch_names_each_role_the_approval_and_the_approver(tmp_path: Path) -> None:
    """Through a replay's steps as `bluegreen.replay` records them: awaiting approval, the switch with
    its evidence, the grace period (blue outgoing, not "candidate"), and blue's retirement."""
    from revenue_platform.bluegreen import replay
    from revenue_platform.streaming.stop import stop_deployment

    lake = str(tmp_path / "lake")
    registry = DeploymentRegistry(lake)
    for deployment_id in ("blue", "green"):
        _register(registry, deployment_id, colour=deployment_id, desired_state="running")
    registry.switch_live("blue", actor="make demo", reason="first deployment on this stack")
    replay.record(
        registry, "green", "replay_started", REPLAY_ACTOR, "replay of blue", {"blue": "blue"}, "1.1.0"
    )
    replay.mark_awaiting_approval(registry, "green", REPLAY_ACTOR)

    waiting = _get(lake, "/api/deployments")
    assert _roles(lake) == [("blue", "live"), ("green", "candidate")]
    [request] = waiting["awaiting_approval"]
    assert (request["green_deployment_id"], request["dag_id"], request["run_id"]) == (
        "green",
        "blue_green_replay",
        REPLAY_RUN,
    )
    # The task instance's "Required Actions" tab in the Airflow 3 UI, where Approve / Reject are.
    assert request["approval_page"] == (
        f"dags/blue_green_replay/runs/{REPLAY_RUN}/tasks/request_approval/required_actions"
    )

    approver = {"id": "bob", "name": "bob"}  # Airflow's HITL answer names its user like this
    evidence = {"require_approval": True, "approved_by": approver, "diff": {}, "caught_up": {}}
    replay.switch_live(registry, "green", "blue", REPLAY_ACTOR, evidence)

    during_grace = _get(lake, "/api/deployments")
    assert during_grace["awaiting_approval"] == []
    assert _roles(lake) == [("green", "live"), ("blue", "outgoing")]
    blue = during_grace["deployments"][1]
    assert "grace period" in blue["role_note"]
    assert "now green" in blue["role_note"]
    history = _get(lake, "/api/live-history")["switches"]
    assert [(s["to_deployment"], s["approved_by"], s["approval_required"]) for s in history] == [
        ("green", "bob", True),
        ("blue", None, None),
    ]
    assert history[0]["actor"] == REPLAY_ACTOR

    stop_deployment(
        registry, "blue", 1.0, REPLAY_ACTOR, "retired after promotion of green", progress=lambda _: None
    )
    assert _roles(lake) == [("green", "live"), ("blue", "stopped")]


def test_a_deployment_rolled_back_from_is_outgoing_until_stopped(tmp_path: Path) -> None:
    from revenue_platform.bluegreen import replay

    lake = str(tmp_path / "lake")
    registry = DeploymentRegistry(lake)
    for deployment_id in ("blue", "green"):
        _register(registry, deployment_id, colour=deployment_id, desired_state="running")
    registry.switch_live("blue", actor="make demo", reason="first deployment")
    registry.switch_live("green", actor="tester", reason="by hand")
    replay.rollback(
        registry, "blue", "bad numbers", "airflow:rollback_live_deployment/manual__x", lambda _: None
    )

    assert _roles(lake) == [("blue", "live"), ("green", "outgoing")]
    green = _get(lake, "/api/deployments")["deployments"][1]
    assert "stop_streaming_app" in green["role_note"]
    rollback = _get(lake, "/api/live-history")["switches"][0]
    assert (rollback["to_deployment"], rollback["approved_by"], rollback["approval_required"]) == (
        "blue",
        None,
        None,
    )
