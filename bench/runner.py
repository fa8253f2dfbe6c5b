"""The benchmark's phases against its own broker and lake (never the demo's or the tests')."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import datagen, stats
from bench.memory import RssSampler, return_freed_memory
from bench.spark_profile import event_log_profile
from bench.work_ceiling import WindowGeometry, tally_orders
from revenue_platform import processes
from revenue_platform.local_stack.kafka_broker import KafkaBrokerSettings, LocalKafkaBroker
from revenue_platform.orders_generator import GeneratorSettings, generate_stores, produce
from revenue_platform.paths import APP_CONFIG_PATH, REPO_ROOT
from revenue_platform.spark_submit import spark_submit_command, spark_submit_env
from spark_apps.contract.config import load_config
from spark_apps.contract.naming import INGEST_QUERY_ROLE, REVENUE_QUERY_ROLE, query_role
from spark_apps.contract.records import OrderRules

if TYPE_CHECKING:
    from confluent_kafka import Consumer
    from deltalake import DeltaTable

DRIVER = REPO_ROOT / "bench" / "spark_driver.py"
ORDERS_PARTITIONS = 4


@dataclass(frozen=True)
class BenchSettings:
    orders: int = 2_000_000
    stores: int = 50
    seed: int = 42
    bad_every: int = 1000
    duplicate_every: int = 200
    chunk_orders: int = 50_000
    workers: int = 2
    window_heavy_orders: int = 1_000_000
    """Orders of the window-heavy replay (bench.history.phase_window_heavy)."""
    phases: tuple[str, ...] = ()
    """The phases to run among OPTIONAL_PHASES (empty: all of them); the broker, the topic's
    production and its raw read always run. `history` reads the `replay` phase's bronze."""
    live_rates: tuple[int, ...] = (5_000, 20_000, 50_000)
    live_seconds: float = 60.0
    live_warmup_seconds: float = 30.0
    """Each live phase first produces at its rate for this long (a fresh app JIT-compiles and warms up
    meanwhile); latency is measured over the `live_seconds` after it. The whole run's latency,
    from the cold start, is reported too (`latency_from_cold_start`)."""
    trigger_interval_s: int = 2
    kafka_port: int = 23092
    controller_port: int = 23093
    airflow_port: int = 23080
    with_airflow: bool = True
    """Run `airflow standalone` (port 23080, DAG schedules off) through all phases, so its memory counts."""
    state_dir: Path = REPO_ROOT / ".local" / "bench"
    results_dir: Path = REPO_ROOT / "bench" / "results"
    label: str = "full"


OPTIONAL_PHASES = (
    "work_ceiling",
    "replay",
    "history",
    "window_heavy",
    "reprocess",
    "quality",
    "dag_parse",
    "live",
    "restart",
)


def selected(settings: BenchSettings, step: str) -> bool:
    """Whether the run includes `step` (a live phase is selected by `live`)."""
    name = "live" if step.startswith("live_") else step
    return not settings.phases or name in settings.phases


@dataclass
class BenchRun:
    settings: BenchSettings
    stamp: str
    sampler: RssSampler = field(default_factory=RssSampler)
    results: dict[str, Any] = field(default_factory=dict)
    log: Callable[[str], None] = print
    spark_processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    """Every spark-submit started, so an interrupted run stops them too."""

    def save_partial(self) -> None:
        """Results so far, after every phase: an interrupted run still leaves its numbers."""
        document = {**self.results, "memory_samples": len(self.sampler.samples)}
        (self.work_dir / "partial.json").write_text(json.dumps(document, indent=2, default=str))

    @property
    def bootstrap(self) -> str:
        return f"localhost:{self.settings.kafka_port}"

    @property
    def lake_root(self) -> str:
        return str(self.settings.state_dir / "lake")

    @property
    def work_dir(self) -> Path:
        return self.settings.state_dir / "runs" / self.stamp

    @contextmanager
    def phase(self, name: str) -> Generator[dict[str, Any], None, None]:
        """Label memory samples with `name`; record wall time and load average around it."""
        record: dict[str, Any] = {"load_before": list(os.getloadavg())}
        self.sampler.phase = name
        self.log(f"[bench] phase {name} ...")
        started = time.monotonic()
        try:
            yield record
        finally:
            record["wall_s"] = time.monotonic() - started
            record["load_after"] = list(os.getloadavg())
            self.results.setdefault("phases", {})[name] = record
            self.save_partial()
            self.log(f"[bench] phase {name} took {record['wall_s']:.1f}s")
            self.sampler.phase = "between"


