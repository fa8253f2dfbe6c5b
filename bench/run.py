"""What one benchmark run is: its settings, the phases it may select, and what it records as it goes.

`BenchSettings` is what `python -m bench` was asked for; `BenchRun` is the run in progress: where its
broker, lake and files are, every Spark process it started (so an interrupted run stops them), the
memory sampler, and the results document each phase adds to (`BenchRun.phase`).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from bench.memory import RssSampler
from revenue_platform.local_object_store import ObjectStoreSettings
from revenue_platform.paths import APP_CONFIG_PATH, REPO_ROOT
from spark_apps.contract.config import StreamingAppConfig, load_config


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
    """Orders of the window-heavy replay (bench.phases.history.phase_window_heavy)."""
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
    dedupe_horizon: str | None = None
    """The apps' `dedupe.horizon` (None: the shipped config's). The generator's 20M records reach the broker
    within a minute, so with an hour's horizon every id of the history is in one horizon: a horizon of a
    second or two scales a month of real history (many horizons) down to the bench's."""
    kafka_time: str = "append"
    """The replay topic's Kafka timestamps: "append" (the spec's LogAppendTime: the broker stamps the
    whole history within the minute it is produced) or "event" (the topic takes the producer's
    timestamps, and each record carries its place on the event-time line, as the broker would have
    stamped an hour of real traffic). With "event" and a short `dedupe_horizon`, ids expire through
    the history as they do through a month of real traffic; with "append" they cannot, since the
    dedupe's Kafka-time watermark trails by the window's watermark delay (30 s) and the whole
    history is stamped within about a minute."""
    month_two_days: tuple[int, ...] = (1, 30)
    """The histories the `month_two` phase seeds, one deployment each (bench/phases/month_two.py)."""
    month_two_rate: int = 5_000
    """Orders/s of the `month_two` phase's live runs."""
    soak_seconds: float = 7_200.0
    """How long the `soak_live` phase produces (bench/phases/soak_live.py)."""
    soak_rate: int = 2_000
    """Orders/s of the `soak_live` phase."""
    soak_slice_seconds: float = 600.0
    """The `soak_live` phase samples and reports per slice of this length."""
    soak_maintain_every_s: float = 1_200.0
    """How often the `soak_live` phase runs the lake maintenance beside the app: three times as often as
    the `maintain_lake` DAG's hourly schedule, so the disk's steady state (tombstoned files kept an hour,
    then vacuumed) shows within two hours."""
    soak_gold_retention_hours: float | None = None
    """Gold's retention of superseded files in the `soak_live` phase's maintenance (None: the shipped
    24 hours, which a soak of two hours never reaches; 1, the form's least, shows the steady state)."""
    app_settings: tuple[tuple[str, str], ...] = ()
    """Extra `--set key=value` overrides for every app the bench starts (e.g.
    `kafka.max_offsets_per_trigger`): a setting measured against a run without it."""
    kafka_port: int = 23092
    controller_port: int = 23093
    bootstrap_servers: str = ""
    """The brokers of a cluster the run did not start as its one broker (`bench.cluster_scaling`'s
    three); empty: the bench's own broker on `kafka_port`."""
    spark_master: str = "local[2]"
    """The master `start_driver` submits the app to: the shipped `local[2]`, or a standalone cluster's."""
    airflow_port: int = 23080
    with_airflow: bool = True
    """Run `airflow standalone` (port 23080, DAG schedules off) through all phases, so its memory counts."""
    lake: str = "local"
    """Where the apps' lake is: "local" (a folder under `state_dir`) or "object-store" (the bucket of
    an S3 server the run starts on `object_store_port`, reached through S3A and delta-rs as a
    deployment on a team's store is; see docs/object-store.md)."""
    object_store_port: int = 23400
    state_dir: Path = REPO_ROOT / ".local" / "bench"
    results_dir: Path = REPO_ROOT / "bench" / "results"
    label: str = "full"


LAKES = ("local", "object-store")
OBJECT_STORE_LAKE = "object-store"

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
    "month_two",
    "soak_live",
)
# Phases a run includes only when `--phases` names them (minutes of seeding, gigabytes of log files,
# hours of live traffic).
OPT_IN_PHASES = ("month_two", "soak_live")


def selected(settings: BenchSettings, step: str) -> bool:
    """Whether the run includes `step` (a live phase is selected by `live`)."""
    name = "live" if step.startswith("live_") else step
    if not settings.phases:
        return name not in OPT_IN_PHASES
    return name in settings.phases


def settings_json(settings: BenchSettings) -> dict[str, Any]:
    """`settings` as the results document records them (paths as text)."""
    document = {k: getattr(settings, k) for k in settings.__dataclass_fields__}
    described: dict[str, Any] = json.loads(json.dumps(document, default=str))
    return described


def replay_hour_start(now_s: float, window_s: int = 15) -> datetime:
    """Event time of the first generated order: the hour that ends at `now_s` (epoch s), aligned to the
    app's windows, as a zone-less UTC time (the generator's)."""
    now = int(now_s)
    return datetime.fromtimestamp(now - now % window_s - 3600, UTC).replace(tzinfo=None)


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

    @cached_property
    def app_config(self) -> StreamingAppConfig:
        """The app's shipped config (include/config/streaming_app.yaml), which the phases override."""
        return load_config(str(APP_CONFIG_PATH))

    @property
    def orders_topic(self) -> str:
        """The app's orders topic: the one the replay reads, and the one the bench's own topics mirror."""
        return self.app_config.kafka.orders_topic

    @property
    def bootstrap(self) -> str:
        return self.settings.bootstrap_servers or f"localhost:{self.settings.kafka_port}"

    @property
    def lake_root(self) -> str:
        if self.settings.lake == OBJECT_STORE_LAKE:
            return f"{self.object_store.lake_root}/bench"
        return str(self.settings.state_dir / "lake")

    @property
    def object_store(self) -> ObjectStoreSettings:
        """The run's own S3 server (started only for a lake on the object store)."""
        return ObjectStoreSettings(
            port=self.settings.object_store_port, data_dir=self.settings.state_dir / "object-store"
        )

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
