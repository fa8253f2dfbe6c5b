"""Prometheus metrics of the streaming deployments, read from the files they write at each scrape.

`StreamingMetricsCollector` is a prometheus_client Collector: every scrape reads the deployment registry
(which deployments should run, which one is live, which one is outgoing after a switch), each running
deployment's progress file and driver heartbeat (what `spark_apps.engine.observability` and the driver's
fencing loop write under `DeploymentNames.progress_dir`) and the latest quality run of each, and turns
them into metric families labelled by deployment and role. Nothing is cached between scrapes, so a value
is never older than the file it comes from. `create_metrics_app` serves it as `GET /metrics`; the plugin
`plugins/revenue_metrics.py` mounts that on the Airflow API server at `/revenue-metrics`. The names,
labels and the alert rules on them (include/monitoring/alert_rules.yml) are described in
docs/operations.md, "Metrics and alerts".
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from revenue_platform.bluegreen.triggers import replays_in_flight
from revenue_platform.lake_maintenance import maintenance_record
from revenue_platform.lake_storage import open_lake_table, read_side_file
from revenue_platform.paths import lake_root as default_lake_root
from revenue_platform.registry import DeploymentRegistry, DesiredState
from revenue_platform.serving.driver_status import driver_heartbeat
from revenue_platform.serving.operations_state import batch_rates, deployment_role, parse_time
from revenue_platform.serving.operations_view import revenue_progress, trigger_interval_s
from spark_apps.contract.delta_reads import read_delta
from spark_apps.contract.naming import DeploymentNames
from spark_apps.contract.records import DEAD_LETTERS_OF_KIND, DLQ_REASON_KINDS

LOG = logging.getLogger(__name__)
METRICS_URL_PREFIX = "/revenue-metrics"
"""Where the plugin mounts the app on the Airflow API server: Prometheus scrapes `<prefix>/metrics`."""
LABELS = ["deployment", "role"]
"""Every per-deployment metric's labels; `revenue_stream_deployment_info` adds colour, version, state."""
DROP_REASONS = {"late": "orders_late", "duplicate": "orders_duplicate"}
"""`reason` label of revenue_stream_orders_dropped_total -> the app's counter of those orders."""


@dataclass(frozen=True)
class DeploymentSample:
    """What one running deployment's files and registry row say at scrape time."""

    deployment_id: str
    role: str
    """As the operations view names it (`operations_state.deployment_role`): live, outgoing (was live and
    runs on after the pointer moved away: a replay's grace period, or after a rollback) or candidate."""
    colour: str
    app_version: str
    observed_state: str
    restarts: int
    heartbeat_at: datetime | None
    progress: Mapping[str, Any]
    trigger_interval_s: float = 1.0
    awaiting_approval_since: datetime | None = None
    """When its replay (a release's green) passed every gate and began to wait for a human's approval."""

    @property
    def labels(self) -> list[str]:
        return [self.deployment_id, self.role]


@dataclass(frozen=True)
class QualitySample:
    """The latest quality run of one deployment."""

    checked_at: datetime
    passed: int
    failed: int


# --- reading ----------------------------------------------------------------------------------
def read_samples(registry: DeploymentRegistry) -> list[DeploymentSample]:
    """Every deployment that should run (desired state running), by id."""
    running = [r for r in registry.deployments() if r.desired_state == DesiredState.RUNNING.value]
    running_ids = [r.deployment_id for r in running]
    # Only the running deployments' events (their roles, their replays): a scrape never reads the whole
    # audit log, which grows with every deploy, restart and switch.
    events = registry.events(involving=running_ids)
    awaiting = {
        replay.green: replay.last_at
        for replay in replays_in_flight(events, running_ids)
        if replay.awaiting_approval
    }
    samples = []
    for record in running:
        names = DeploymentNames(record.lake_root or registry.lake_root, record.deployment_id)
        samples.append(
            DeploymentSample(
                deployment_id=record.deployment_id,
                role=deployment_role(record, events).role,
                colour=record.colour,
                app_version=record.app_version,
                observed_state=record.observed_state,
                restarts=len(record.restarts),
                heartbeat_at=parse_time(driver_heartbeat(names)),
                progress=revenue_progress(record, registry.lake_root),
                trigger_interval_s=trigger_interval_s(record),
                awaiting_approval_since=awaiting.get(record.deployment_id),
            )
        )
    return sorted(samples, key=lambda sample: sample.deployment_id)


