"""deploy_streaming_app, supervise_streaming_apps and stop_streaming_app end to end.

Real Airflow task instances (`dag.test`), the session's real Kafka broker, and the real
streaming app launched by the DAGs as a detached spark-submit (spark_default = local[2]
in the test environment). Expected revenue comes from the generator's Decimal oracle;
processes are checked in /proc, registry state with the `deltalake` package.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from revenue_platform import processes
from revenue_platform.orders_generator import (
    GeneratorSettings,
    generate_orders,
    generate_stores,
    produce,
)
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry
from revenue_platform.reprocessing import windows_closed
from revenue_platform.streaming.finality import app_watermark
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, local_path
from tests.kafka_helpers import unique_suffix
from tests.streaming_helpers import (
    DEPLOY_DEFAULTS,
    load_dags,
    spark_drivers,
    supervise,
    task_states,
    topic_overrides,
    wait_for_gold,
    wait_for_published_lag,
    xcom,
)

pytestmark = pytest.mark.integration

SUCCESS = "success"
FAILED = "failed"


@pytest.fixture(scope="module")
def dags(airflow_db: Any) -> dict[str, Any]:
    return load_dags("deploy_streaming_app", "supervise_streaming_apps", "stop_streaming_app")


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A registry/lake root of this test; every driver it registered is killed afterwards."""
    root = str(tmp_path / "lake")
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", root)
    yield root
    for pid in spark_drivers(root):
        processes.terminate(pid, 5.0)


def deploy(dags: dict[str, Any], deployment_id: str, overrides: dict[str, Any], **params: Any) -> Any:
    conf = {**DEPLOY_DEFAULTS, "deployment_id": deployment_id, "config_overrides": overrides, **params}
    return dags["deploy_streaming_app"].test(run_conf=conf)


def wait_for_caught_up(record: DeploymentRecord, after: datetime, timeout_s: float = 150) -> datetime:
    """The first `caught_up_at` later than `after` that the deployment's revenue progress publishes
    (once both queries are idle)."""
    progress_file = local_path(record.app_config().names.progress_file(REVENUE_QUERY_ROLE))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            published = json.loads(progress_file.read_text()).get("caught_up_at")
        except (OSError, ValueError):
            published = None
        if published and datetime.fromisoformat(published) > after:
            return datetime.fromisoformat(published)
        time.sleep(0.5)
    raise AssertionError(f"{progress_file} published no caught_up_at after {after} in {timeout_s} s")


def reprocess_plan(record: DeploymentRecord, caught_up: datetime) -> dict[str, Any]:
    """The sensor's view of a reprocessing run over the hour ending one watermark delay before `caught_up`."""
    from spark_apps.contract.config_rules import interval_seconds

    watermark = record.app_config().window.watermark
    end = caught_up - timedelta(seconds=interval_seconds(watermark))
    return {
        "deployment_id": record.deployment_id,
        "range_start": (end - timedelta(hours=1)).isoformat(),
        "range_end": end.isoformat(),
        "progress_file": str(local_path(record.app_config().names.progress_file(REVENUE_QUERY_ROLE))),
        "watermark": watermark,
    }


