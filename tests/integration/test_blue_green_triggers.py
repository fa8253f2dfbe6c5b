"""blue_green_replay started by its schedule and by a release, and the overlap rule.

Real Airflow on the session's metadata DB, the session's Kafka broker and real spark-submit drivers.
dag.test() always creates a *manual* run, so the runs a schedule creates are made the way Airflow
makes them and then executed by dag.test()'s own loop (see `execute`): the cron tick's run with the
DAG's `create_dagrun(run_type=SCHEDULED)`, as the scheduler's `_create_dag_runs` does; the release's
run by the scheduler's own `_create_dag_runs_asset_triggered`, from the asset event that
publish_app_version emitted. The module deploys its own blue (its own topics and lake), then:
a periodic rebuild reproduces live and is retired with live untouched; a release starts a replay
that reaches the approval gate, a second replay triggered meanwhile (`airflow dags test`, its own
process) is skipped with its reason, and the release's replay is rejected, which stops its green.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from revenue_platform import processes
from revenue_platform.orders_generator import GeneratorSettings, generate_orders, generate_stores, produce
from revenue_platform.registry import DeploymentRegistry, resolve_live_deployment
from tests.kafka_helpers import unique_suffix
from tests.streaming_helpers import (
    DEPLOY_DEFAULTS,
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

BLUE = "blue"
DAG_ID = "blue_green_replay"


class Stack:
    def __init__(self, lake: str, bootstrap: str, records: list[Any]) -> None:
        self.lake, self.bootstrap, self.records = lake, bootstrap, records
        self.registry = DeploymentRegistry(lake)


@pytest.fixture(scope="module")
def stack(airflow_db: Any, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    lake = str(tmp_path_factory.mktemp("bluegreen-triggers") / "lake")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLATFORM_LAKE_ROOT", lake)
        topics = topic_overrides(kafka_bootstrap, unique_suffix())
        records = list(generate_orders(GeneratorSettings(orders=120, stores=3, span_seconds=90)))
        produce(kafka_bootstrap, topics["kafka.stores_topic"], generate_stores(3))
        produce(kafka_bootstrap, topics["kafka.orders_topic"], records)
        built = Stack(lake, kafka_bootstrap, records)
        try:
            run = load_dags("deploy_streaming_app")["deploy_streaming_app"].test(
                run_conf={**DEPLOY_DEFAULTS, "deployment_id": BLUE, "config_overrides": topics}
            )
            assert run.state == "success", task_states(run)
            wait_for_gold(built.registry, BLUE, records)
            built.registry.switch_live(BLUE, "test-setup", "initial live deployment")
            yield built
        finally:
            for pid in spark_drivers(lake):
                processes.terminate(pid, 5.0)


@contextmanager
def runs_created_by_airflow(make_run: Callable[[Any, Any], Any]) -> Generator[None, None, None]:
    """While active, dag.test() in THIS thread executes the run `make_run(dag, session)` returns
    (started as the scheduler starts a queued run) instead of creating a manual one. Other threads'
    dag.test() calls are untouched."""
    import airflow.models.dagrun as dagrun_module
    from airflow.utils.state import DagRunState

    original = dagrun_module.get_or_create_dagrun
    owner = threading.get_ident()

    def existing_run(**kwargs: Any) -> Any:
        if threading.get_ident() != owner:
            return original(**kwargs)
        session = kwargs["session"]
        run = make_run(kwargs["dag"], session)
        run.dag = kwargs["dag"]
        run.state, run.start_date = DagRunState.RUNNING, datetime.now(UTC)
        session.commit()
        return run

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dagrun_module, "get_or_create_dagrun", existing_run)
        yield


def cron_tick_run(dag: Any, session: Any) -> Any:
    """The run a due cron tick gets (what SchedulerJobRunner._create_dag_runs asks create_dagrun for)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.types import DagRunTriggeredByType, DagRunType

    tick = datetime.now(UTC).replace(second=0, microsecond=0)
    return dag.create_dagrun(
        run_id=DagRun.generate_run_id(run_type=DagRunType.SCHEDULED, logical_date=tick, run_after=tick),
        logical_date=tick,
        data_interval=(tick, tick),
        run_after=tick,
        run_type=DagRunType.SCHEDULED,
        triggered_by=DagRunTriggeredByType.TIMETABLE,
        state="queued",
        session=session,
    )


def release_run(dag: Any, session: Any) -> Any:
    """The scheduler's own step that turns queued asset events into a run (no conf, consumed events)."""
    from airflow.jobs.job import Job
    from airflow.jobs.scheduler_job_runner import SchedulerJobRunner
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from sqlalchemy import select

    query, triggered_by_assets = DagModel.dags_needing_dagruns(session)
    due = [model for model in query.all() if model.dag_id == dag.dag_id]
    assert due, "the release's asset event did not make blue_green_replay due"
    assert dag.dag_id in triggered_by_assets
    SchedulerJobRunner(job=Job())._create_dag_runs_asset_triggered(dag_models=due, session=session)
    run = session.scalars(
        select(DagRun).where(DagRun.dag_id == dag.dag_id).order_by(DagRun.id.desc()).limit(1)
    ).one()
    assert run.run_type == "asset_triggered"
    return run