def read_latest_quality_runs(lake_root: str) -> dict[str, QualitySample]:
    """The newest quality run of every deployment that has one (by check time, then run id)."""
    from revenue_platform.quality.results import results_table_path

    table = open_lake_table(results_table_path(lake_root))
    if table is None:
        return {}
    rows = read_delta(table, ["run_id", "deployment_id", "checked_at", "success"]).to_pylist()
    newest: dict[str, tuple[datetime, str]] = {}
    checks: dict[str, list[bool]] = {}
    for row in rows:
        key = (row["checked_at"], row["run_id"])
        newest[row["deployment_id"]] = max(newest.get(row["deployment_id"], key), key)
        checks.setdefault(row["run_id"], []).append(bool(row["success"]))
    return {
        deployment_id: QualitySample(checked_at, sum(checks[run_id]), checks[run_id].count(False))
        for deployment_id, (checked_at, run_id) in newest.items()
    }


# --- metric families (pure: samples and a clock in, families out) -----------------------------
def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _timestamp(value: Any) -> float | None:
    moment = parse_time(value)
    return moment.timestamp() if moment is not None else None


def _age(value: Any, now: datetime) -> float | None:
    moment = parse_time(value)
    return (now - moment).total_seconds() if moment is not None else None


def _rate(sample: DeploymentSample, now: datetime, processed: bool) -> float | None:
    """The last batch's rate while it still says what the app does (the operations view's rule,
    `operations_state.batch_rates`), 0 while the app is idle, and nothing once it is stale."""
    rates = batch_rates(sample.progress, sample.trigger_interval_s, now)
    if rates.state == "idle":
        return 0.0
    return rates.processed_rows_per_second if processed else rates.input_rows_per_second


def _milliseconds(value: Any) -> float | None:
    number = _number(value)
    return number / 1000.0 if number is not None else None


