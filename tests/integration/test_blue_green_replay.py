"""blue_green_replay and rollback_live_deployment end to end, on a lake in the object store.

Real `dag.test()` runs, the session's real Kafka broker, its real S3-compatible store and real detached
spark-submit drivers. The lake root is an `s3a://` folder of the module's own in the store's bucket,
and the store's endpoint and login come from the Airflow connection `lake_object_store`, as in a
deployment: registry, checkpoints, bronze, gold, quality results and the drivers' side files are
objects in the bucket, and nothing of the lake lands on local disk. (The same DAGs on a local lake:
the demo's replay in tests/e2e, through the stack's own Airflow.)

One module-wide blue deployment (deployed through deploy_streaming_app and made live) serves
every test; the tests run in file order. First the replay's two triggers, with runs made as the
scheduler makes them (tests/airflow_runs.py): a periodic rebuild reproduces live and is retired with
live untouched; a release (publish_app_version's asset event) starts a replay that reaches the
approval gate, a second replay triggered meanwhile (`airflow dags test`, its own process) is skipped
with its reason, and the release's replay is rejected, which stops its green. Then manual replays:
a green that fails quality, a green that never catches up, a green that is promoted (and blue
retired), a rollback, and the audit trail of all of it; then retention deletes half the topic: a
replay from earliest is refused, and a replay from blue's bronze archive, approved by a person
(HITL), is promoted with every order exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from revenue_platform import processes
from revenue_platform.bluegreen.window_diff import gold_rows
from revenue_platform.connections import LAKE_OBJECT_STORE_CONN_ID, connection_env_var
from revenue_platform.local_object_store import (
    ObjectStoreSettings,
    local_credentials,
    local_store_connection_json,
)
from revenue_platform.local_stack.airflow_local import LOCAL_APPROVER_USER
from revenue_platform.orders_generator import GeneratorSettings, generate_orders, generate_stores, produce
from revenue_platform.paths import REPO_ROOT, state_dir
from revenue_platform.quality.runner import quality_root
from revenue_platform.registry import DeploymentRegistry, resolve_live_deployment
from tests.airflow_runs import asset_triggered_run, cron_tick_run, latest_manual_run, runs_created_by_airflow
from tests.kafka_helpers import read_topic, unique_suffix
from tests.object_store_helpers import in_the_bucket, local_paths_naming
from tests.streaming_helpers import (
    DEPLOY_DEFAULTS,
    gold,
    load_dags,
    spark_drivers,
    task_states,
    topic_overrides,
    wait_for_gold,
    xcom,
)

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.integration

SUCCESS, FAILED = "success", "failed"
BLUE = "blue"
DAG_ID = "blue_green_replay"
REPLAY_DEFAULTS: dict[str, Any] = {
    "blue_deployment_id": None,
    "version": "2.0.0",
    "config_overrides": {},
    "replay_source": "kafka_earliest",
    "max_offsets_behind": 0,
    "catch_up_timeout_s": 150,
    "poll_interval_s": 2,
    "revenue_tolerance": "0.00",
    "count_tolerance": 0,
    "quality_thresholds": {},
    "require_approval": False,
    "grace_period_s": 0,
    "start_timeout_s": 300,
    "stop_timeout_s": 30,
}


class Stack:
    def __init__(
        self,
        lake: str,
        store: ObjectStoreSettings,
        bootstrap: str,
        topics: dict[str, Any],
        records: list[Any],
        local_roots: list[Path],
    ) -> None:
        self.lake, self.store, self.local_roots = lake, store, local_roots
        self.bootstrap, self.topics, self.records = bootstrap, topics, records
        self.registry = DeploymentRegistry(lake)
        self.dags = load_dags("deploy_streaming_app", "blue_green_replay", "rollback_live_deployment")
        self.suffix = unique_suffix()
        self.retained_highs: dict[int, int] = {}

    def replay(self, green: str, **params: Any) -> Any:
        conf = {**REPLAY_DEFAULTS, "green_deployment_id": green, **params}
        return self.dags["blue_green_replay"].test(run_conf=conf)


@pytest.fixture(scope="module")
def stack(
    airflow_db: Any,
    kafka_bootstrap: str,
    object_store: ObjectStoreSettings,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    lake = f"{object_store.lake_root}/bluegreen-{uuid.uuid4().hex[:12]}"
    with pytest.MonkeyPatch.context() as patch:
        # The store as a deployment defines it: the Airflow connection, here in its environment variable.
        patch.setenv(connection_env_var(LAKE_OBJECT_STORE_CONN_ID), local_store_connection_json(object_store))
        patch.setenv("PLATFORM_LAKE_ROOT", lake)
        suffix = unique_suffix()
        topics = topic_overrides(kafka_bootstrap, suffix)
        records = list(
            generate_orders(
                GeneratorSettings(orders=200, stores=3, span_seconds=120, duplicate_every=20, bad_every=50)
            )
        )
        produce(kafka_bootstrap, topics["kafka.stores_topic"], generate_stores(3))
        produce(kafka_bootstrap, topics["kafka.orders_topic"], records)
        local_roots = [REPO_ROOT, state_dir(), tmp_path_factory.getbasetemp()]
        built = Stack(lake, object_store, kafka_bootstrap, topics, records, local_roots)
        try:
            run = built.dags["deploy_streaming_app"].test(
                run_conf={**DEPLOY_DEFAULTS, "deployment_id": BLUE, "config_overrides": topics}
            )
            assert run.state == SUCCESS, task_states(run)
            wait_for_gold(built.registry, BLUE, records)
            built.registry.switch_live(BLUE, "test-setup", "initial live deployment")
            yield built
        finally:
            for pid in spark_drivers(lake):
                processes.terminate(pid, 5.0)


def assert_not_running(stack: Stack, deployment_id: str) -> None:
    record = stack.registry.get(deployment_id)
    assert (record.desired_state, record.observed_state) == ("stopped", "stopped")
    drivers = spark_drivers(stack.lake)
    marker = f"/streaming_apps/{deployment_id}/config-"
    assert all(marker not in processes.cmdline(pid) for pid in drivers), drivers


def assert_nothing_of_the_lake_on_local_disk(stack: Stack) -> None:
    """No file or folder on local disk names the lake (the repository, i.e. the drivers' working
    directory, the state dir with their config files and logs, pytest's temp folders), but the quality
    checks' local mirror of the lake's Data Docs site and GX results (docs/object-store.md); and the
    store's secret was exported to no environment of this process (dag.test() runs every task here)."""
    mirror = quality_root(stack.lake)
    leaked = [
        path
        for path in local_paths_naming(stack.lake.rsplit("/", 1)[-1], stack.local_roots, stack.store.data_dir)
        if not path.is_relative_to(mirror.parent)
    ]
    assert leaked == []
    assert [path.name for path in mirror.parent.iterdir()] == ["quality"]
    assert {path.name for path in mirror.iterdir()} <= {"data_docs", "gx"}
    secret = local_credentials(stack.store)["secret_access_key"]
    assert secret not in os.environ.values()


def test_a_periodic_run_with_a_zero_diff_is_recorded_reproduced_and_leaves_live_untouched(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLAY_SCHEDULE", "0 3 * * *")  # parsed (and synced) with the cron timetable
    dag = load_dags(DAG_ID)[DAG_ID]

    with runs_created_by_airflow(cron_tick_run):
        run = dag.test()

    assert (run.run_type, run.state) == ("scheduled", SUCCESS), task_states(run)
    states = task_states(run)
    assert states["record_reproduced"] == SUCCESS
    assert {
        states[t] for t in ("request_approval", "no_approval_required", "switch_live", "retire_blue")
    } == {"skipped"}
    assert xcom(run, "abort_green") == {"action": "retired_reproduced"}
    request = xcom(run, "validate_request")
    green = request["green_deployment_id"]
    assert (request["trigger"], request["mode"], request["blue_deployment_id"]) == (
        "periodic",
        "reproduce",
        BLUE,
    )
    assert green.startswith("repro-")
    # Live untouched, and still running; the replica ran blue's version and config, then was retired.
    assert resolve_live_deployment(stack.lake) == BLUE
    assert stack.registry.get(BLUE).observed_state == "running"
    replica = stack.registry.get(green)
    assert replica.app_version == stack.registry.get(BLUE).app_version
    assert_not_running(stack, green)
    kinds = [e.kind for e in stack.registry.events(green)]
    assert kinds.index("replay_diff_passed") < kinds.index("replay_reproduced")
    assert "live_switched" not in kinds
    assert "replay_aborted" not in kinds
    [reproduced] = [e for e in stack.registry.events(green) if e.kind == "replay_reproduced"]
    assert reproduced.details["diff"]["passed"] is True
    assert reproduced.details["diff"]["windows_compared"] > 0
    assert reproduced.details["live"] == BLUE


def runs_waiting_for_approval() -> list[str]:
    """Run ids of blue_green_replay runs whose request_approval waits for a person's answer (HITL)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState
    from sqlalchemy import select

    with create_session() as session:
        return list(
            session.scalars(
                select(TaskInstance.run_id).where(
                    TaskInstance.dag_id == DAG_ID,
                    TaskInstance.task_id == "request_approval",
                    TaskInstance.state == TaskInstanceState.AWAITING_INPUT,
                )
            ).all()
        )


class SecondTriggerThenReject:
    """Once the release's replay waits at request_approval: a person triggers a second replay with
    `airflow dags test` (its own process: Airflow runs tasks in a process's main thread only), then the
    first one is rejected through the HITL REST API."""

    def __init__(self, api: TestClient, headers: dict[str, str], outsider: dict[str, str]) -> None:
        # headers: the approver's; outsider: a user outside the approver group, who tries first.
        self.api, self.headers, self.outsider = api, headers, outsider
        self.outsider_response: tuple[int, str] | None = None
        self.second: subprocess.CompletedProcess[str] | None = None
        self.responses: list[tuple[int, Any]] = []
        self.prompt: dict[str, Any] = {}
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        try:
            run_id = None
            for _ in range(600):
                run_id = next(iter(runs_waiting_for_approval()), None)
                if run_id:
                    break
                time.sleep(1.0)
            if run_id is None:
                return
            conf = {"green_deployment_id": "green-overlap", "mode": "promote"}
            # This process's environment: the lake root and the store's connection, as the person's.
            self.second = subprocess.run(
                [sys.executable, "-m", "airflow", "dags", "test", DAG_ID, "--conf", json.dumps(conf)],
                env=dict(os.environ),
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
        except BaseException as error:  # surfaced by the test, not lost in the thread
            self.error = error
        finally:
            if run_id is not None:
                self._reject(run_id)

    def _reject(self, run_id: str) -> None:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState
        from sqlalchemy import select

        path = f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/request_approval/-1/hitlDetails"
        # What the person reads before answering (the UI's Required actions page shows the same).
        shown = self.api.get(path, headers=self.headers)
        self.prompt = shown.json() if shown.status_code == 200 else {"status": shown.status_code}
        answer = {"chosen_options": ["Reject"], "params_input": {}}
        refused = self.api.patch(path, headers=self.outsider, json=answer)
        self.outsider_response = (refused.status_code, refused.text)
        response = self.api.patch(path, headers=self.headers, json=answer)
        self.responses.append((response.status_code, response.text))
        if response.status_code != 200:
            # Never leave the first run parked for its 24 h timeout: fail the task, the test reports why.
            with create_session() as session:
                ti = session.scalars(
                    select(TaskInstance).where(
                        TaskInstance.dag_id == DAG_ID,
                        TaskInstance.run_id == run_id,
                        TaskInstance.task_id == "request_approval",
                    )
                ).one()
                ti.state = TaskInstanceState.FAILED


def test_a_release_starts_a_replay_that_waits_for_approval_and_a_second_trigger_is_skipped(
    stack: Stack,
    airflow_api: TestClient,
    auth: dict[str, str],
    approver_auth: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv("REPLAY_SCHEDULE", raising=False)
    dags = load_dags("publish_app_version", DAG_ID)
    published = dags["publish_app_version"].test(
        run_conf={
            "version": "2.0.0",
            "config_overrides": {"kafka.max_offsets_per_trigger": 150},
            "require_approval": True,
            "notes": "itest",
        }
    )
    assert published.state == SUCCESS, task_states(published)
    release = stack.registry.get_release("2.0.0")

    watcher = SecondTriggerThenReject(airflow_api, approver_auth, outsider=auth)
    watcher.thread.start()
    with runs_created_by_airflow(asset_triggered_run):
        run = dags[DAG_ID].test()
    watcher.thread.join(timeout=300)

    assert watcher.error is None, watcher.error
    assert [status for status, _ in watcher.responses] == [200], watcher.responses
    # The task is assigned to the approver group ([revenue_platform] approvers: the local stack's
    # approver); Airflow refused the admin's answer.
    assert watcher.prompt.get("assigned_users") == [{"id": "approver", "name": "approver"}], watcher.prompt
    refused = watcher.outsider_response
    assert refused is not None
    assert refused[0] == 403, refused
    assert "is not a respondent" in refused[1]
    # The release's replay: version and config from the registry row, approval required, then rejected.
    assert run.run_type == "asset_triggered"
    request = xcom(run, "validate_request")
    green = request["green_deployment_id"]
    assert (request["trigger"], request["version"], request["require_approval"]) == ("release", "2.0.0", True)
    assert green.startswith("green-2-0-0-")
    record = stack.registry.get(green)
    assert (record.app_version, record.colour) == ("2.0.0", "green")
    assert record.config["kafka"]["max_offsets_per_trigger"] == 150
    assert release.config_overrides == {"kafka.max_offsets_per_trigger": 150}
    states = task_states(run)
    assert (states["diff_against_blue"], states["request_approval"], states["switch_live"]) == (
        SUCCESS,
        FAILED,
        "upstream_failed",
    )
    assert run.state == FAILED
    # The person was shown the gates' numbers, and the same prompt went to the alert channels (none
    # configured here: the notifier says so once and the approval went on).
    question = f"Promote green {green} (version 2.0.0) to live in place of {BLUE}?"
    assert watcher.prompt.get("subject") == question, watcher.prompt
    assert "closed windows both cover" in watcher.prompt["body"]
    assert "| orders |" in watcher.prompt["body"]
    assert "**Quality**: passed" in watcher.prompt["body"]
    alerts = [r.getMessage() for r in caplog.records if r.name == "revenue_platform.airflow.notify"]
    assert [m for m in alerts if "APPROVAL NEEDED" in m and question in m] != [], alerts
    kinds = [e.kind for e in stack.registry.events(green)]
    assert kinds.index("replay_awaiting_approval") < kinds.index("replay_aborted")
    assert resolve_live_deployment(stack.lake) == BLUE
    assert_not_running(stack, green)
    # The second trigger, while the first waited for approval: skipped before touching anything.
    assert watcher.second is not None
    log = watcher.second.stdout + watcher.second.stderr
    assert watcher.second.returncode == 0, log[-3000:]
    second = latest_manual_run(DAG_ID)
    assert second.state == SUCCESS
    assert set(task_states(second).values()) == {"skipped"}
    assert stack.registry.find("green-overlap") is None
    assert "1 other blue_green_replay run(s) are waiting for approval at request_approval" in log
    assert f"replay of {green}" in log


def test_a_green_that_fails_quality_is_not_promoted_and_is_stopped(stack: Stack) -> None:
    # Every window's revenue is above one cent: the revenue-ceiling expectation fails on green only.
    run = stack.replay("green-q", quality_thresholds={"revenue_ceiling": "0.01"})

    assert run.state == FAILED
    states = task_states(run)
    assert states["wait_for_catch_up"] == SUCCESS
    assert states["check_quality"] == FAILED
    assert states["switch_live"] == "upstream_failed"
    assert states["abort_green"] == SUCCESS
    assert states["fail_if_any_failed"] == FAILED
    assert resolve_live_deployment(stack.lake) == BLUE
    assert_not_running(stack, "green-q")
    assert stack.registry.get(BLUE).observed_state == "running"
    failed = [e for e in stack.registry.events("green-q") if e.kind == "replay_gate_failed"]
    assert failed
    assert failed[-1].reason is not None
    assert failed[-1].reason.startswith("quality:")
    aborted = [e for e in stack.registry.events("green-q") if e.kind == "replay_aborted"]
    assert aborted
    assert aborted[-1].reason == failed[-1].reason


def test_a_green_that_does_not_catch_up_in_time_is_aborted(stack: Stack) -> None:
    # Five offsets per micro-batch cannot read ~200 records in no time; with a 1-s trigger, shorter
    # than a batch, the batches run back to back until the stop.
    run = stack.replay(
        "green-slow",
        config_overrides={"kafka.max_offsets_per_trigger": 5, "trigger.interval": "1 second"},
        catch_up_timeout_s=0,
    )

    assert run.state == FAILED
    states = task_states(run)
    assert (states["deploy_green"], states["wait_for_catch_up"], states["abort_green"]) == (
        SUCCESS,
        FAILED,
        SUCCESS,
    )
    assert states["check_quality"] == "upstream_failed"
    assert resolve_live_deployment(stack.lake) == BLUE
    assert_not_running(stack, "green-slow")
    [failed] = [e for e in stack.registry.events("green-slow") if e.kind == "replay_gate_failed"]
    assert failed.reason is not None
    assert "did not catch up" in failed.reason
    # Its batches ran back to back (a backlog): the stop still ended it at a batch boundary, not
    # with the SIGKILL after the stop's timeout (30 s here).
    [stopped] = [e for e in stack.registry.events("green-slow") if e.kind == "stopped"]
    assert stopped.details["how"] == "graceful", stopped.details


def test_a_green_with_a_changed_config_is_promoted_and_blue_retired(stack: Stack) -> None:
    # The changed config includes the stateful stage's partition count, 2 -> 8: Spark pins it in a
    # checkpoint, so a replay into a new deployment is how a deployment's count changes (issue 59).
    run = stack.replay(
        "green", config_overrides={"kafka.max_offsets_per_trigger": 150, "shuffle_partitions": 8}
    )

    assert run.state == SUCCESS, task_states(run)
    states = task_states(run)
    assert states["no_approval_required"] == SUCCESS
    assert states["request_approval"] == "skipped"
    assert states["fail_if_any_failed"] == "skipped"
    assert xcom(run, "abort_green")["action"] == "kept_live"
    assert resolve_live_deployment(stack.lake) == "green"
    green = stack.registry.get("green")
    assert (green.colour, green.app_version, green.observed_state) == ("green", "2.0.0", "running")
    assert green.config["kafka"]["max_offsets_per_trigger"] == 150
    assert green.config["kafka"]["starting_offsets"] == "earliest"
    # Own namespace: checkpoint, gold and revenue topic are green's, not blue's.
    blue = stack.registry.get(BLUE)
    assert (green.config["shuffle_partitions"], blue.config["shuffle_partitions"]) == (8, 2)
    assert green.checkpoint_dir != blue.checkpoint_dir
    assert green.gold_table != blue.gold_table
    green_topic = green.config["kafka"]["revenue_topic"]
    assert green_topic == f"{stack.topics['kafka.revenue_topic']}_green"
    assert read_topic(stack.bootstrap, green_topic)
    diff = xcom(run, "diff_against_blue")
    assert diff["passed"]
    # Both apps had read all of Kafka: every window is final and compared, not only those the
    # watermark (30 s behind the newest order, standing still on the idle topic) has closed.
    every_window = {
        (r["location_id"], r["order_type"], r["window_start"]) for r in gold_rows(green.gold_table)
    }
    assert diff["windows_compared"] == len(every_window)
    assert diff["blue_revenue"] == diff["green_revenue"]
    # Green's gold, on the store, equals the Decimal oracle of every order produced (each once).
    wait_for_gold(stack.registry, "green", stack.records, timeout_s=0)
    assert all(isinstance(revenue, Decimal) for _, revenue in gold(stack.registry, "green").values())
    # Grace period 0: blue was stopped once green went live.
    assert_not_running(stack, BLUE)
    # Everything green owns is objects in the bucket: its tables and checkpoints.
    names = green.app_config().names
    assert green.gold_table.startswith(f"{stack.lake}/")
    for table in (green.gold_table, names.bronze_orders_table):
        assert (in_the_bucket(stack.store, table) / "_delta_log").is_dir()
    assert any(in_the_bucket(stack.store, green.checkpoint_dir).glob("*/commits/*"))
    # Green's state stores (dedupe, windows) have 8 partitions each, blue's 2; gold above was exact.
    for deployment, count in ((green, 8), (blue, 2)):
        operators = list(in_the_bucket(stack.store, deployment.checkpoint_dir).glob("*/state/*"))
        assert operators, deployment.checkpoint_dir
        for operator in operators:
            partitions = {p.name for p in operator.iterdir() if p.name.isdigit()}
            assert partitions == {str(n) for n in range(count)}, operator
    assert_nothing_of_the_lake_on_local_disk(stack)


def test_rollback_returns_live_to_the_previous_deployment_and_keeps_outputs(stack: Stack) -> None:
    run = stack.dags["rollback_live_deployment"].test(
        run_conf={"target_deployment_id": None, "reason": "numbers look off"}
    )

    assert run.state == SUCCESS, task_states(run)
    assert xcom(run, "rollback") == {"from": "green", "to": BLUE, "reason": "numbers look off"}
    assert resolve_live_deployment(stack.lake) == BLUE
    assert (in_the_bucket(stack.store, stack.registry.get("green").gold_table) / "_delta_log").is_dir()
    wait_for_gold(stack.registry, BLUE, stack.records, timeout_s=0)


def test_the_audit_trail_records_every_step_with_time_and_actor(stack: Stack) -> None:
    events = stack.registry.events()
    green = [e for e in events if e.deployment_id == "green"]
    kinds = [e.kind for e in green]
    steps = [
        "registered",
        "launched",
        "started",
        "replay_started",
        "replay_caught_up",
        "replay_quality_passed",
        "replay_diff_passed",
        "live_switched",
        "replay_promoted",
    ]
    assert [k for k in kinds if k in steps] == steps
    replay_actor = next(e.actor for e in green if e.kind == "replay_promoted")
    assert replay_actor.startswith("airflow:blue_green_replay/")
    assert all(e.actor == replay_actor for e in green if e.kind in steps)
    [retired] = [e for e in events if e.deployment_id == BLUE and e.kind == "stopped"]
    assert retired.actor == replay_actor
    assert retired.reason == "retired after promotion of green"
    switches = [(e.from_value, e.to_value) for e in events if e.kind == "live_switched"]
    assert switches == [(None, BLUE), (BLUE, "green"), ("green", BLUE)]
    [rolled] = [e for e in events if e.kind == "rollback"]
    assert rolled.actor.startswith("airflow:rollback_live_deployment/")
    assert rolled.reason == "numbers look off"
    times = [e.at for e in events]
    assert all(t is not None and t.tzinfo is not None for t in times)
    assert [e.at for e in green] == sorted(e.at for e in green)


def simulate_retention(bootstrap: str, topic: str) -> dict[int, int]:
    """Delete the older half of every partition, as retention would; return each partition's old high."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from spark_apps.storage.kafka_ranges import partition_watermarks

    highs = {
        p: high for p, (_low, high) in partition_watermarks({"bootstrap.servers": bootstrap}, topic).items()
    }
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, p, high // 2) for p, high in highs.items()])
    for future in futures.values():
        future.result(timeout=30)
    return highs


class Approver:
    """A person approving the pending `request_approval` of a blue_green_replay run through Airflow's
    HITL REST API (`PATCH .../hitlDetails`), on an API server sharing the test's metadata DB: the
    same call the UI's "Approve" button makes, which un-parks the task for dag.test()."""

    def __init__(self, api: TestClient, headers: dict[str, str]) -> None:
        self.api, self.headers = api, headers
        self.responses: list[Any] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Approver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)

    def _watch(self) -> None:
        while not self.stop.wait(1.0):
            for run_id in runs_waiting_for_approval():
                response = self.api.patch(
                    f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/request_approval/-1/hitlDetails",
                    headers=self.headers,
                    json={"chosen_options": ["Approve"], "params_input": {}},
                )
                self.responses.append((response.status_code, response.json()))


def test_after_retention_kafka_earliest_is_refused_before_anything_is_deployed(stack: Stack) -> None:
    stack.retained_highs = simulate_retention(stack.bootstrap, stack.topics["kafka.orders_topic"])

    run = stack.replay("green-lossy", replay_source="kafka_earliest")

    assert run.state == FAILED
    states = task_states(run)
    assert states["validate_request"] == FAILED
    assert states["deploy_green"] == "upstream_failed"
    assert stack.registry.find("green-lossy") is None
    assert resolve_live_deployment(stack.lake) == BLUE


def test_an_approved_replay_from_bronze_after_retention_is_promoted(
    stack: Stack, airflow_api: TestClient, approver_auth: dict[str, str]
) -> None:
    # Newer orders arrive after retention cut the topic: green must read history from blue's bronze
    # archive, then exactly these from Kafka.
    newer = list(
        generate_orders(
            GeneratorSettings(
                orders=60, stores=3, start=datetime(2026, 11, 22, 10, 0), span_seconds=60, first_order_id=5001
            )
        )
    )
    produce(stack.bootstrap, stack.topics["kafka.orders_topic"], newer)

    assert stack.registry.get(BLUE).observed_state == "stopped", "blue's archive ends where it was retired"
    with Approver(airflow_api, approver_auth) as approver:
        run = stack.replay("green-bronze", replay_source="bronze", require_approval=True)

    assert run.state == SUCCESS, task_states(run)
    assert [status for status, _ in approver.responses] == [200], approver.responses
    assert task_states(run)["request_approval"] == SUCCESS
    green = stack.registry.get("green-bronze")
    history = green.config["history"]
    assert history["bronze_table"].endswith("/bronze/orders_raw/blue")
    # Kafka is read from where blue's archive ends; a partition it holds nothing of, from earliest (-2).
    cut_over = {p: high if high else -2 for p, high in stack.retained_highs.items()}
    assert {int(p): o for p, o in history["kafka_offsets"].items()} == cut_over
    # Every order exactly once: the archived history and the newer records from Kafka.
    wait_for_gold(stack.registry, "green-bronze", stack.records + newer, timeout_s=0)
    assert resolve_live_deployment(stack.lake) == "green-bronze"
    [promoted] = [e for e in stack.registry.events("green-bronze") if e.kind == "replay_promoted"]
    assert promoted.details["approved_by"]["name"] == LOCAL_APPROVER_USER
    assert promoted.details["require_approval"] is True
    # The history green read from blue's archive was copied into its own table in the bucket too.
    history_copy = green.app_config().names.replay_history_table
    assert (in_the_bucket(stack.store, history_copy) / "_delta_log").is_dir()
    assert_nothing_of_the_lake_on_local_disk(stack)
