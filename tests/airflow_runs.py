"""Runs made the way Airflow's scheduler makes them, executed by `dag.test()`.

dag.test() always creates a *manual* run. To test what a schedule or an asset event starts, the run
is created as the scheduler creates it and dag.test()'s own loop then executes it
(`runs_created_by_airflow`): the cron tick's run with the DAG's `create_dagrun(run_type=SCHEDULED)`,
as `SchedulerJobRunner._create_dag_runs` does (`cron_tick_run`); an asset-triggered run by the
scheduler's own `_create_dag_runs_asset_triggered`, from the queued asset events (`asset_triggered_run`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest


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


def asset_triggered_run(dag: Any, session: Any) -> Any:
    """The scheduler's own step that turns queued asset events into a run (no conf, consumed events)."""
    from airflow.jobs.job import Job
    from airflow.jobs.scheduler_job_runner import SchedulerJobRunner
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from sqlalchemy import select

    query, triggered_by_assets = DagModel.dags_needing_dagruns(session)
    due = [model for model in query.all() if model.dag_id == dag.dag_id]
    assert due, f"no queued asset event made {dag.dag_id} due"
    assert dag.dag_id in triggered_by_assets
    SchedulerJobRunner(job=Job())._create_dag_runs_asset_triggered(dag_models=due, session=session)
    run = session.scalars(
        select(DagRun).where(DagRun.dag_id == dag.dag_id).order_by(DagRun.id.desc()).limit(1)
    ).one()
    assert run.run_type == "asset_triggered"
    return run


def latest_manual_run(dag_id: str) -> Any:
    """The newest manual run of `dag_id` in the metadata DB, detached from its session."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        run = session.scalars(
            select(DagRun)
            .where(DagRun.dag_id == dag_id, DagRun.run_type == "manual")
            .order_by(DagRun.id.desc())
            .limit(1)
        ).one()
        session.expunge(run)
        return run
