"""Control-plane side of batch reprocessing: what range a run covers and how the job is submitted.

The `reprocess_revenue` DAG stays thin: `plan_reprocessing` turns a run's data interval (or
the trigger form's explicit range) into the batch job's arguments, and
`summarize_reconciliation` reads the job's JSON report back for the task log and the
Asset event. The job itself is spark_apps/reprocess_revenue_job.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, Field, WithJsonSchema

from revenue_platform.errors import ConfigError, NoLiveDeploymentYet
from revenue_platform.forms import (
    EMPTY_IS_NONE,
    FORM_MODEL_CONFIG,
    ISO_DATETIME_PATTERN,
    MAX_DATETIME_TEXT,
    MAX_LIST_ITEMS,
    OptionalDeploymentId,
    iso_datetime,
    validated,
)
from revenue_platform.lake_storage import read_side_file, spark_object_store_access
from revenue_platform.paths import SPARK_APPS_DIR, require_inside_lake, state_dir
from revenue_platform.paths import lake_root as paths_lake_root
from revenue_platform.streaming.finality import windows_final
from revenue_platform.times import parse_utc
from spark_apps.contract.config_rules import MAX_ROOT_LENGTH
from spark_apps.contract.naming import LOCATION_ID_PATTERN, validate_location_id
from spark_apps.contract.object_store import is_object_store_root
from spark_apps.contract.side_files import object_key

if TYPE_CHECKING:
    from revenue_platform.registry import DeploymentRecord, DeploymentRegistry
    from spark_apps.contract.config import StreamingAppConfig

log = logging.getLogger(__name__)

REPROCESS_JOB = SPARK_APPS_DIR / "reprocess_revenue_job.py"
Source = Literal["auto", "kafka", "bronze"]
SOURCES: tuple[str, ...] = get_args(Source)
# One run recomputes its whole range in one Spark job; longer spans are backfills of hourly runs.
MAX_RANGE = timedelta(hours=24)
# The job's own session sets the UTC time zone (spark_apps.engine.session); the UI is off before it starts.
JOB_SPARK_CONF = {"spark.ui.enabled": "false"}


# The form's range ends: ISO text (the widget stays a text field: a range is typed, e.g. from a log).
RangeText = Annotated[
    str,
    Field(max_length=MAX_DATETIME_TEXT),
    AfterValidator(iso_datetime),
    WithJsonSchema({"type": "string", "maxLength": MAX_DATETIME_TEXT, "pattern": ISO_DATETIME_PATTERN}),
]
StoreId = Annotated[
    str,
    AfterValidator(validate_location_id),
    WithJsonSchema({"type": "string", "pattern": LOCATION_ID_PATTERN.pattern}),
]


class ReprocessRequest(BaseModel):
    """The reprocess_revenue trigger form, validated (the house pattern of `revenue_platform.forms`).
    `plan_reprocessing` then resolves the range against the run's data interval, the deployment and
    its registered config."""

    model_config = FORM_MODEL_CONFIG

    range_start: Annotated[RangeText | None, EMPTY_IS_NONE] = None
    """Ad-hoc range start (UTC ISO, e.g. 2026-11-22T09:00:00Z); empty = the run's data interval: for a
    run triggered now, the last complete hour (09:00-10:00 when triggered at 10:20), not the hour in
    progress. Reprocess the current hour by giving both ends."""
    range_end: Annotated[RangeText | None, EMPTY_IS_NONE] = None
    """Ad-hoc range end, exclusive (after the start, at most 24 h after it, aligned to the windows);
    empty = the run's data interval (see range_start)."""
    deployment_id: OptionalDeploymentId = None
    """Deployment to repair; empty = the live one (the run is skipped while none is live)."""
    source: Source = "auto"
    """auto: Kafka if it still holds the range, else bronze."""
    stores: list[StoreId] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    """Only these locationIds (e.g. store_1001); empty = every store."""
    repair: bool = True
    """Write the batch result to gold; off = report only."""
    lake_root: Annotated[str | None, EMPTY_IS_NONE] = Field(None, max_length=MAX_ROOT_LENGTH)
    """Lake root: the platform's lake or a folder inside it; empty = $PLATFORM_LAKE_ROOT or .local/lake."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> ReprocessRequest:
        """The request in a run's params; ConfigError names each bad field."""
        return validated(cls, params)


def resolve_range(
    request: ReprocessRequest, data_interval_start: Any, data_interval_end: Any
) -> tuple[datetime, datetime]:
    """The trigger form's explicit range when given, else the run's data interval; start < end."""
    start = data_interval_start if request.range_start is None else request.range_start
    end = data_interval_end if request.range_end is None else request.range_end
    if start is None or end is None:
        raise ConfigError("range_start/range_end are required for a run without a data interval")
    # Whole seconds: the range names report files and must align to the window size.
    begin = _form_time(start, "range_start").replace(microsecond=0)
    finish = _form_time(end, "range_end").replace(microsecond=0)
    if begin >= finish:
        raise ConfigError(f"range_start {begin.isoformat()} must be before range_end {finish.isoformat()}")
    return begin, finish


