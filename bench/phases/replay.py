"""Bench phases of the replay: generate and produce the orders, read them back with the raw and the
work-equivalent ceilings, replay them through the app (Kafka to gold, excluding and including its
start), and reprocess one hour of them with the batch job."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime, timedelta
from typing import Any

from bench import datagen
from bench.consumers import read_ceiling, read_work_ceiling
from bench.gold import gold_stats
from bench.run import BenchRun
from bench.spark_app import (
    BOUNDED_DRIVER_CONF,
    app_overrides,
    duration_profile,
    event_log_conf,
    read_events,
    set_args,
    start_driver,
    throughput,
)
from bench.spark_profile import event_log_profile
from bench.work_ceiling import WindowGeometry
from revenue_platform import processes
from revenue_platform.orders_generator import GeneratorSettings, generate_stores, produce
from revenue_platform.paths import APP_CONFIG_PATH
from revenue_platform.spark_submit import spark_submit_command, spark_submit_env
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, query_role


def generate_and_produce(
    run: BenchRun, settings: GeneratorSettings, topic: str, folder: str, stamped: bool = False
) -> dict[str, Any]:
    """Generate `settings`' orders into files under the run's `folder`, produce their stores to the app's
    stores topic and the orders to `topic` (`stamped`: with their event-line timestamps), and delete
    the files: the generation and production figures."""
    chunks = datagen.plan_chunks(settings, run.settings.chunk_orders, run.work_dir / folder)
    began = time.monotonic()
    total = datagen.generate_files(chunks, run.settings.workers)
    generate_s = time.monotonic() - began
    produce(run.bootstrap, run.app_config.kafka.stores_topic, generate_stores(settings.stores))
    produced = datagen.produce_files(run.bootstrap, topic, [c.path for c in chunks], total, stamped)
    for chunk in chunks:
        chunk.path.unlink()
    return {"generate_s": generate_s, "generate_records_per_s": total / generate_s, "produce": produced}


def phase_generate(run: BenchRun, start: datetime) -> GeneratorSettings:
    settings = GeneratorSettings(
        orders=run.settings.orders,
        stores=run.settings.stores,
        start=start,
        span_seconds=3600,
        seed=run.settings.seed,
        duplicate_every=run.settings.duplicate_every,
        bad_every=run.settings.bad_every,
    )
    with run.phase("produce") as record:
        stamped = run.settings.kafka_time == "event"
        record.update(generate_and_produce(run, settings, run.orders_topic, "orders", stamped))
        record["kafka_time"] = run.settings.kafka_time
        record["generator"] = datagen.describe_settings(settings)
    return settings


def phase_ceiling(run: BenchRun) -> None:
    with run.phase("raw_ceiling") as record:
        # Best of three: the first read also warms the page cache, as the replay's read would.
        attempts = [read_ceiling(run.bootstrap, run.orders_topic) for _ in range(3)]
        record["attempts"] = attempts
        record["best"] = max(attempts, key=lambda a: a["records_per_s"])


def phase_work_ceiling(run: BenchRun) -> None:
    config = run.app_config
    geometry = WindowGeometry.from_config(config.window)
    with run.phase("work_ceiling") as record:
        # Best of two, not three like the raw read: each pass parses every record in Python, several
        # times slower than reading (~15 s per pass for the full bench's 2,000,000 orders).
        attempts = [
            read_work_ceiling(run.bootstrap, run.orders_topic, geometry, config.order_rules())
            for _ in range(2)
        ]
        record["window"] = {"size": config.window.size, "slide": config.window.slide}
        record["attempts"] = attempts
        record["best"] = max(attempts, key=lambda a: a["records_per_s"])


def phase_replay(run: BenchRun, settings: GeneratorSettings) -> None:
    deployment = "bench-replay"
    with run.phase("replay") as record:
        submitted = time.time()
        overrides = app_overrides(run, deployment, run.orders_topic, "available_now")
        process, folder = start_driver(run, "replay", overrides, BOUNDED_DRIVER_CONF)
        code = process.wait()
        finished = time.time()
        run.sampler.watch("spark", None)
        record["exit_code"] = code
        record["driver_conf"] = BOUNDED_DRIVER_CONF
        if code != 0:
            record["error"] = processes.tail(folder / "driver.log", 30)
            return
        events = read_events(folder)
        timings = json.loads((folder / "timings.json").read_text())
        rows = {
            f"__{REVENUE_QUERY_ROLE}": sum(
                e["numInputRows"] for e in events if query_role(e["name"]) == REVENUE_QUERY_ROLE
            )
        }
        records = run.results["phases"]["raw_ceiling"]["best"]["records"]
        record.update(
            {
                "records": records,
                "input_rows": rows,
                "jvm_and_session_start_s": timings["session_ready"] - submitted,
                **throughput(records, events, submitted, finished),
                "max_offsets_per_trigger": run.app_config.kafka.max_offsets_per_trigger,
                "profile_ms": duration_profile(events),
                "stage_profile": event_log_profile(folder),
                "gold": gold_stats(run.lake_root, deployment),
                "expected_orders_counted": settings.orders,
            }
        )


def phase_reprocess(run: BenchRun, settings: GeneratorSettings) -> None:
    with run.phase("reprocess") as record:
        start = settings.start
        end = start + timedelta(hours=1)
        report = run.work_dir / "reprocess_report.json"
        overrides = app_overrides(run, "bench-replay", run.orders_topic, "available_now")
        command = spark_submit_command(
            "reprocess_revenue_job.py",
            [
                "--config",
                str(APP_CONFIG_PATH),
                *set_args(overrides),
                "--from",
                start.isoformat(),
                "--to",
                end.isoformat(),
                "--source",
                "kafka",
                "--report",
                str(report),
            ],
        )
        command[1:1] = event_log_conf(run.work_dir)
        log_path = run.work_dir / "reprocess.log"
        began = time.monotonic()
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=spark_submit_env(),
                cwd=run.work_dir,
                start_new_session=True,
            )
            run.spark_processes.append(process)
            run.sampler.watch("spark", process.pid)
            code = process.wait()
        run.sampler.watch("spark", None)
        record["wall_incl_start_s"] = time.monotonic() - began
        record["exit_code"] = code
        record["range"] = [start.isoformat(), end.isoformat()]
        if code == 0 and report.exists():
            document = json.loads(report.read_text())
            document.pop("fixed_windows", None)
            record["report"] = document
            record["stage_profile"] = event_log_profile(run.work_dir)
        else:
            record["error"] = processes.tail(log_path, 30)