# --- Kafka ------------------------------------------------------------------------------------------
def start_broker(run: BenchRun) -> LocalKafkaBroker:
    data_dir = run.settings.state_dir / "kafka"
    broker = LocalKafkaBroker(
        KafkaBrokerSettings(
            port=run.settings.kafka_port,
            controller_port=run.settings.controller_port,
            data_dir=data_dir,
            heap=os.environ.get("KAFKA_HEAP", "1g"),
        )
    )
    broker.stop(progress=run.log)  # a broker left by an interrupted run
    # Every run starts from empty topics and an empty lake.
    shutil.rmtree(data_dir, ignore_errors=True)
    shutil.rmtree(run.lake_root, ignore_errors=True)
    broker.start(progress=run.log)
    return broker


def bench_airflow_settings(run: BenchRun) -> Any:
    from revenue_platform.local_stack.airflow_local import AirflowLocalSettings

    return AirflowLocalSettings(
        home=run.settings.state_dir / "airflow",
        port=run.settings.airflow_port,
        kafka_bootstrap_servers=run.bootstrap,
    )


def start_airflow(run: BenchRun) -> Any:
    """The control plane as `make up` runs it, pointed at the bench's lake, with DAG schedules off.

    Schedules off (no supervise runs every minute) keeps the measured Spark work the bench's own;
    what remains is the idle control plane's memory and CPU: API server, scheduler, DAG processor.
    """
    from revenue_platform.local_stack.airflow_local import LocalAirflow

    os.environ["PLATFORM_STATE_DIR"] = str(run.settings.state_dir)
    os.environ["PLATFORM_LAKE_ROOT"] = run.lake_root
    os.environ["AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE"] = "False"
    airflow = LocalAirflow(bench_airflow_settings(run))
    airflow.start(progress=run.log)
    return airflow