Reading = Callable[[DeploymentSample, datetime], float | None]
GAUGES: tuple[tuple[str, str, Reading], ...] = (
    (
        "revenue_stream_desired_running",
        "1 for every deployment the registry wants running.",
        lambda s, n: 1.0,
    ),
    (
        "revenue_stream_heartbeat_age_seconds",
        "Seconds since the driver's last heartbeat (rewritten every few seconds, idle or not).",
        lambda s, now: (now - s.heartbeat_at).total_seconds() if s.heartbeat_at else None,
    ),
    (
        "revenue_stream_consumer_lag_records",
        "Records the furthest-behind Kafka partition held past the offsets gold reflects "
        "(as of the last batch; 0 once the app reported itself idle).",
        lambda s, n: _number(s.progress.get("max_offsets_behind_latest")),
    ),
    (
        "revenue_stream_consumer_lag_seconds",
        "At most this many seconds of Kafka's records are not in gold yet: the time since the app last had "
        "read every record Kafka held (a batch that reached the latest offsets, or an idle report).",
        lambda s, now: _age(s.progress.get("kafka_read_all_at"), now),
    ),
    (
        "revenue_stream_input_rows_per_second",
        "Records per second arriving in the last batch's trigger interval; 0 while idle, absent once the "
        "last batch is older than 3 trigger intervals (at least 30 s) without an idle report.",
        lambda s, now: _rate(s, now, processed=False),
    ),
    (
        "revenue_stream_processed_rows_per_second",
        "Records per second the last batch processed; 0 while idle, absent once stale (as the input rate).",
        lambda s, now: _rate(s, now, processed=True),
    ),
    (
        "revenue_stream_batch_duration_seconds",
        "Wall time of the last batch (Spark's triggerExecution).",
        lambda s, n: _milliseconds(s.progress.get("batch_duration_ms")),
    ),
    (
        "revenue_stream_last_batch_timestamp_seconds",
        "Unix time the last batch started.",
        lambda s, n: _timestamp(s.progress.get("batch_timestamp")),
    ),
    (
        "revenue_stream_watermark_timestamp_seconds",
        "Unix time of the watermark: windows ending at or before it are final.",
        lambda s, n: _timestamp(s.progress.get("watermark")),
    ),
    (
        "revenue_stream_event_time_delay_seconds",
        "Wall clock minus watermark: how far the final numbers trail real time.",
        lambda s, now: _age(s.progress.get("watermark"), now),
    ),
    (
        "revenue_stream_caught_up_timestamp_seconds",
        "Unix time the app last found nothing new in Kafka (every record Kafka held then is in gold).",
        lambda s, n: _timestamp(s.progress.get("caught_up_at")),
    ),
    (
        "revenue_stream_history_pending",
        "1 while a replay still reads its history from bronze (no Kafka lag yet), else 0.",
        lambda s, n: 1.0 if s.progress.get("history_pending") else 0.0 if s.progress else None,
    ),
    (
        "revenue_stream_state_open_windows",
        "Window totals the driver holds in state (open windows, evicted once the watermark closes them).",
        lambda s, n: _number(s.progress.get("state_open_windows")),
    ),
    (
        "revenue_release_awaiting_approval_seconds",
        "Seconds this deployment (a release's green) has waited for a human to approve its promotion.",
        lambda s, now: (
            (now - s.awaiting_approval_since).total_seconds() if s.awaiting_approval_since else None
        ),
    ),
    (
        "revenue_stream_restarts",
        "Supervisor restarts since the last deploy.",
        lambda s, n: float(s.restarts),
    ),
)
COUNTERS: tuple[tuple[str, str, str], ...] = (
    (
        "revenue_stream_records_archived",
        "Records read from Kafka into bronze since the driver started.",
        "records_archived",
    ),
    (
        "revenue_stream_dead_letters",
        "Records sent to the dead-letter topic since the driver started.",
        "dead_letters",
    ),
    (
        "revenue_stream_windows_updated",
        "Window totals written to gold since the driver started.",
        "windows_updated",
    ),
)


def _info_family(samples: Iterable[DeploymentSample]) -> Metric:
    info = GaugeMetricFamily(
        "revenue_stream_deployment_info",
        "1 per running deployment, with its colour, app version and observed state.",
        labels=[*LABELS, "colour", "app_version", "observed_state"],
    )
    for s in samples:
        info.add_metric([*s.labels, s.colour, s.app_version, s.observed_state], 1.0)
    return info


def _counter_families(samples: list[DeploymentSample]) -> Iterator[Metric]:
    for name, documentation, key in COUNTERS:
        counter = CounterMetricFamily(name, documentation, labels=LABELS)
        for s in samples:
            value = _number((s.progress.get("counters") or {}).get(key))
            if value is not None:
                counter.add_metric(s.labels, value)
        yield counter
    dropped = CounterMetricFamily(
        "revenue_stream_orders_dropped",
        "Valid orders the app did not count since the driver started, by reason: late (event time at or "
        "before the watermark) or duplicate (an order id seen before).",
        labels=[*LABELS, "reason"],
    )
    for s in samples:
        for reason, key in DROP_REASONS.items():
            value = _number((s.progress.get("counters") or {}).get(key))
            if value is not None:
                dropped.add_metric([*s.labels, reason], value)
    yield dropped
    yield _dead_letters_by_reason(samples)