def wait_until_gone(pid: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while processes.is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not processes.is_alive(pid), f"process {pid} still alive"


def test_deploy_supervise_redeploy_and_stop_keep_gold_exact_with_one_driver(
    dags: dict[str, Any], kafka_bootstrap: str, lake: str, capfd: pytest.CaptureFixture[str]
) -> None:
    suffix = unique_suffix()
    deployment_id = f"it{suffix}"
    overrides = topic_overrides(kafka_bootstrap, suffix)
    registry = DeploymentRegistry(lake)
    first = list(
        generate_orders(
            GeneratorSettings(orders=200, stores=3, span_seconds=60, duplicate_every=20, bad_every=50)
        )
    )
    produce(kafka_bootstrap, overrides["kafka.stores_topic"], generate_stores(3))
    produce(kafka_bootstrap, overrides["kafka.orders_topic"], first)
    first_produced_at = datetime.now(UTC)

    # 1. deploy: a detached driver that outlives the task, registered with a lease, producing exact gold.
    run = deploy(dags, deployment_id, overrides)
    assert run.state == SUCCESS, task_states(run)
    outcome = xcom(run, "deploy")
    assert outcome["action"] == "launched"
    record = registry.get(deployment_id)
    assert (record.desired_state, record.observed_state, record.colour) == ("running", "running", "other")
    assert record.lease_token
    assert record.lease_token == outcome["lease_token"]
    assert spark_drivers(lake) == [record.driver_pid]
    # With nothing more to read, both queries go idle and the app says when it had read all of Kafka:
    # by then every order produced before is in gold (checked at once, no waiting).
    caught_up = wait_for_caught_up(record, after=first_produced_at)
    wait_for_gold(registry, deployment_id, first, timeout_s=0)
    assert wait_for_published_lag(registry, deployment_id) == 0

    # 1b. The hour of such a quiet stream counts as closed, though the watermark stands still.
    plan = reprocess_plan(record, caught_up)
    watermark = app_watermark(plan["progress_file"])
    assert watermark is not None
    assert watermark < datetime.fromisoformat(plan["range_end"])
    assert windows_closed(plan)
    assert not windows_closed({**plan, "range_end": caught_up.isoformat()})

    # 2. a healthy pass of the supervisor reports lag and rates and restarts nothing.
    run = supervise(dags, deployment_id)
    assert run.state == SUCCESS, task_states(run)
    [entry] = xcom(run, "supervise")["deployments"]
    assert entry["action"] == "healthy"
    assert entry["restarts_in_window"] == 0
    assert entry["offsets_behind_latest"] == 0
    assert entry["last_batch_at"] is not None

    # 3. deploying the running deployment again is a no-op: same driver, same lease, one process.
    run = deploy(dags, deployment_id, overrides)
    assert run.state == SUCCESS, task_states(run)
    assert xcom(run, "deploy")["action"] == "already_running"
    assert registry.get(deployment_id).lease_token == record.lease_token
    assert spark_drivers(lake) == [record.driver_pid]

    # 3b. deploying it with another config fails, says how to roll it out, and changes nothing.
    events_before = len(registry.events(deployment_id))
    capfd.readouterr()
    run = deploy(dags, deployment_id, {**overrides, "trigger.interval": "3 seconds"})
    assert run.state == FAILED, task_states(run)
    assert "roll the new config out with the blue_green_replay DAG" in "".join(capfd.readouterr())
    assert task_states(run) == {"validate_request": SUCCESS, "deploy": FAILED}
    unchanged = registry.get(deployment_id)
    assert (unchanged.lease_token, unchanged.config_hash) == (record.lease_token, record.config_hash)
    assert len(registry.events(deployment_id)) == events_before
    assert spark_drivers(lake) == [record.driver_pid]

    # 4. the driver dies hard; orders keep coming; the supervisor restarts it from its checkpoint.
    os.killpg(os.getpgid(record.driver_pid), signal.SIGKILL)
    wait_until_gone(record.driver_pid)
    second = list(
        generate_orders(
            GeneratorSettings(
                orders=150,
                stores=3,
                start=GeneratorSettings().start + timedelta(seconds=60),
                span_seconds=45,
                seed=9,
                first_order_id=100_000,
                duplicate_every=15,
            )
        )
    )
    produce(kafka_bootstrap, overrides["kafka.orders_topic"], second)
    second_produced_at = datetime.now(UTC)
    run = supervise(dags, deployment_id)
    assert run.state == SUCCESS, task_states(run)
    [entry] = xcom(run, "supervise")["deployments"]
    assert entry["action"] == "restart", entry
    assert entry["start_error"] is None, entry["start_error"]
    restarted = registry.get(deployment_id)
    assert restarted.observed_state == "running"
    assert restarted.lease_token != record.lease_token
    assert restarted.lease_epoch == record.lease_epoch + 1
    assert len(restarted.restart_history) == 1
    assert spark_drivers(lake) == [restarted.driver_pid]
    # The restarted app's listener starts afresh; its caught_up_at still means everything is in gold.
    wait_for_caught_up(restarted, after=second_produced_at, timeout_s=150)
    wait_for_gold(registry, deployment_id, first + second, timeout_s=0)

    # 5. stop: graceful, the process group is gone, the registry says stopped and audits it.
    run = dags["stop_streaming_app"].test(run_conf={"deployment_id": deployment_id, "timeout_s": 60})
    assert run.state == SUCCESS, task_states(run)
    assert xcom(run, "stop")["how"] == "graceful"
    wait_until_gone(restarted.driver_pid, 5)
    assert spark_drivers(lake) == []
    stopped = registry.get(deployment_id)
    assert (stopped.desired_state, stopped.observed_state, stopped.lease_token) == (
        "stopped",
        "stopped",
        None,
    )
    kinds = [event.kind for event in registry.events(deployment_id)]
    for kind in ("registered", "lease_acquired", "launched", "started", "dead", "restart", "stopped"):
        assert kind in kinds, kinds
    wait_for_gold(registry, deployment_id, first + second, timeout_s=0)

    # 6. a stopped deployment is left alone by the supervisor.
    run = supervise(dags, deployment_id)
    assert run.state == SUCCESS, task_states(run)
    assert xcom(run, "supervise")["deployments"] == []
    assert spark_drivers(lake) == []


def test_an_app_that_fails_at_start_is_reported_failed_and_not_restarted_forever(
    dags: dict[str, Any], kafka_bootstrap: str, lake: str
) -> None:
    suffix = unique_suffix()
    deployment_id = f"bad{suffix}"
    # A valid start (epoch ms, year 2100) that no record of the empty topic reaches: Spark's Kafka
    # source refuses it when the first batch asks for its offsets, so only the app can detect it.
    overrides = topic_overrides(kafka_bootstrap, suffix)
    registry = DeploymentRegistry(lake)

    run = deploy(dags, deployment_id, overrides, starting_offsets="4102444800000")

    assert run.state == FAILED
    assert task_states(run) == {"validate_request": SUCCESS, "deploy": FAILED}
    record = registry.get(deployment_id)
    assert record.observed_state == "failed"
    assert "No offset matched" in (record.last_error or ""), record.last_error
    assert spark_drivers(lake) == []

    # Budget of one restart: the first pass tries once more, the second gives up loudly.
    run = supervise(dags, deployment_id, max_restarts=1)
    assert run.state == SUCCESS, task_states(run)
    [entry] = xcom(run, "supervise")["deployments"]
    assert entry["action"] == "restart"
    assert "No offset matched" in entry["start_error"]

    run = supervise(dags, deployment_id, max_restarts=1)
    assert run.state == FAILED
    gave_up = registry.get(deployment_id)
    assert gave_up.observed_state == "failed"
    assert gave_up.restart_history[-1]["outcome"] == "gave_up"
    assert "No offset matched" in (gave_up.last_error or "")

    launches = sum(1 for event in registry.events(deployment_id) if event.kind == "launched")
    run = supervise(dags, deployment_id, max_restarts=1)
    assert run.state == SUCCESS, task_states(run)
    assert xcom(run, "supervise")["deployments"][0]["action"] == "gave_up"
    assert sum(1 for event in registry.events(deployment_id) if event.kind == "launched") == launches == 2
    assert spark_drivers(lake) == []


def test_a_pass_that_dies_is_retried_once_but_giving_up_or_a_bad_form_is_not(dags: dict[str, Any]) -> None:
    import httpx
    from airflow.sdk import RetryAction

    from revenue_platform.errors import ConfigError
    from revenue_platform.streaming.supervisor import GaveUpError

    [task] = dags["supervise_streaming_apps"].tasks
    assert task.retries == 1
    assert task.retry_delay == timedelta(seconds=10), "well inside the one-minute cadence"
    for final in (GaveUpError("gave up on: x"), ConfigError("max_restarts: too large")):
        assert task.retry_policy.evaluate(final, 1, 2).action == RetryAction.FAIL, final
    # What killed a pass on a freshly started stack: the worker's call to Airflow's API timed out.
    assert task.retry_policy.evaluate(httpx.ReadTimeout("timed out"), 1, 2).action == RetryAction.DEFAULT


def test_a_driver_that_refuses_to_start_is_not_restarted_and_its_message_fails_the_pass(
    dags: dict[str, Any], kafka_bootstrap: str, lake: str, capfd: pytest.CaptureFixture[str]
) -> None:
    registry = DeploymentRegistry(lake)
    suffix = unique_suffix()
    deployment_id = f"moved{suffix}"
    run = deploy(dags, deployment_id, topic_overrides(kafka_bootstrap, suffix))
    assert run.state == SUCCESS, task_states(run)
    record = registry.get(deployment_id)
    record_path = local_path(record.app_config().names.kafka_cluster_record)
    recorded = json.loads(record_path.read_text())

    # The driver dies, and its brokers now belong to another cluster than its checkpoints' (as after
    # `make down` and a kafka_default pointed at other brokers): every restart would be refused.
    os.killpg(os.getpgid(record.driver_pid), signal.SIGKILL)
    wait_until_gone(record.driver_pid)
    record_path.write_text(json.dumps({**recorded, "kafka_cluster_id": "the-one-broker-stack"}))
    capfd.readouterr()
    run = supervise(dags, deployment_id)

    # One restart, refused: the pass fails at once with the driver's own message, which names the way
    # out, instead of restarting until the budget is spent.
    assert run.state == FAILED, task_states(run)
    failure = "".join(capfd.readouterr())
    assert f"deployment {deployment_id!r} may not start" in failure
    assert "blue-green replay into a new deployment" in failure
    assert "restart budget" not in failure
    refused = registry.get(deployment_id)
    assert refused.observed_state == "failed"
    assert [entry["outcome"] for entry in refused.restart_history] == ["launched", "refused"]
    [event] = [event for event in registry.events(deployment_id) if event.kind == "refused"]
    assert "'the-one-broker-stack'" in event.details["error"]
    assert spark_drivers(lake) == []

    # Later passes leave it alone: no launch, no failure, until it is deployed anew.
    launches = sum(1 for event in registry.events(deployment_id) if event.kind == "launched")
    run = supervise(dags, deployment_id)
    assert run.state == SUCCESS, task_states(run)
    assert xcom(run, "supervise")["deployments"][0]["action"] == "refused"
    assert sum(1 for event in registry.events(deployment_id) if event.kind == "launched") == launches == 2