def create_topics(bootstrap: str, orders_topics: list[str]) -> None:
    """The app's topics; orders topics stamp LogAppendTime, the append time latency is measured from."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = [
        NewTopic(t, ORDERS_PARTITIONS, 1, config={"message.timestamp.type": "LogAppendTime"})
        for t in orders_topics
    ]
    wanted += [
        NewTopic("stores", 1, 1, config={"cleanup.policy": "compact"}),
        NewTopic("revenue_windows", 1, 1, config={"cleanup.policy": "compact"}),
        *(NewTopic(t, 1, 1) for t in ("orders_dlq", "general_orders", "restaurant_orders")),
    ]
    existing = set(admin.list_topics(timeout=30).topics)
    futures = admin.create_topics([t for t in wanted if t.topic not in existing])
    for future in futures.values():
        future.result(timeout=30)


def ceiling_consumer(bootstrap: str, group_prefix: str) -> Consumer:
    """A plain consumer with large fetches, so neither ceiling waits on small round trips."""
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{group_prefix}-{time.time_ns()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "queued.min.messages": 200_000,
        }
    )


def end_offsets(consumer: Consumer, topic: str) -> dict[int, int]:
    """Per partition of `topic`: its high watermark (the offset after its last record)."""
    from confluent_kafka import TopicPartition

    return {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        for p in range(ORDERS_PARTITIONS)
    }


def assign_from_beginning(consumer: Consumer, topic: str) -> None:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(ORDERS_PARTITIONS)])


def read_ceiling(bootstrap: str, topic: str) -> dict[str, float]:
    """A plain confluent-kafka consumer reading `topic` from the start to its end: the physical ceiling."""
    consumer = ceiling_consumer(bootstrap, "bench-ceiling")
    try:
        ends = end_offsets(consumer, topic)
        remaining = {p for p, end in ends.items() if end > 0}
        started = time.monotonic()
        assign_from_beginning(consumer, topic)
        records = 0
        payload = 0
        # A short wait: consume() blocks until it has a full batch or times out, and that wait on the
        # last partial batch must not count as reading time.
        while remaining:
            for message in consumer.consume(num_messages=10_000, timeout=0.05):
                if message.error():
                    continue
                records += 1
                payload += len(message.value() or b"") + len(message.key() or b"")
                partition, offset = message.partition() or 0, message.offset() or 0
                if offset + 1 >= ends[partition]:
                    remaining.discard(partition)
        seconds = time.monotonic() - started
    finally:
        consumer.close()
    return {
        "records": records,
        "bytes": payload,
        "seconds": seconds,
        "records_per_s": records / seconds,
        "mb_per_s": payload / seconds / 1e6,
    }


def values_to_end(consumer: Consumer, ends: dict[int, int]) -> Iterator[tuple[bytes | None, int]]:
    """(value, Kafka timestamp ms) of every record until each partition reached its end offset."""
    remaining = {p for p, end in ends.items() if end > 0}
    while remaining:
        # Batches as in read_ceiling, with the same short wait on the last partial batch.
        for message in consumer.consume(num_messages=10_000, timeout=0.05):
            if message.error():
                continue
            yield message.value(), message.timestamp()[1]
            if (message.offset() or 0) + 1 >= ends[message.partition() or 0]:
                remaining.discard(message.partition() or 0)


def read_work_ceiling(
    bootstrap: str, topic: str, geometry: WindowGeometry, rules: OrderRules
) -> dict[str, Any]:
    """A plain consumer doing the app's work on `topic`, start to end: the work-equivalent ceiling.

    Parse with exact decimals, validate, keep the first copy of each orderId, sum cents per window
    (bench/work_ceiling.py), in this one Python process, as fast as it goes.
    """
    consumer = ceiling_consumer(bootstrap, "bench-work-ceiling")
    try:
        ends = end_offsets(consumer, topic)
        started = time.monotonic()
        assign_from_beginning(consumer, topic)
        tally = tally_orders(values_to_end(consumer, ends), geometry, rules)
        seconds = time.monotonic() - started
    finally:
        consumer.close()
    return {**tally.summary(), "seconds": seconds, "records_per_s": tally.records / seconds}


def append_times(bootstrap: str, topic: str) -> tuple[dict[int, list[int]], dict[int, int]]:
    """Per partition: the append time (ms) of every record, and the first offset."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-times-{time.time_ns()}",
            "enable.auto.commit": False,
        }
    )
    times: dict[int, list[int]] = {p: [] for p in range(ORDERS_PARTITIONS)}
    firsts: dict[int, int] = {}
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            for p in range(ORDERS_PARTITIONS)
        }
        remaining = {p for p, (low, high) in ends.items() if high > low}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(ORDERS_PARTITIONS)])
        while remaining:
            for message in consumer.consume(num_messages=10_000, timeout=5):
                if message.error():
                    continue
                partition, offset = message.partition() or 0, message.offset() or 0
                firsts.setdefault(partition, offset)
                times[partition].append(message.timestamp()[1])
                if offset + 1 >= ends[partition][1]:
                    remaining.discard(partition)
    finally:
        consumer.close()
    return times, firsts


# --- Spark ------------------------------------------------------------------------------------------
def app_overrides(run: BenchRun, deployment_id: str, orders_topic: str, mode: str) -> dict[str, str]:
    return {
        "deployment_id": deployment_id,
        "lake_root": run.lake_root,
        "kafka.bootstrap_servers": run.bootstrap,
        "kafka.orders_topic": orders_topic,
        "trigger.mode": mode,
        "trigger.interval": f"{run.settings.trigger_interval_s} seconds",
    }


def _set_args(overrides: dict[str, str]) -> list[str]:
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
    """spark-submit bench/spark_driver.py (with Spark `conf` on top of the app's); returns the process
    and its run folder (events, timings, log)."""
    folder = run.work_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    command = spark_submit_command(
        "orders_streaming_app.py",
        [
            "--config",
            str(APP_CONFIG_PATH),
            *_set_args(overrides),
            "--events",
            str(folder / "events.jsonl"),
            "--timings",
            str(folder / "timings.json"),
        ],
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
            env=spark_submit_env(),
            start_new_session=True,
            cwd=folder,  # Spark's scratch folders (spark-warehouse) land here, not in the repo
        )
    (folder / "submitted_at").write_text(str(time.time()))
    run.spark_processes.append(process)
    run.sampler.watch("spark", process.pid)
    return process, folder


