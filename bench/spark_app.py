"""The streaming app as the phases run it: spark-submit of bench/spark_driver.py (the app with every
progress event recorded) with the bench's overrides, its graceful stop, and the events it leaves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.run import OBJECT_STORE_LAKE, BenchRun
from revenue_platform import processes
from revenue_platform.lake_storage import read_side_file, spark_object_store_access
from revenue_platform.paths import APP_CONFIG_PATH, REPO_ROOT
from revenue_platform.spark_submit import spark_submit_command, spark_submit_env
from spark_apps.contract.naming import query_role

DRIVER = REPO_ROOT / "bench" / "spark_driver.py"
# JVM options added to every bench driver, e.g. a JFR recording:
# BENCH_DRIVER_JAVA_OPTIONS="-XX:StartFlightRecording=filename=/tmp/live.jfr,settings=profile"
DRIVER_JAVA_OPTIONS_ENV = "BENCH_DRIVER_JAVA_OPTIONS"
# Every driver the bench runs to the end (replay, history, restart, window-heavy) gets a 256 MiB
# result limit: the engine collects O(windows) per batch, never O(records), and the bench proves it
# by running 20M-order replays under a limit a whole-batch collect would break (issue 30).
BOUNDED_DRIVER_CONF = {"spark.driver.maxResultSize": "256m"}


def app_overrides(run: BenchRun, deployment_id: str, orders_topic: str, mode: str) -> dict[str, str]:
    horizon = run.settings.dedupe_horizon
    return {
        "deployment_id": deployment_id,
        "lake_root": run.lake_root,
        "kafka.bootstrap_servers": run.bootstrap,
        "kafka.orders_topic": orders_topic,
        "trigger.mode": mode,
        "trigger.interval": f"{run.settings.trigger_interval_s} seconds",
        **({"dedupe.horizon": horizon} if horizon else {}),
        **dict(run.settings.app_settings),
    }


def set_args(overrides: dict[str, str]) -> list[str]:
    args = []
    for key, value in overrides.items():
        args += ["--set", f"{key}={value}"]
    return args


def event_log_conf(folder: Path) -> list[str]:
    """spark-submit options writing Spark's event log (stage timings for the profile) into `folder`."""
    return [
        "--conf",
        "spark.eventLog.enabled=true",
        "--conf",
        f"spark.eventLog.dir=file://{folder}",
        "--conf",
        "spark.eventLog.compress=false",
    ]


def start_driver(
    run: BenchRun, name: str, overrides: dict[str, str], conf: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], Path]:
    """spark-submit bench/spark_driver.py to the run's master (with Spark `conf` on top of the app's);
    returns the process and its run folder (events, timings, log)."""
    folder = run.work_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    # A lake on the object store: S3A's jars and settings on the command, its credentials in the
    # environment, as the launcher gives every driver of such a lake.
    object_store = (
        spark_object_store_access(run.lake_root) if run.settings.lake == OBJECT_STORE_LAKE else None
    )
    command = spark_submit_command(
        "orders_streaming_app.py",
        [
            "--config",
            str(APP_CONFIG_PATH),
            *set_args(overrides),
            "--events",
            str(folder / "events.jsonl"),
            "--timings",
            str(folder / "timings.json"),
        ],
        master=run.settings.spark_master,
        object_store=object_store,
        # e.g. a JFR recording of the driver (docs/performance.md, its first commands)
        extra_java_options=os.environ.get(DRIVER_JAVA_OPTIONS_ENV, "").strip(),
    )
    app_index = next(i for i, part in enumerate(command) if part.endswith("orders_streaming_app.py"))
    command[app_index] = str(DRIVER)
    command[1:1] = event_log_conf(folder) + [
        part for k, v in (conf or {}).items() for part in ("--conf", f"{k}={v}")
    ]
    with (folder / "driver.log").open("ab") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=spark_submit_env(object_store=object_store),
            start_new_session=True,
            cwd=folder,  # Spark's scratch folders (spark-warehouse) land here, not in the repo
        )
    (folder / "submitted_at").write_text(str(time.time()))
    run.spark_processes.append(process)
    run.sampler.watch("spark", process.pid)
    return process, folder