def _dead_letters_by_reason(samples: list[DeploymentSample]) -> Metric:
    """Every reason kind of every deployment whose driver counts them, 0 included (so `rate()` sees the
    first dead letter of a kind); none for a driver that counts only the total."""
    family = CounterMetricFamily(
        "revenue_stream_dead_letters_by_reason",
        "Records sent to the dead-letter topic since the driver started, by reason (the DLQ reason without "
        "its field name: missing_field, wrong_type, invalid_json, event_time_in_future, ...).",
        labels=[*LABELS, "reason"],
    )
    for s in samples:
        counters = s.progress.get("counters") or {}
        if not any(DEAD_LETTERS_OF_KIND.format(kind) in counters for kind in DLQ_REASON_KINDS):
            continue
        for kind in DLQ_REASON_KINDS:
            family.add_metric(
                [*s.labels, kind], _number(counters.get(DEAD_LETTERS_OF_KIND.format(kind))) or 0.0
            )
    return family


def _quality_families(
    samples: list[DeploymentSample], quality: Mapping[str, QualitySample]
) -> Iterator[Metric]:
    failed = GaugeMetricFamily(
        "revenue_quality_checks_failed",
        "Failed checks of the deployment's latest quality run.",
        labels=LABELS,
    )
    passed = GaugeMetricFamily(
        "revenue_quality_checks_passed",
        "Passed checks of the deployment's latest quality run.",
        labels=LABELS,
    )
    checked = GaugeMetricFamily(
        "revenue_quality_last_run_timestamp_seconds", "Unix time of the latest quality run.", labels=LABELS
    )
    for s in samples:
        run = quality.get(s.deployment_id)
        if run is not None:
            failed.add_metric(s.labels, float(run.failed))
            passed.add_metric(s.labels, float(run.passed))
            checked.add_metric(s.labels, run.checked_at.timestamp())
    yield from (failed, passed, checked)


def metric_families(
    samples: list[DeploymentSample], quality: Mapping[str, QualitySample], now: datetime
) -> Iterator[Metric]:
    """Every per-deployment family; a value the files do not hold (yet) is left out, never made up."""
    yield _info_family(samples)
    for name, documentation, reading in GAUGES:
        gauge = GaugeMetricFamily(name, documentation, labels=LABELS)
        for s in samples:
            value = reading(s, now)
            if value is not None:
                gauge.add_metric(s.labels, value)
        yield gauge
    yield _batch_steps_family(samples)
    yield from _counter_families(samples)
    yield from _quality_families(samples, quality)


def _batch_steps_family(samples: Iterable[DeploymentSample]) -> Metric:
    """The last batch's steps, as the app timed them (`batch_steps_ms` in its progress)."""
    family = GaugeMetricFamily(
        "revenue_stream_batch_step_seconds",
        "Wall time of each step of the last batch, label step: resume (only after a restart), "
        "validate_and_count, state, and the writes side_outputs, bronze and gold (which run side by side; "
        "gold's parts: revenue_topic, then gold_merge).",
        labels=[*LABELS, "step"],
    )
    for s in samples:
        steps = s.progress.get("batch_steps_ms")
        for step, milliseconds in steps.items() if isinstance(steps, Mapping) else ():
            seconds = _milliseconds(milliseconds)
            if seconds is not None:
                family.add_metric([*s.labels, str(step)], seconds)
    return family


def source_family(readable: Mapping[str, bool]) -> Metric:
    family = GaugeMetricFamily(
        "revenue_metrics_source_up",
        "1 when this scrape could read the source (registry, quality results), else 0.",
        labels=["source"],
    )
    for source, ok in readable.items():
        family.add_metric([source], 1.0 if ok else 0.0)
    return family