def stop_driver(
    run: BenchRun, process: subprocess.Popen[bytes], status_file: Path, grace_s: float = 60
) -> None:
    """Graceful stop: SIGTERM to the Python driver (the app stops between batches), SIGKILL after grace."""
    if process.poll() is None:
        python_pid = None
        with suppress(OSError, ValueError, KeyError):
            python_pid = int(json.loads(status_file.read_text())["pid"])
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
    last_end = max(epoch_ms(e["timestamp"]) + e["durationMs"]["triggerExecution"] for e in events) / 1000
    return last_end - first_start


def generate_and_produce(
    run: BenchRun, settings: GeneratorSettings, topic: str, folder: str
) -> dict[str, Any]:
    """Generate `settings`' orders into files under the run's `folder`, produce their stores to `stores`
    and the orders to `topic`, and delete the files: the generation and production figures."""
    chunks = datagen.plan_chunks(settings, run.settings.chunk_orders, run.work_dir / folder)
    began = time.monotonic()
    total = datagen.generate_files(chunks, run.settings.workers)
    generate_s = time.monotonic() - began
    produce(run.bootstrap, "stores", generate_stores(settings.stores))
    produced = datagen.produce_files(run.bootstrap, topic, [c.path for c in chunks], total)
    for chunk in chunks:
        chunk.path.unlink()
    return {"generate_s": generate_s, "generate_records_per_s": total / generate_s, "produce": produced}


def duration_profile(events: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per query: Spark's durationMs parts summed over all batches (where a query's time goes)."""
    profile: dict[str, dict[str, int]] = {}
    for event in events:
        parts = profile.setdefault(event["name"].split("__")[-1], {})
        for part, millis in (event.get("durationMs") or {}).items():
            parts[part] = parts.get(part, 0) + int(millis)
        parts["batches"] = parts.get("batches", 0) + 1
    return profile


def _gold_table(lake_root: str, deployment_id: str) -> DeltaTable:
    """The deployment's gold table; the benchmark measures runs that wrote it, so it must exist."""
    from revenue_platform.gold_table import open_gold
    from spark_apps.contract.naming import DeploymentNames

    table_path = DeploymentNames(lake_root, deployment_id).gold_revenue_table
    table = open_gold(table_path)
    if table is None:
        raise FileNotFoundError(f"no gold table at {table_path}: the benchmarked app wrote nothing")
    return table


def gold_stats(lake_root: str, deployment_id: str) -> dict[str, Any]:
    """Gold's windows, Σ order_count and Σ revenue in cents (exact: DECIMAL read as Decimal)."""
    table = _gold_table(lake_root, deployment_id)
    columns = table.to_pyarrow_table(columns=["order_count", "revenue"])
    counts = columns.column("order_count").to_pylist()
    revenue = sum(
        (amount for amount in columns.column("revenue").to_pylist() if amount is not None), Decimal(0)
    )
    return {
        "rows": len(counts),
        "orders_counted": sum(counts),
        "revenue_cents": int(revenue * 100),
        "version": table.version(),
    }


def gold_commit_times_ms(lake_root: str, deployment_id: str) -> list[int]:
    return sorted(int(entry["timestamp"]) for entry in _gold_table(lake_root, deployment_id).history())


# --- phases -----------------------------------------------------------------------------------------
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
        record.update(generate_and_produce(run, settings, "orders", "orders"))
        record["generator"] = datagen.describe_settings(settings)
    return settings


def phase_ceiling(run: BenchRun) -> None:
    with run.phase("raw_ceiling") as record:
        # Best of three: the first read also warms the page cache, as the replay's read would.
        attempts = [read_ceiling(run.bootstrap, "orders") for _ in range(3)]
        record["attempts"] = attempts
        record["best"] = max(attempts, key=lambda a: a["records_per_s"])


def phase_work_ceiling(run: BenchRun) -> None:
    config = load_config(str(APP_CONFIG_PATH))
    geometry = WindowGeometry.from_config(config.window)
    with run.phase("work_ceiling") as record:
        # Best of two, not three like the raw read: each pass parses every record in Python, several
        # times slower than reading (~15 s per pass for the full bench's 2,000,000 orders).
        attempts = [
            read_work_ceiling(run.bootstrap, "orders", geometry, config.order_rules()) for _ in range(2)
        ]
        record["window"] = {"size": config.window.size, "slide": config.window.slide}
        record["attempts"] = attempts
        record["best"] = max(attempts, key=lambda a: a["records_per_s"])