def _form_time(value: Any, field: str) -> datetime:
    from revenue_platform.forms import datetime_text

    moment = datetime_text(value, field)
    if moment is None:
        raise ConfigError(f"{field}: required for a run without a data interval")
    return moment


def form_lake_root(request: ReprocessRequest) -> str:
    """The form's lake root, confined to the platform's lake; empty means the platform's lake."""
    root = request.lake_root
    return require_inside_lake(paths_lake_root() if root is None else root, paths_lake_root(), "lake_root")


def report_path(lake_root: str, deployment_id: str, start: datetime, end: datetime) -> str:
    """Where the job writes the reconciliation report of one range (one file per range: reruns replace it):
    `<lake>/reports/reconciliation/<deployment>/<range>.json`, an object in the bucket for a lake on the
    object store (joined as text there: `Path` would turn `s3a://` into `s3a:/`)."""
    name = f"{start:%Y%m%dT%H%M%S}_{end:%Y%m%dT%H%M%S}.json"
    if is_object_store_root(lake_root):
        return "/".join([lake_root.rstrip("/"), "reports", "reconciliation", deployment_id, name])
    return str(Path(lake_root) / "reports" / "reconciliation" / deployment_id / name)


def plan_reprocessing(
    request: ReprocessRequest | Mapping[str, Any],
    data_interval_start: Any,
    data_interval_end: Any,
    live_deployment: str | None,
    registry: DeploymentRegistry | None = None,
) -> dict[str, Any]:
    """Everything `submit_reprocess_job` needs, validated before Spark starts.

    `request` is the run's form as the DAG's first step parsed it, or a caller's params, parsed here
    by the same model (`ReprocessRequest`): each field is checked once. The deployment's config
    (topics, tables, window geometry, validation rules) is its registered one: the form narrows the
    work (range, stores, source, report-only) but cannot redirect it. Raises NoLiveDeploymentYet when
    the form names no deployment and none is live (a fresh stack).
    """
    from revenue_platform.registry import DeploymentRegistry
    from spark_apps.contract.naming import REVENUE_QUERY_ROLE

    if not isinstance(request, ReprocessRequest):
        request = ReprocessRequest.from_params(request)
    start, end = resolve_range(request, data_interval_start, data_interval_end)
    if end - start > MAX_RANGE:
        raise ConfigError(
            f"range_start..range_end spans {end - start}, more than the {MAX_RANGE} one run may reprocess: "
            "split it, e.g. `airflow backfill create --dag-id reprocess_revenue --from-date ... "
            "--to-date ...` runs one hour per run"
        )
    deployment_id = _deployment_to_repair(request.deployment_id, live_deployment, start, end)
    lake_root = form_lake_root(request)
    registry = registry or DeploymentRegistry(lake_root)
    record = registry.registered(
        deployment_id,
        "reprocessing repairs a deployment the platform deployed, with its registered config",
    )
    config = record.app_config()
    _check_aligned(config, start, end)
    report = report_path(lake_root, deployment_id, start, end)
    config_file = write_job_config(record, report)
    object_store = spark_object_store_access(lake_root)
    args = ["--config", config_file]
    args += ["--from", start.isoformat(), "--to", end.isoformat(), "--source", request.source]
    args += ["--report", report]
    if not request.repair:
        args.append("--no-repair")
    if request.stores:
        args += ["--stores", ",".join(request.stores)]
    return {
        "deployment_id": deployment_id,
        "range_start": start.isoformat(),
        "range_end": end.isoformat(),
        "report_path": report,
        "progress_file": config.names.progress_file(REVENUE_QUERY_ROLE),
        "watermark": config.window.watermark,
        "spark_args": args,
        # For the submit task (template fields, stored and shown: nothing secret). A lake on the object
        # store adds S3A's jars and settings; its credentials reach only spark-submit's environment
        # (`object_store_credentials_environment`), never these.
        "lake_root": lake_root,
        "object_store_jars": list(object_store.jars),
        "spark_conf": {**JOB_SPARK_CONF, **driver_class_archive_conf(), **object_store.conf},
    }


def driver_class_archive_conf() -> dict[str, str]:
    """The job's driver (client mode: on the machine of the task) maps `make jvm`'s class archive and
    takes the JIT setting (`SPARK_DRIVER_JIT`)."""
    from spark_apps.engine.session import local_driver_java_options

    options = local_driver_java_options()
    return {"spark.driver.extraJavaOptions": options} if options else {}


