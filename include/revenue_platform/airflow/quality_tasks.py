"""The revenue quality gate as a reusable Airflow task group: `quality_gate(...)`.

`revenue_quality_checks` uses it, and so can any DAG that must not promote or publish a deployment
whose gold table fails the checks (blue-green replay, reprocessing): put `quality_gate("green")`
before the step it guards. Every argument may be a plain value, a Jinja string or an XComArg; what is
left as None is resolved at run time from the run's params (same names as the
`revenue_quality_checks` trigger form), the triggering gold asset event and the run's data interval.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from airflow.sdk import get_current_context, task, task_group

from revenue_platform.airflow.assets import DEPLOYMENT_EXTRA_KEY, RANGE_END_KEY, RANGE_START_KEY
from revenue_platform.airflow.dag_defaults import fail_without_retry
from revenue_platform.errors import ConfigError, NoLiveDeploymentYet
from revenue_platform.quality.config import QualityConfig, default_lake_root
from revenue_platform.quality.errors import QualityCheckFailed, QualityInputMissing
from revenue_platform.times import parse_utc

if TYPE_CHECKING:
    from revenue_platform.registry import DeploymentRecord
    from spark_apps.contract.config import StreamingAppConfig

log = logging.getLogger(__name__)

# Runs without a data interval and without a range in their asset events check the hour before the
# run was created.
DEFAULT_INTERVAL: Final = timedelta(hours=1)

# How long the checks of a running deployment wait for its app to finalize the checked windows.
APP_WAIT_S: Final = 300.0

# Failed expectations, missing tables and bad arguments do not change on a retry.
NO_RETRY_ON_VERDICT = fail_without_retry(QualityCheckFailed, QualityInputMissing, ConfigError)


def rewritten_ranges(context: Any) -> list[tuple[datetime, datetime]]:
    """The ranges the triggering gold asset events say were rewritten, as the fewest spans of at most
    MAX_QUALITY_SPAN that cover them, in time order; [] when no event names a range.

    A reprocess or backfill run names its range in the event (`gold_asset_extra(range_start=...,
    range_end=...)`). Several queued events (a backfill's runs) are merged where they fit one span, so
    one check covers many rewritten hours; events far apart stay apart (two events 325 days apart
    were one 325-day span, read into memory). An event whose own range is empty or longer than
    MAX_QUALITY_SPAN (an event posted through the API with `range_start: 2000-01-01`) is refused,
    naming it: nothing is read.
    """
    from revenue_platform.forms import MAX_QUALITY_SPAN

    events = context.get("triggering_asset_events") or {}
    ranges = sorted(
        (
            parse_utc(event.extra[RANGE_START_KEY], RANGE_START_KEY),
            parse_utc(event.extra[RANGE_END_KEY], RANGE_END_KEY),
        )
        for asset_events in events.values()
        for event in asset_events
        if event.extra and event.extra.get(RANGE_START_KEY) and event.extra.get(RANGE_END_KEY)
    )
    spans: list[tuple[datetime, datetime]] = []
    for start, end in ranges:
        if not start < end <= start + MAX_QUALITY_SPAN:
            raise ConfigError(
                f"a triggering asset event names the range {start.isoformat()}..{end.isoformat()}: a "
                f"rewritten range is non-empty and at most {MAX_QUALITY_SPAN} (the reprocess form's "
                "bound); check a longer one as several runs of revenue_quality_checks"
            )
        if spans and end <= spans[-1][0] + MAX_QUALITY_SPAN:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


def resolve_interval(
    context: Any, interval_start: Any = None, interval_end: Any = None
) -> tuple[datetime, datetime]:
    """Explicit bounds, else the params' interval_start/interval_end, else the run's data interval.

    A run with none of these ends at its `run_after` (when it was created, stable across retries;
    never the wall clock at check time) and spans DEFAULT_INTERVAL.
    """
    params = context.get("params") or {}
    start = interval_start if interval_start is not None else params.get("interval_start")
    end = interval_end if interval_end is not None else params.get("interval_end")
    if end is None:
        end = context.get("data_interval_end") or context["dag_run"].run_after
    end_time = parse_utc(end, "interval_end")
    if start is None:
        data_start = context.get("data_interval_start")
        use_data_interval = (
            data_start is not None and interval_end is None and params.get("interval_end") is None
        )
        start = data_start if use_data_interval else end_time - DEFAULT_INTERVAL
    return parse_utc(start, "interval_start"), end_time


def intervals_to_check(
    context: Any, interval_start: Any = None, interval_end: Any = None
) -> list[tuple[datetime, datetime]]:
    """What one run checks: the ranges its triggering asset events rewrote (`rewritten_ranges`;
    quality after a rewrite checks what was rewritten, however old), unless bounds are given
    explicitly or in the params; else its one interval (`resolve_interval`). Every interval is
    non-empty and at most MAX_QUALITY_SPAN, whichever way the run was triggered: a check loads its
    interval's bronze into memory."""
    from revenue_platform.forms import validate_quality_interval

    params = context.get("params") or {}
    given = (interval_start, interval_end, params.get("interval_start"), params.get("interval_end"))
    rewritten = rewritten_ranges(context) if all(bound is None for bound in given) else []
    intervals = rewritten or [resolve_interval(context, interval_start, interval_end)]
    for start, end in intervals:
        validate_quality_interval(start, end)
    return intervals


def resolve_deployment(context: Any, deployment_id: str | None = None) -> str:
    """Explicit id, else the one named by a triggering gold asset event, else params, else the live one.

    Raises NoLiveDeploymentYet when none of them names a deployment (a fresh stack).
    """
    if deployment_id:
        return deployment_id
    events = context.get("triggering_asset_events") or {}
    named = {
        event.extra.get(DEPLOYMENT_EXTRA_KEY)
        for asset_events in events.values()
        for event in asset_events
        if event.extra and event.extra.get(DEPLOYMENT_EXTRA_KEY)
    }
    if len(named) == 1:
        return str(named.pop())
    if len(named) > 1:
        log.warning("Asset events name several deployments %s; using the params' deployment", sorted(named))
    params = context.get("params") or {}
    if params.get("deployment_id"):
        return str(params["deployment_id"])
    from revenue_platform.registry import resolve_live_deployment

    # Readers resolve "live" through the registry's one function; a fresh stack has none yet.
    live = resolve_live_deployment(params.get("lake_root"))
    if live is None:
        raise NoLiveDeploymentYet(
            "no deployment is live yet, so there is no gold table to check: deploy one "
            "(deploy_streaming_app, or `make demo`) and make it live, or name deployment_id in the "
            "trigger form"
        )
    return live


def registered_deployment(lake_root: str, deployment_id: str) -> DeploymentRecord:
    """The deployment's registry row: its registered config's window geometry and tables are what is
    checked, and its desired state says whether an app may still be writing them."""
    from revenue_platform.registry import DeploymentRegistry

    return DeploymentRegistry(lake_root).registered(
        deployment_id, "the checks read a deployment's window geometry and tables from its registered config"
    )


def wait_for_the_app(record: DeploymentRecord, app: StreamingAppConfig, interval_end: datetime) -> None:
    """Give a running app time to write the windows the checks reconcile (ending by interval end minus
    the watermark delay): at the top of the hour the app may still be a batch or two behind, and
    comparing then would report a difference that is only latency. Bounded: an app that is down or far
    behind gets the checks as gold is, and they say what is missing."""
    from revenue_platform.registry.models import DesiredState, ObservedState
    from revenue_platform.streaming.finality import read_progress, wait_for_final_windows
    from spark_apps.contract.config_rules import interval_seconds
    from spark_apps.contract.naming import REVENUE_QUERY_ROLE

    if record.desired_state != DesiredState.RUNNING.value:
        return
    if record.observed_state not in (ObservedState.RUNNING.value, ObservedState.STARTING.value):
        # Dead, failed or given up on by the supervisor: no app will write anything meanwhile.
        log.info("%s is %s: checking gold as it is", record.deployment_id, record.observed_state)
        return
    progress_file = app.names.progress_file(REVENUE_QUERY_ROLE)
    if not read_progress(progress_file):
        log.info("%s has published no progress yet: checking gold as it is", record.deployment_id)
        return
    lateness = timedelta(seconds=interval_seconds(app.window.watermark))
    if not wait_for_final_windows(progress_file, interval_end - lateness, lateness, APP_WAIT_S):
        log.warning("%s has not finalized the checked windows: checking gold as it is", record.deployment_id)


def check_revenue_quality(
    deployment_id: str | None = None,
    interval_start: Any = None,
    interval_end: Any = None,
    thresholds: dict[str, Any] | None = None,
    lake_root: str | None = None,
) -> dict[str, Any]:
    """Body of the gate task: resolve arguments from the running context, run the checks, log, return."""
    from revenue_platform.airflow.params import run_request
    from revenue_platform.paths import require_inside_lake
    from revenue_platform.quality.request import THRESHOLD_PARAMS, QualityRequest
    from revenue_platform.quality.runner import data_docs_link, run_revenue_checks

    context = get_current_context()
    params = context.get("params") or {}
    # The form's values are bounded before any of them is used (the lake root names the registry the
    # live deployment is read from, so it is confined first).
    form = run_request(QualityRequest.from_params, context)
    if form.lake_root is not None:
        require_inside_lake(form.lake_root, default_lake_root(), "lake_root")
    try:
        deployment = resolve_deployment(context, deployment_id)
    except NoLiveDeploymentYet as nothing:
        from airflow.sdk.exceptions import AirflowSkipException

        # The hourly run at the first start of a stack: skipped (not failed), the log says why.
        raise AirflowSkipException(str(nothing)) from nothing
    # Each interval spans at most a day (bronze of an interval is loaded into memory), however the
    # run was triggered; a run an asset's events triggered checks each range they rewrote.
    intervals = intervals_to_check(context, interval_start, interval_end)
    overrides = {name: params.get(name) for name in THRESHOLD_PARAMS} | (thresholds or {})
    root = lake_root or form.lake_root or default_lake_root()
    record = registered_deployment(root, deployment)
    app = record.app_config()
    config = QualityConfig.from_app_config(app).with_overrides(overrides)
    wait_for_the_app(record, app, intervals[-1][1])
    dag_run = context["dag_run"]
    reports = []
    for number, (start, end) in enumerate(intervals, start=1):
        # One results row and one Data Docs page per interval: the run's name says which.
        suffix = f"__{number}" if len(intervals) > 1 else ""
        run_name = f"{deployment}__{dag_run.dag_id}__{dag_run.run_id}{suffix}"
        log.info(
            "Quality gate for deployment %r over [%s, %s) (%d of %d), lake %s",
            deployment,
            start,
            end,
            number,
            len(intervals),
            root,
        )
        try:
            report = run_revenue_checks(
                deployment, root, start, end, config, run_name=run_name, tables=app.names
            )
        except QualityCheckFailed as failed:
            log.error("Data Docs (open in a browser): %s", data_docs_link(failed.report.data_docs_index))
            raise
        log.info("Data Docs (open in a browser): %s", data_docs_link(report.data_docs_index))
        reports.append(report.to_dict())
    # The last interval's report, as a run of one interval returns it, and every interval's.
    return {**reports[-1], "intervals": reports} if len(reports) > 1 else reports[0]


def quality_gate(
    deployment_id: Any = None,
    *,
    interval_start: Any = None,
    interval_end: Any = None,
    thresholds: dict[str, Any] | None = None,
    lake_root: Any = None,
    group_id: str = "quality_gate",
) -> Any:
    """A task group whose task fails (no retry) when the revenue checks fail; returns the TaskGroup.

    Downstream tasks of the group run only when every expectation passed; the task's XCom is the
    report (`QualityReport.to_dict()`), including `data_docs_index`.
    """

    @task_group(group_id=group_id)
    def gate() -> None:
        @task(task_id="check_revenue_quality", multiple_outputs=False, retry_policy=NO_RETRY_ON_VERDICT)
        def check(
            deployment_id: str | None,
            interval_start: Any,
            interval_end: Any,
            thresholds: dict[str, Any] | None,
            lake_root: str | None,
        ) -> dict[str, Any]:
            return check_revenue_quality(deployment_id, interval_start, interval_end, thresholds, lake_root)

        check(deployment_id, interval_start, interval_end, thresholds, lake_root)

    return gate()