def phase_replay(run: BenchRun, settings: GeneratorSettings) -> None:
    deployment = "bench-replay"
    with run.phase("replay") as record:
        submitted = time.time()
        overrides = app_overrides(run, deployment, "orders", "available_now")
        process, folder = start_driver(run, "replay", overrides)
        code = process.wait()
        finished = time.time()
        run.sampler.watch("spark", None)
        record["exit_code"] = code
        if code != 0:
            record["error"] = processes.tail(folder / "driver.log", 30)
            return
        events = read_events(folder)
        timings = json.loads((folder / "timings.json").read_text())
        processing_s = processing_seconds(events)
        rows = {
            f"__{role}": sum(e["numInputRows"] for e in events if query_role(e["name"]) == role)
            for role in (INGEST_QUERY_ROLE, REVENUE_QUERY_ROLE)
        }
        records = run.results["phases"]["raw_ceiling"]["best"]["records"]
        record.update(
            {
                "records": records,
                "input_rows": rows,
                "jvm_and_session_start_s": timings["session_ready"] - submitted,
                "processing_s": processing_s,
                "wall_incl_start_s": finished - submitted,
                "records_per_s_excl_start": records / processing_s,
                "records_per_s_incl_start": records / (finished - submitted),
                "max_offsets_per_trigger": load_config(str(APP_CONFIG_PATH)).kafka.max_offsets_per_trigger,
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
        overrides = app_overrides(run, "bench-replay", "orders", "available_now")
        command = spark_submit_command(
            "reprocess_revenue_job.py",
            [
                "--config",
                str(APP_CONFIG_PATH),
                *_set_args(overrides),
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
    from revenue_platform.paths import PROJECT_PYTHONPATH

    with run.phase("quality") as record:
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                QUALITY_SCRIPT,
                "bench-replay",
                run.lake_root,
                settings.start.isoformat(),
                (settings.start + timedelta(hours=1)).isoformat(),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": PROJECT_PYTHONPATH},
        )
        run.sampler.watch("quality", process.pid)
        out, err = process.communicate(timeout=1800)
        run.sampler.watch("quality", None)
        lines = out.decode().strip().splitlines()
        if process.returncode == 0 and lines:
            record.update(json.loads(lines[-1]))
        else:
            record["error"] = err.decode()[-2000:]


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


def wait_ready(status_file: Path, process: subprocess.Popen[bytes], timeout_s: float = 240) -> float:
    """Seconds until the app reports every query through its first trigger."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        if process.poll() is not None:
            raise RuntimeError(f"the streaming app exited with {process.returncode} before it was ready")
        try:
            if json.loads(status_file.read_text()).get("ready"):
                return time.monotonic() - began
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    raise TimeoutError(f"the streaming app was not ready within {timeout_s:.0f}s")


def revenue_positions(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, dict[str, int]]]]:
    """Each revenue progress event with the Kafka offsets reflected in gold after it.

    The same rule as the app's publisher: the query reads Kafka and commits gold in each batch, so its
    own end offsets are its position.
    """
    from spark_apps.engine.observability import summarize_progress

    return [
        (event, summarize_progress(event, {})["end_offsets"])
        for event in events
        if query_role(event["name"]) == REVENUE_QUERY_ROLE
    ]


def processed_offsets(events: list[dict[str, Any]]) -> int:
    """Kafka records reflected in gold: the revenue query's position, summed over partitions."""
    positions = revenue_positions(events)
    if not positions:
        return 0
    return sum(o for parts in positions[-1][1].values() for o in parts.values())


def phase_live(run: BenchRun, rate: int) -> None:
    from spark_apps.contract.naming import DeploymentNames

    deployment = f"bench-live-{rate}"
    topic = f"orders_live_{rate}"
    names = DeploymentNames(run.lake_root, deployment)
    trigger_s = run.settings.trigger_interval_s
    with run.phase(f"live_{rate}") as record:
        create_topics(run.bootstrap, [topic])
        overrides = app_overrides(run, deployment, topic, "processing_time")
        process, folder = start_driver(run, f"live_{rate}", overrides)
        status_file = Path(names.driver_status_file)
        try:
            record["ready_after_s"] = wait_ready(status_file, process)
            stamper = datagen.LiveOrderStamper(run.settings.seed, run.settings.stores)
            warmup_s = run.settings.live_warmup_seconds
            record["producer"] = datagen.produce_paced(
                run.bootstrap, topic, rate, warmup_s + run.settings.live_seconds, stamper
            )
            produced = record["producer"]["records"]
            # Drain: wait until the revenue query processed everything (bounded).
            deadline = time.monotonic() + max(60.0, 6 * trigger_s)
            while time.monotonic() < deadline:
                if processed_offsets(read_events(folder)) >= produced:
                    break
                time.sleep(1)
            record["drained"] = processed_offsets(read_events(folder)) >= produced
        finally:
            stop_driver(run, process, status_file)
        commits = gold_commit_times_ms(run.lake_root, deployment)
        batches = []
        for event, offsets in revenue_positions(read_events(folder)):
            if topic not in offsets:
                continue
            started = epoch_ms(event["timestamp"])
            finished = started + int(event["durationMs"]["triggerExecution"])
            batches.append(
                stats.VisibleBatch(
                    {int(p): int(o) for p, o in offsets[topic].items()},
                    stats.gold_visible_at_ms(started, finished, commits),
                )
            )
        appended, firsts = append_times(run.bootstrap, topic)
        all_pairs, invisible = stats.record_latencies_ms(appended, firsts, batches)
        pairs = stats.after_warmup(all_pairs, warmup_s)
        summary = stats.latency_summary([latency / 1000 for _, latency in pairs])
        first_q, last_q = stats.quarter_medians_s(pairs)
        verdict = stats.judge_sustained(
            rate,
            record["producer"]["achieved_per_s"],
            invisible,
            first_q,
            last_q,
            trigger_s,
            record["drained"],
        )
        record.update(
            {
                "target_per_s": rate,
                "trigger_interval_s": trigger_s,
                "latency": summary,
                "warmup_s": warmup_s,
                "latency_from_cold_start": stats.latency_summary([lat / 1000 for _, lat in all_pairs]),
                "invisible_records": invisible,
                "first_quarter_p50_s": first_q,
                "last_quarter_p50_s": last_q,
                "sustained": verdict.sustained,
                "verdict": verdict.reason,
                "profile_ms": duration_profile(read_events(folder)),
                "stage_profile": event_log_profile(folder),
                "batches": len(batches),
            }
        )
        del appended, all_pairs, pairs
        return_freed_memory()


def execute(settings: BenchSettings, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every phase; the broker and any Spark driver are stopped even when a phase fails."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run = BenchRun(settings, stamp, log=log)
    run.work_dir.mkdir(parents=True, exist_ok=True)
    run.results.update({"stamp": stamp, "label": settings.label, "settings": _settings_json(settings)})
    run.sampler.start()
    broker: LocalKafkaBroker | None = None
    airflow: Any = None
    # Event time of the replay data: the hour that ends now, aligned to the 15 s windows.
    now = int(time.time())
    start = datetime.fromtimestamp(now - now % 15 - 3600, UTC).replace(tzinfo=None)
    try:
        with run.phase("broker_start"):
            broker = start_broker(run)
            run.sampler.watch("broker", broker.pid())
            create_topics(run.bootstrap, ["orders"])
        if settings.with_airflow:
            with run.phase("airflow_start"):
                shutil.rmtree(bench_airflow_settings(run).home, ignore_errors=True)
                airflow = start_airflow(run)
                run.sampler.watch("airflow", airflow.pid())
        generated = phase_generate(run, start)
        phase_ceiling(run)
        # bench.history builds on this module's helpers, so it is imported once they exist.
        from bench.history import phase_history, phase_restart, phase_window_heavy

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
        for process in run.spark_processes:
            if process.poll() is None:
                log(f"[bench] stopping spark-submit pid {process.pid}")
                processes.terminate(process.pid, 30)
        if airflow is not None:
            airflow.stop(progress=log)
        if broker is not None:
            broker.stop(progress=log)
        run.sampler.stop()
    run.results["memory_samples"] = run.sampler.samples
    return run.results


def _settings_json(settings: BenchSettings) -> dict[str, Any]:
    document = {k: getattr(settings, k) for k in settings.__dataclass_fields__}
    return json.loads(json.dumps(document, default=str))
