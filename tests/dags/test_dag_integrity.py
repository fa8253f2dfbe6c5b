"""Integrity of every DAG in dags/: it imports, follows house rules, and is cheap to parse.

Parsing runs in a fresh interpreter where metadata-DB, Variable, Connection and network
access raise, so a DAG that touches any of them at parse time fails here with the reason,
and the heavy libraries a DAG file loaded at module level are reported by name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from functools import cache
from typing import Any

import pytest

from revenue_platform.paths import DAGS_DIR

HEAVY_MODULES = ("pyspark", "great_expectations", "deltalake", "confluent_kafka", "pandas")
EXPECTED_DAG_IDS = {
    "provision_topics",
    "revenue_quality_checks",
    "deploy_streaming_app",
    "supervise_streaming_apps",
    "stop_streaming_app",
    "reprocess_revenue",
    "blue_green_replay",
    "maintain_lake",
    "rollback_live_deployment",
    "publish_app_version",
}

_PARSE_SCRIPT = textwrap.dedent(
    """
    import json, socket, sys

    def forbidden(what):
        def refuse(*args, **kwargs):
            raise RuntimeError(f"{what} at DAG parse time")
        return refuse

    socket.socket.connect = forbidden("network access")
    socket.create_connection = forbidden("network access")
    heavy = __HEAVY__
    preloaded = {name for name in heavy if name in sys.modules}

    import airflow  # creates (but does not connect) the metadata engine
    from sqlalchemy.engine import Engine
    Engine.connect = forbidden("metadata DB access")
    Engine.raw_connection = forbidden("metadata DB access")
    from airflow.sdk import Connection, Variable
    Variable.get = forbidden("Variable.get")
    Connection.get = forbidden("Connection.get")
    from airflow.hooks.base import BaseHook
    BaseHook.get_connection = forbidden("BaseHook.get_connection")

    from airflow.dag_processing.dagbag import DagBag
    before = set(sys.modules)
    bag = DagBag(dag_folder=__DAGS__)
    loaded = sorted({m.split(".")[0] for m in set(sys.modules) - before} & set(heavy))
    dags = {
        dag_id: {
            "owner": dag.default_args.get("owner"),
            "retries": dag.default_args.get("retries"),
            "tags": sorted(dag.tags or []),
            "doc_md": bool(dag.doc_md),
            "task_owners": sorted({task.owner for task in dag.tasks}),
            # Tasks whose final failure alerts nobody (see revenue_platform.airflow.notify), with their
            # trigger rule.
            "tasks_without_failure_alert": {
                task.task_id: str(getattr(task.trigger_rule, "value", task.trigger_rule))
                for task in dag.tasks
                if not any(
                    type(callback).__name__ == "TaskFailureNotifier"
                    for callback in (task.on_failure_callback or [])
                )
            },
            "task_concurrency": {
                task.task_id: task.max_active_tis_per_dag
                for task in dag.tasks
                if task.max_active_tis_per_dag is not None
            },
            # What the trigger form renders: each param's description and JSON schema.
            "params": {
                name: {"description": param.description, "schema": param.schema}
                for name, param in dag.params.items()
            },
        }
        for dag_id, dag in bag.dags.items()
    }
    print(json.dumps({"errors": bag.import_errors, "dags": dags, "heavy_loaded": loaded}, default=str))
    """
)


@cache
def parse_dag_folder() -> dict[str, Any]:
    """Parse dags/ in a guarded subprocess; return import errors, DAG attributes and heavy modules."""
    script = _PARSE_SCRIPT.replace("__HEAVY__", repr(HEAVY_MODULES)).replace("__DAGS__", repr(str(DAGS_DIR)))
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, env=dict(os.environ)
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_every_dag_file_imports_without_errors() -> None:
    errors = parse_dag_folder()["errors"]
    assert errors == {}, "\n\n".join(f"{path}:\n{message}" for path, message in errors.items())


def test_the_user_facing_dag_ids_exist() -> None:
    assert set(parse_dag_folder()["dags"]) >= EXPECTED_DAG_IDS


def test_no_heavy_library_is_imported_at_parse_time() -> None:
    assert parse_dag_folder()["heavy_loaded"] == []


@pytest.mark.parametrize("dag_id", sorted(EXPECTED_DAG_IDS))
def test_dag_sets_owner_retries_tags_and_docs(dag_id: str) -> None:
    dag = parse_dag_folder()["dags"][dag_id]
    assert dag["owner"] not in (None, "", "airflow"), "set default_args owner to the owning team"
    assert dag["retries"] is not None, "set default_args retries explicitly"
    assert dag["tags"], "tag the DAG so it can be found in the UI"
    assert dag["doc_md"], "use the module docstring as doc_md"


@pytest.mark.parametrize("dag_id", sorted(EXPECTED_DAG_IDS))
def test_every_failure_alerts_once_from_the_task_that_failed(dag_id: str) -> None:
    # Only a failure watcher may stay quiet: it runs only after another task failed (one_failed), and
    # that task's alert already names it and its error. Any other task's failure must reach a person.
    quiet = parse_dag_folder()["dags"][dag_id]["tasks_without_failure_alert"]
    missing = sorted(task for task, trigger_rule in quiet.items() if trigger_rule != "one_failed")
    assert missing == [], (
        f"use platform_default_args (its on_failure_callback alerts); only a FailureWatcherOperator "
        f"(trigger rule one_failed) may go without: {missing}"
    )


@pytest.mark.parametrize("dag_id", sorted(EXPECTED_DAG_IDS))
def test_every_trigger_form_field_explains_itself(dag_id: str) -> None:
    params = parse_dag_folder()["dags"][dag_id]["params"]
    undocumented = sorted(name for name, param in params.items() if not (param["description"] or "").strip())
    assert undocumented == [], f"give these params a description (the form shows it): {undocumented}"


@pytest.mark.parametrize("dag_id", sorted(EXPECTED_DAG_IDS))
def test_no_select_in_a_trigger_form_shows_null(dag_id: str) -> None:
    # Airflow's form labels an enum's None option "null" unless values_display names it ("null" key).
    for name, param in parse_dag_folder()["dags"][dag_id]["params"].items():
        schema = param["schema"]
        if None in (schema.get("enum") or []):
            labels = schema.get("values_display") or {}
            assert labels.get("null"), f"{name}: label the empty choice with values_display={{'null': ...}}"
            missing = [v for v in schema["enum"] if v is not None and str(v) not in labels]
            assert missing == [], f"{name}: values_display must label every choice (else 'None' is used)"


def test_backfills_of_reprocessing_run_at_most_two_spark_jobs_at_once() -> None:
    # A backfill's runs use the backfill's max_active_runs (Airflow 3 default 10), not the DAG's;
    # the task-level limit holds for every run, so a 2-core machine never runs 10 spark-submits.
    limits = parse_dag_folder()["dags"]["reprocess_revenue"]["task_concurrency"]
    assert limits == {"submit_reprocess_job": 2}
