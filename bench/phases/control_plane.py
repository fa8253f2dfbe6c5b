"""Bench phases of the control plane's own work, each in a process of its own as Airflow runs it: the
Great Expectations suite on the replayed hour, and the parse of every DAG file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from typing import Any

from bench.run import BenchRun
from bench.services import bench_airflow_settings
from revenue_platform.orders_generator import GeneratorSettings

QUALITY_SCRIPT = """
import json, sys, time
from datetime import datetime
from revenue_platform.quality.runner import run_revenue_checks
began = time.monotonic()
try:
    report = run_revenue_checks(sys.argv[1], sys.argv[2], datetime.fromisoformat(sys.argv[3]),
                                datetime.fromisoformat(sys.argv[4]), raise_on_failure=False)
    record = {"success": report.success, "failed_checks": sorted(report.failed_checks),
              "checks": len(report.outcomes), "stats": report.stats}
except Exception as error:  # a failing check suite is a result here, not a crash
    record = {"error": f"{type(error).__name__}: {error}"}
record["run_s"] = time.monotonic() - began
print(json.dumps(record, default=str))
"""


def phase_quality(run: BenchRun, settings: GeneratorSettings) -> None:
    """The Great Expectations suite on the replayed hour, in a process of its own as an Airflow task
    runs it: its memory is sampled while it runs and returned when it ends (run in the bench's own
    process, its pandas frames left ~1.7 GiB behind for the live phases)."""
    with run.phase("quality") as record:
        record.update(
            run_quality_process(run, "bench-replay", settings.start, settings.start + timedelta(hours=1))
        )


def run_quality_process(run: BenchRun, deployment: str, start: datetime, end: datetime) -> dict[str, Any]:
    """The quality suite on [start, end) of `deployment` in a process of its own, its memory sampled
    under the `quality` group: its outcome and seconds, or its error."""
    from revenue_platform.paths import PROJECT_PYTHONPATH

    process = subprocess.Popen(
        [sys.executable, "-c", QUALITY_SCRIPT, deployment, run.lake_root, start.isoformat(), end.isoformat()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": PROJECT_PYTHONPATH},
    )
    run.sampler.watch("quality", process.pid)
    try:
        out, err = process.communicate(timeout=1800)
    finally:
        run.sampler.watch("quality", None)
    lines = out.decode().strip().splitlines()
    if process.returncode == 0 and lines:
        return dict(json.loads(lines[-1]))
    return {"error": err.decode()[-2000:]}


DAG_PARSE_SCRIPT = """
import json, sys, time
from pathlib import Path
started = time.perf_counter()
import airflow  # noqa: F401
from airflow.dag_processing.dagbag import DagBag
imported = time.perf_counter() - started
files = {}
for path in sorted(Path(sys.argv[1]).glob("*.py")):
    began = time.perf_counter()
    bag = DagBag(dag_folder=str(path))
    files[path.name] = {"parse_s": time.perf_counter() - began, "dags": len(bag.dags),
                        "errors": len(bag.import_errors)}
print(json.dumps({"airflow_import_s": imported, "files": files}))
"""


def phase_dag_parse(run: BenchRun) -> None:
    from revenue_platform.local_stack.airflow_local import airflow_environment
    from revenue_platform.paths import DAGS_DIR

    with run.phase("dag_parse") as record:
        settings = bench_airflow_settings(run)
        settings.home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **airflow_environment(settings)}
        process = subprocess.Popen(
            [sys.executable, "-c", DAG_PARSE_SCRIPT, str(DAGS_DIR)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        run.sampler.watch("dag_parse", process.pid)
        out, err = process.communicate(timeout=600)
        run.sampler.watch("dag_parse", None)
        if process.returncode == 0:
            record.update(json.loads(out.decode().strip().splitlines()[-1]))
        else:
            record["error"] = err.decode()[-2000:]