def maintenance_families(record: Mapping[str, Any] | None) -> Iterator[Metric]:
    """The last successful lake maintenance (`lake_maintenance.maintenance_record`): when it finished and
    what each table it maintained held then; nothing before its first run."""
    finished = GaugeMetricFamily(
        "revenue_lake_maintenance_last_success_timestamp_seconds",
        "Unix time the last successful maintain_lake run finished.",
    )
    files = GaugeMetricFamily(
        "revenue_lake_table_files",
        "Data files a lake table's snapshot references, after the last maintenance.",
        labels=["table", "deployment"],
    )
    size = GaugeMetricFamily(
        "revenue_lake_table_bytes",
        "Bytes of those files, after the last maintenance.",
        labels=["table", "deployment"],
    )
    at = _timestamp(record.get("finished_at")) if record else None
    if record and at is not None:
        finished.add_metric([], at)
        for table in record.get("tables") or []:
            labels = [str(table.get("kind", "")), str(table.get("deployment", ""))]
            for family, key in ((files, "files"), (size, "bytes")):
                value = _number(table.get(key))
                if value is not None:
                    family.add_metric(labels, value)
    yield from (finished, files, size)


# --- the collector and its app ----------------------------------------------------------------
class StreamingMetricsCollector(Collector):
    """Reads the registry, progress files and quality results at every scrape (see the module docstring)."""

    def __init__(self, lake_root: str | None = None, clock: Callable[[], datetime] | None = None) -> None:
        """`lake_root` defaults to the platform's (PLATFORM_LAKE_ROOT), per scrape."""
        self.lake_root = lake_root
        self.clock = clock or (lambda: datetime.now(UTC))

    def describe(self) -> Iterable[Metric]:
        # Nothing up front: registering must not read the lake (the plugin is imported by every
        # Airflow process).
        return []

    def collect(self) -> Iterable[Metric]:
        lake_root = self.lake_root or default_lake_root()
        samples: list[DeploymentSample] = []
        quality: dict[str, QualitySample] = {}
        readable = {"registry": True, "quality": True}
        try:
            samples = read_samples(DeploymentRegistry(lake_root))
        except Exception:  # a scrape must answer: the alert on revenue_metrics_source_up says why
            LOG.exception("metrics: could not read the deployment registry")
            readable["registry"] = False
        try:
            quality = read_latest_quality_runs(lake_root)
        except Exception:
            LOG.exception("metrics: could not read the quality results")
            readable["quality"] = False
        maintenance = None  # no record yet: no run yet, and the alert on the missing series says so
        try:
            maintenance = read_side_file(maintenance_record(lake_root))
        except Exception:
            LOG.exception("metrics: could not read the lake maintenance record")
        yield source_family(readable)
        yield from metric_families(samples, quality, self.clock())
        yield from maintenance_families(maintenance)


METRICS_TOKEN_ENV = "REVENUE_METRICS_TOKEN"
"""When set (on the Airflow API server), `/metrics` answers only `Authorization: Bearer <it>`: what
Prometheus sends with `authorization: {credentials_file: ...}` in its scrape config."""


def scrape_token(environ: Mapping[str, str] | None = None) -> str | None:
    """The token scrapes must present (METRICS_TOKEN_ENV), or None: the endpoint is public."""
    token = (os.environ if environ is None else environ).get(METRICS_TOKEN_ENV, "").strip()
    return token or None


def create_metrics_app(
    collector: StreamingMetricsCollector | None = None, token: str | None = None
) -> FastAPI:
    """`GET /metrics` in Prometheus' text format (OpenMetrics when the scraper asks for it).

    Public like any Prometheus endpoint unless `token` is given (the plugin passes METRICS_TOKEN_ENV):
    it holds deployment ids, versions, volumes, dead letters and rates, no paths, errors or revenue
    (docs/operations.md says how to keep it inside the network, or ask for the token)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector or StreamingMetricsCollector())
    app = FastAPI(title="Revenue platform metrics", version="1", docs_url=None, redoc_url=None)
    expected = f"Bearer {token}".encode() if token else None

    @app.get("/metrics", include_in_schema=False)
    def metrics(request: Request) -> Response:
        # Compared in constant time: the answer's timing says nothing about the token.
        presented = request.headers.get("authorization", "").encode()
        if expected is not None and not hmac.compare_digest(presented, expected):
            return Response(
                "a bearer token is required (the API server's REVENUE_METRICS_TOKEN)\n",
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
                media_type="text/plain",
            )
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encoder(registry), media_type=content_type)

    return app