def run_to_end(
    run: BenchRun, name: str, overrides: dict[str, str], conf: dict[str, str] = BOUNDED_DRIVER_CONF
) -> tuple[float, float, int, Path]:
    """`start_driver` and wait until the app exits (available_now: caught up); returns the submit and
    finish times (epoch s), its exit code and its run folder."""
    submitted = time.time()
    process, folder = start_driver(run, name, overrides, conf)
    code = process.wait()
    run.sampler.watch("spark", None)
    return submitted, time.time(), code, folder


def stop_every_driver(run: BenchRun) -> None:
    """Stop each spark-submit of the run that still runs: what a failed or interrupted run leaves."""
    for process in run.spark_processes:
        if process.poll() is None:
            run.log(f"[bench] stopping spark-submit pid {process.pid}")
            processes.terminate(process.pid, 30)


def stop_driver(
    run: BenchRun, process: subprocess.Popen[bytes], status_file: str, grace_s: float = 60
) -> None:
    """Graceful stop: SIGTERM to the Python driver (the app stops between batches), SIGKILL after grace.
    `status_file`: the driver's heartbeat (`DeploymentNames.driver_status_file`), in the lake."""
    if process.poll() is None:
        python_pid = None
        with suppress(TypeError, ValueError, KeyError):
            python_pid = int((read_side_file(status_file) or {})["pid"])
        processes.terminate(process.pid, grace_s, signal.SIGTERM, signal_pid=python_pid)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
    run.sampler.watch("spark", None)


def read_events(folder: Path) -> list[dict[str, Any]]:
    path = folder / "events.jsonl"
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # the line the driver is writing right now
    return events


def epoch_ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def processing_seconds(events: list[dict[str, Any]]) -> float:
    """From the start of the first of `events` (progress events) to the end of the last one's trigger:
    a run's processing time, excluding its JVM and session start."""
    first_start = min(epoch_ms(e["timestamp"]) for e in events) / 1000
    last_end = max(epoch_ms(e["timestamp"]) + int(e["durationMs"]["triggerExecution"]) for e in events) / 1000
    return last_end - first_start


def throughput(
    records: int, events: list[dict[str, Any]], submitted: float, finished: float
) -> dict[str, float]:
    """A run's processing time (`processing_seconds`), its wall time from submit, and its records/s
    excluding and including its JVM and session start: the figures every replay phase reports."""
    processing_s = processing_seconds(events)
    wall_s = finished - submitted
    return {
        "processing_s": processing_s,
        "wall_incl_start_s": wall_s,
        "records_per_s_excl_start": records / processing_s,
        "records_per_s_incl_start": records / wall_s,
    }


def duration_profile(events: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per query: Spark's durationMs parts summed over all batches (where a query's time goes)."""
    profile: dict[str, dict[str, int]] = {}
    for event in events:
        parts = profile.setdefault(query_role(event["name"]), {})
        for part, millis in (event.get("durationMs") or {}).items():
            parts[part] = parts.get(part, 0) + int(millis)
        parts["batches"] = parts.get("batches", 0) + 1
    return profile


def wait_ready(status_file: str, process: subprocess.Popen[bytes], timeout_s: float = 240) -> float:
    """Seconds until the app reports every query through its first trigger (its heartbeat, in the lake)."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        if process.poll() is not None:
            raise RuntimeError(f"the streaming app exited with {process.returncode} before it was ready")
        if (read_side_file(status_file) or {}).get("ready"):
            return time.monotonic() - began
        time.sleep(0.5)
    raise TimeoutError(f"the streaming app was not ready within {timeout_s:.0f}s")
