"""`execute`: one benchmark run against its own broker and lake (never the demo's or the tests'; a lake
on an object store is in an S3 server of its own). It starts the services, runs the selected phases
(bench/phases/) in order, and stops the broker, Airflow, the store and any Spark driver even when a
phase fails; one failed phase is reported and the others still run."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bench.phases.control_plane import phase_dag_parse, phase_quality
from bench.phases.history import phase_history, phase_restart, phase_window_heavy
from bench.phases.live import phase_live
from bench.phases.month_two import phase_month_two
from bench.phases.replay import (
    phase_ceiling,
    phase_generate,
    phase_replay,
    phase_reprocess,
    phase_work_ceiling,
)
from bench.phases.soak_live import phase_soak_live
from bench.run import (
    OBJECT_STORE_LAKE,
    BenchRun,
    BenchSettings,
    replay_hour_start,
    selected,
    settings_json,
)
from bench.services import (
    bench_airflow_settings,
    create_run_topics,
    start_airflow,
    start_broker,
    start_object_store,
)
from bench.spark_app import stop_every_driver
from revenue_platform.local_stack.kafka_broker import LocalKafkaBroker


def execute(settings: BenchSettings, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every phase; the broker and any Spark driver are stopped even when a phase fails."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run = BenchRun(settings, stamp, log=log)
    run.work_dir.mkdir(parents=True, exist_ok=True)
    run.results.update({"stamp": stamp, "label": settings.label, "settings": settings_json(settings)})
    run.sampler.start()
    broker: LocalKafkaBroker | None = None
    airflow: Any = None
    object_store: Any = None
    start = replay_hour_start(time.time())
    try:
        if settings.lake == OBJECT_STORE_LAKE:
            with run.phase("object_store_start"):
                object_store = start_object_store(run)
                run.sampler.watch("object_store", object_store.pid())
        with run.phase("broker_start"):
            broker = start_broker(run)
            run.sampler.watch("broker", broker.pid())
            create_run_topics(run)
        if settings.with_airflow:
            with run.phase("airflow_start"):
                shutil.rmtree(bench_airflow_settings(run).home, ignore_errors=True)
                airflow = start_airflow(run)
                run.sampler.watch("airflow", airflow.pid())
        generated = phase_generate(run, start)
        phase_ceiling(run)
        steps: list[tuple[str, Callable[[], None]]] = [
            ("work_ceiling", lambda: phase_work_ceiling(run)),
            ("replay", lambda: phase_replay(run, generated)),
            ("history", lambda: phase_history(run, generated)),
            ("window_heavy", lambda: phase_window_heavy(run, start)),
            ("reprocess", lambda: phase_reprocess(run, generated)),
            ("quality", lambda: phase_quality(run, generated)),
            ("dag_parse", lambda: phase_dag_parse(run)),
            *((f"live_{rate}", lambda rate=rate: phase_live(run, rate)) for rate in settings.live_rates),
            # Last: it adds orders to the replay topic.
            ("restart", lambda: phase_restart(run, generated)),
            *(
                ("month_two", lambda days=days: phase_month_two(run, days))
                for days in settings.month_two_days
            ),
            ("soak_live", lambda: phase_soak_live(run)),
        ]
        for name, step in steps:
            if not selected(settings, name):
                continue
            try:  # one failed phase is reported; the others still run
                step()
            except Exception as error:
                run.results.setdefault("phase_errors", {})[name] = f"{type(error).__name__}: {error}"
                log(f"[bench] phase {name} FAILED: {error}")
    except Exception as error:
        run.results["error"] = f"{type(error).__name__}: {error}"
        log(f"[bench] FAILED: {run.results['error']}")
    finally:
        run.sampler.phase = "teardown"
        stop_every_driver(run)
        if airflow is not None:
            airflow.stop(progress=log)
        if broker is not None:
            broker.stop(progress=log)
        if object_store is not None:
            object_store.stop(progress=log)
        run.sampler.stop()
    run.results["memory_samples"] = run.sampler.samples
    return run.results