def _deployment_to_repair(
    requested: str | None, live_deployment: str | None, start: datetime, end: datetime
) -> str:
    """The form's `deployment_id` (checked by the form's model), else the live deployment, validated.
    Raises NoLiveDeploymentYet when the form names none and none is live."""
    from spark_apps.contract.naming import validate_deployment_id

    deployment_id = requested or live_deployment
    if not deployment_id:
        raise NoLiveDeploymentYet(
            f"no deployment is live yet, so there is no gold table to repair for [{start.isoformat()}, "
            f"{end.isoformat()}): deploy one (deploy_streaming_app, or `make demo`) and make it live, or "
            "name deployment_id in the trigger form"
        )
    try:
        return validate_deployment_id(str(deployment_id))
    except ValueError as error:
        raise ConfigError(f"deployment_id: {error}") from error


def _check_aligned(config: StreamingAppConfig, start: datetime, end: datetime) -> None:
    """Both range ends on a window boundary: a repair rewrites whole windows."""
    from spark_apps.contract.config_rules import interval_seconds

    size = interval_seconds(config.window.size)
    for name, moment in (("range_start", start), ("range_end", end)):
        if int(moment.timestamp()) % size:
            raise ConfigError(
                f"{name} {moment.isoformat()} is not aligned to the {config.window.size} windows"
            )


def job_config_path(report: str) -> Path:
    """Where the job's config file goes: next to its report on a local lake; for a report on the object
    store, a local file under the state dir (`<state>/reprocess/<bucket>/<key>.config.json`), since
    spark-submit's driver runs on this host (client mode) and reads it from its disk."""
    if is_object_store_root(report):
        return state_dir() / "reprocess" / PurePosixPath(object_key(report)).with_suffix(".config.json")
    return Path(report).with_suffix(".config.json")


def write_job_config(record: DeploymentRecord, report: str) -> str:
    """The deployment's registered config as the job's config file (`job_config_path`); its path.

    JSON is YAML, so the job loads it like any config file; nothing of it goes on the command line.
    """
    path = job_config_path(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record.config, indent=2, sort_keys=True))
    return str(path)


def windows_closed(plan: dict[str, Any]) -> bool:
    """True once the app will never write the range's windows again, so a repair made now sticks
    (revenue_platform.streaming.finality: its watermark passed the range end, or on a quiet stream it
    had read all of Kafka a watermark delay after it). A plan without the deployment's watermark
    delay waits for the watermark alone."""
    from spark_apps.contract.config_rules import interval_seconds

    end = parse_utc(plan["range_end"], "range_end")
    lateness = timedelta(seconds=interval_seconds(plan["watermark"])) if plan.get("watermark") else None
    finality = windows_final(plan["progress_file"], end, lateness)
    if finality.final:
        log.info("The windows of %s up to %s are final: %s", plan["deployment_id"], end, finality.why)
    else:
        log.info("Waiting for %s: %s", plan["deployment_id"], finality.why)
    return finality.final


def spark_jars_csv(extra_jars: list[str] | None = None) -> str:
    """Comma-separated local connector jars for SparkSubmitOperator(jars=...), then `extra_jars` (S3A's,
    from the plan's `object_store_jars`, for a lake on the object store)."""
    from revenue_platform.spark_submit import spark_jars

    return ",".join([*spark_jars(), *(extra_jars or [])])


def object_store_credentials_environment(lake_root: str) -> dict[str, str]:
    """The object store's credentials as the variables S3A reads, for the submit task's spark-submit
    only ({} for a local lake). Not ``env_vars`` or ``conf``: those are rendered template fields,
    stored in the metadata DB and shown in the UI; not this process's environment, which a process
    running several tasks would keep (`kafka_connection.client_security_environment`)."""
    return dict(spark_object_store_access(lake_root).environment)


def spark_env() -> dict[str, str]:
    """Environment of the spark-submit process (SparkSubmitOperator adds it to the worker's)."""
    from revenue_platform.spark_submit import spark_python_env

    return spark_python_env()


def summarize_reconciliation(report_file: str) -> dict[str, Any]:
    """Read the job's report, log what it found and fixed, and return its summary."""
    report = read_side_file(report_file)
    if report is None:
        raise ConfigError(f"the reprocessing job wrote no readable report at {report_file}")
    fixed = report.pop("fixed_windows", [])
    log.info(
        "Reconciliation of %s [%s, %s) from %s: %d windows recomputed, "
        "%d missing, %d extra, %d different; %s",
        report["deployment_id"],
        report["range_start"],
        report["range_end"],
        report["source"],
        report["windows_recomputed"],
        report["missing"],
        report["extra"],
        report["different"],
        "gold repaired" if report["repaired"] else "gold unchanged",
    )
    for window in fixed[:50]:
        log.info(
            "  %-9s %s %s %s expected %s/%s gold %s/%s",
            window["status"],
            window["window_start"],
            window["location_id"],
            window["order_type"],
            window["expected_order_count"],
            window["expected_revenue"],
            window["actual_order_count"],
            window["actual_revenue"],
        )
    return {**report, "fixed_windows_sample": fixed[:20]}