def assert_stopped(stack: Stack, deployment_id: str) -> None:
    record = stack.registry.get(deployment_id)
    assert (record.desired_state, record.observed_state) == ("stopped", "stopped")
    marker = f"/streaming_apps/{deployment_id}/config-"
    assert all(marker not in processes.cmdline(pid) for pid in spark_drivers(stack.lake))


def test_a_periodic_run_with_a_zero_diff_is_recorded_reproduced_and_leaves_live_untouched(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", stack.lake)
    monkeypatch.setenv("REPLAY_SCHEDULE", "0 3 * * *")  # parsed (and synced) with the cron timetable
    dag = load_dags(DAG_ID)[DAG_ID]

    with runs_created_by_airflow(cron_tick_run):
        run = dag.test()

    assert (run.run_type, run.state) == ("scheduled", "success"), task_states(run)
    states = task_states(run)
    assert states["record_reproduced"] == "success"
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
    assert_stopped(stack, green)
    kinds = [e.kind for e in stack.registry.events(green)]
    assert kinds.index("replay_diff_passed") < kinds.index("replay_reproduced")
    assert "live_switched" not in kinds
    assert "replay_aborted" not in kinds
    [reproduced] = [e for e in stack.registry.events(green) if e.kind == "replay_reproduced"]
    assert reproduced.details["diff"]["passed"] is True
    assert reproduced.details["diff"]["windows_compared"] > 0
    assert reproduced.details["live"] == BLUE


class SecondTriggerThenReject:
    """Once the release's replay waits at request_approval: a person triggers a second replay with
    `airflow dags test` (its own process: Airflow runs tasks in a process's main thread only), then the
    first one is rejected through the HITL REST API."""

    def __init__(self, api: TestClient, headers: dict[str, str], lake: str, outsider: dict[str, str]) -> None:
        # headers: the approver's; outsider: a user outside the approver group, who tries first.
        self.api, self.headers, self.lake, self.outsider = api, headers, lake, outsider
        self.outsider_response: tuple[int, str] | None = None
        self.second: subprocess.CompletedProcess[str] | None = None
        self.responses: list[tuple[int, Any]] = []
        self.prompt: dict[str, Any] = {}
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _waiting_run(self) -> str | None:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState
        from sqlalchemy import select

        with create_session() as session:
            return session.scalars(
                select(TaskInstance.run_id).where(
                    TaskInstance.dag_id == DAG_ID,
                    TaskInstance.task_id == "request_approval",
                    TaskInstance.state == TaskInstanceState.AWAITING_INPUT,
                )
            ).first()

    def _watch(self) -> None:
        try:
            run_id = None
            for _ in range(600):
                run_id = self._waiting_run()
                if run_id:
                    break
                time.sleep(1.0)
            if run_id is None:
                return
            conf = {"green_deployment_id": "green-overlap", "mode": "promote"}
            self.second = subprocess.run(
                [sys.executable, "-m", "airflow", "dags", "test", DAG_ID, "--conf", json.dumps(conf)],
                env={**os.environ, "PLATFORM_LAKE_ROOT": self.lake},
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
        response = self.api.patch(
            path, headers=self.headers, json={"chosen_options": ["Reject"], "params_input": {}}
        )
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
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", stack.lake)
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
    assert published.state == "success", task_states(published)
    release = stack.registry.get_release("2.0.0")

    watcher = SecondTriggerThenReject(airflow_api, approver_auth, stack.lake, outsider=auth)
    watcher.thread.start()
    with runs_created_by_airflow(release_run):
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
        "success",
        "failed",
        "upstream_failed",
    )
    assert run.state == "failed"
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
    assert_stopped(stack, green)
    # The second trigger, while the first waited for approval: skipped before touching anything.
    assert watcher.second is not None
    log = watcher.second.stdout + watcher.second.stderr
    assert watcher.second.returncode == 0, log[-3000:]
    second = latest_manual_run()
    assert second.state == "success"
    assert set(task_states(second).values()) == {"skipped"}
    assert stack.registry.find("green-overlap") is None
    assert "1 other blue_green_replay run(s) are waiting for approval at request_approval" in log
    assert f"replay of {green}" in log


def latest_manual_run() -> Any:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        run = session.scalars(
            select(DagRun)
            .where(DagRun.dag_id == DAG_ID, DagRun.run_type == "manual")
            .order_by(DagRun.id.desc())
            .limit(1)
        ).one()
        session.expunge(run)
        return run
