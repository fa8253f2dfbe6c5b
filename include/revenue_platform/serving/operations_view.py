"""The operations view: one page that shows what is running and whether its output can be trusted.

A FastAPI app (mounted by `plugins/revenue_operations_view.py` at `/revenue-ops` on the Airflow
API server, and embedded in the Airflow UI's nav as an external view) serving:

* `GET /` — a static page (`static/operations.html`, plain HTML + vanilla JS + inline SVG) that
  calls the JSON endpoints below with the browser's Airflow session cookie;
* `GET /api/deployments` — every registered deployment (live, outgoing, candidates, stopped) with
  colour, version, desired/observed state, restarts, the lag and the last batch's rates from the
  progress JSON the streaming app publishes (`DeploymentNames.progress_dir`; rates only while current,
  see `serving.operations_state`), the driver's heartbeat (`serving.driver_status`: rewritten every few
  seconds, also while idle), and the blue-green replays waiting for approval;
* `GET /api/quality` — the latest quality run's checks (of the live deployment unless one is
  named) with a link to the Great Expectations Data Docs, served by `GET /data-docs/...` (before the
  first quality run its index is a page that says how to run one, so the link is always there);
* `GET /api/live-history` — the live pointer's switches from the registry's audit log, newest first,
  with who approved each blue-green promotion;
* `GET /api/stores` and `GET /api/revenue?location_id=...` — the stores in the chart's range of the live
  gold table, and the revenue per window of one of them placed on a time axis, with the totals of that
  store and of every store over the range (`serving.operations_chart`); gold is read for that range
  only (`serving.operations_gold`), never its whole history.

Every endpoint except the page shell requires an authenticated Airflow user
(`revenue_platform.serving.auth.require_airflow_user`, answered by Airflow through the plugin's
`airflow.auth.with_airflow_auth`: the UI's `_token` cookie, which the browser
sends along with the iframe's same-origin requests, or a bearer token). Everything is read with
`deltalake`/`pyarrow` (no Spark), imported on first use so the plugin stays cheap to import.
Money is `Decimal` end to end and a decimal string in JSON. The responses are the models of
`serving.operations_models`; what the view concludes (roles, current rates, approvals) is
`serving.operations_state`.
"""

from __future__ import annotations

import logging
import mimetypes
import os
import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response

from revenue_platform.gold_table import Filter
from revenue_platform.lake_storage import open_lake_table, read_lake_file, read_side_file
from revenue_platform.paths import REPO_ROOT, state_dir
from revenue_platform.paths import lake_root as default_lake_root
from revenue_platform.quality.request import QUALITY_DAG_ID
from revenue_platform.registry import (
    DeploymentNotFoundError,
    DeploymentRecord,
    DeploymentRegistry,
    DesiredState,
    RegistryEvent,
)
from revenue_platform.serving.auth import AirflowUser, is_admin, require_airflow_user
from revenue_platform.serving.driver_status import driver_heartbeat
from revenue_platform.serving.operations_chart import (
    ChartRange,
    Total,
    chart_range,
    revenue_totals,
    time_axis_positions,
    time_axis_ticks,
)
from revenue_platform.serving.operations_chart import RevenueTotals as RevenueTotalsFacts
from revenue_platform.serving.operations_models import (
    ApprovalRequest,
    AxisTick,
    DeploymentsResponse,
    DeploymentStatus,
    LiveHistoryResponse,
    LiveSwitch,
    QualityCheck,
    QualityResponse,
    QualityRun,
    RevenuePoint,
    RevenueSeriesResponse,
    RevenueTotal,
    RevenueTotals,
    StoreOption,
    StoresResponse,
)
from revenue_platform.serving.operations_state import (
    LIVE_SWITCH_EVENT,
    ROLE_ORDER,
    batch_rates,
    deployment_role,
    live_since,
    next_scheduled_quality_run,
    parse_time,
    pending_approvals,
    rates_current_for_s,
    switch_approval,
    why_no_quality_run,
)
from spark_apps.contract.config_rules import interval_seconds
from spark_apps.contract.delta_reads import read_delta
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, DeploymentNames
from spark_apps.contract.object_store import is_object_store_root

if TYPE_CHECKING:
    from deltalake import DeltaTable

LOG = logging.getLogger(__name__)
MAX_CHART_WINDOWS = 2000
"""The most window starts the chart (and its totals) may span: what one refresh reads of gold is bounded by
it, times the stores and order types."""
DEFAULT_CHART_WINDOWS = 240
"""An hour of the shipped 15-second windows."""
NAV_ICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#1e63c6" '
    'stroke-width="2" stroke-linecap="round" stroke-linejoin="round"><path d="M3 3v18h18"/>'
    '<path d="M7 15l4-5 3 3 5-7"/></svg>'
)


# --- readers (plain functions: the tests call them through the app) ---------------------------
def _names(record: DeploymentRecord, lake_root: str) -> DeploymentNames:
    return DeploymentNames(record.lake_root or lake_root, record.deployment_id)


def revenue_progress(record: DeploymentRecord, lake_root: str) -> dict[str, Any]:
    """The revenue query's latest progress JSON (as `spark_apps.engine.observability` writes it), or {}."""
    names = _names(record, lake_root)
    return read_side_file(names.progress_file(REVENUE_QUERY_ROLE)) or {}


# An absolute path or file: URI in free text (a driver's log tail), not the "/" inside "rows/s".
_SERVER_PATH = re.compile(r"(?<![\w/.])(?:file:)?/[^\s'\"(),;]+")


def without_server_paths(text: str | None, roots: Sequence[str] = ()) -> str | None:
    """`text` with every absolute path, and every mention of one of `roots` (the lake as configured,
    relative or not, with spaces or not), replaced by `<path>`: what a non-admin may see of an error."""
    if text is None:
        return None
    known = {root for root in roots if len(root) > 1}
    known |= {os.path.abspath(root) for root in known}
    for root in sorted(known, key=len, reverse=True):  # the longest first: one inside another
        text = re.sub(r"(?:file:)?" + re.escape(root) + r"[^\s'\"(),;]*", "<path>", text)
    return _SERVER_PATH.sub("<path>", text)


def _private_roots(lake_root: str) -> list[str]:
    """Where the platform's files are, as they may appear in a driver's log: the lake, the state folder,
    the checkout and the home folder."""
    return [lake_root, str(state_dir()), str(REPO_ROOT), str(Path.home())]


def trigger_interval_s(record: DeploymentRecord) -> float:
    """The deployment's trigger interval as registered; the config's default for a row without one."""
    from spark_apps.contract.config import TriggerConfig

    interval = (record.config.get("trigger") or {}).get("interval") or TriggerConfig().interval
    try:
        return float(interval_seconds(str(interval)))
    except ValueError:
        return float(interval_seconds(TriggerConfig().interval))


def deployment_status(
    record: DeploymentRecord,
    lake_root: str,
    events: Sequence[RegistryEvent],
    now: datetime,
    show_paths: bool = False,
) -> DeploymentStatus:
    progress = revenue_progress(record, lake_root)
    restarts = record.restarts
    behind = progress.get("max_offsets_behind_latest")
    interval_s = trigger_interval_s(record)
    rates = batch_rates(progress, interval_s, now)
    role = deployment_role(record, events)
    return DeploymentStatus(
        deployment_id=record.deployment_id,
        colour=record.colour,
        role=role.role,
        role_note=role.note,
        app_version=record.app_version,
        desired_state=record.desired_state,
        observed_state=record.observed_state,
        is_live=record.is_live,
        restarts=len(restarts),
        # A driver's log tail names the lake, logs and Python files: for admins only (as in the API).
        last_error=(
            record.last_error
            if show_paths
            else without_server_paths(record.last_error, _private_roots(lake_root))
        ),
        # The driver's heartbeat (every few seconds, idle or not); the progress file only moves
        # when a batch ran, so it would call a healthy idle app minutes old.
        heartbeat_at=parse_time(driver_heartbeat(_names(record, lake_root))) or record.heartbeat_at,
        offsets_behind_latest=int(behind) if behind is not None else None,
        rates_state=rates.state,
        rates_age_s=rates.age_s,
        rates_current_for_s=rates_current_for_s(interval_s),
        input_rows_per_second=rates.input_rows_per_second,
        processed_rows_per_second=rates.processed_rows_per_second,
        last_batch_id=rates.batch_id,
        last_batch_at=parse_time(progress.get("batch_timestamp")),
        last_batch_ended_at=rates.batch_ended_at,
        last_batch_input_rows=rates.input_rows,
    )


def read_deployments(
    registry: DeploymentRegistry, now: datetime, show_paths: bool = False
) -> DeploymentsResponse:
    """Live first, then outgoing, candidates and stopped deployments; by id within each group; and the
    replays waiting for approval. Server paths in errors only with `show_paths` (an admin)."""
    records, events = registry.deployments(), registry.events()
    statuses = [deployment_status(r, registry.lake_root, events, now, show_paths) for r in records]
    statuses.sort(key=lambda s: (ROLE_ORDER[s.role], s.deployment_id))
    running = [r.deployment_id for r in records if r.desired_state == DesiredState.RUNNING.value]
    waiting = [
        ApprovalRequest(**asdict(pending), approval_page=pending.approval_page)
        for pending in pending_approvals(events, running)
    ]
    return DeploymentsResponse(
        live_deployment_id=registry.live_deployment(), deployments=statuses, awaiting_approval=waiting
    )


def read_live_history(registry: DeploymentRegistry) -> LiveHistoryResponse:
    events = registry.events()
    switches = []
    for event in events:
        if event.kind != LIVE_SWITCH_EVENT:
            continue
        approval = switch_approval(event, events)
        switches.append(
            LiveSwitch(
                at=event.at,
                from_deployment=event.from_value,
                to_deployment=event.to_value or event.deployment_id,
                actor=event.actor,
                reason=event.reason,
                approved_by=approval.approved_by,
                approval_required=approval.approval_required,
            )
        )
    switches.reverse()
    return LiveHistoryResponse(live_deployment_id=registry.live_deployment(), switches=switches)


# Always linked, also before the first quality run (the index then says how to run one); relative to
# the view's own page, so it never reveals where the lake lives on the server.
DATA_DOCS_INDEX_URL = "data-docs/index.html"


def data_docs_root(lake_root: str) -> Path:
    from revenue_platform.quality.runner import quality_root

    return quality_root(lake_root) / "data_docs"


def _data_docs_from_store(lake_root: str, file_path: str) -> Response:
    """A Data Docs file of a lake on an object store, read from the store (the site the checks copied
    there, whichever host ran them)."""
    from revenue_platform.quality.data_docs import NO_QUALITY_RUN_YET_PAGE
    from revenue_platform.quality.runner import data_docs_location

    relative = posixpath.normpath(file_path or "index.html")
    # Never read anything outside the Data Docs folder (`..`, an absolute path).
    if relative in (".", "") or relative.startswith(("/", "..")):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no Data Docs file {file_path!r}")
    body = read_lake_file(f"{data_docs_location(lake_root)}/{relative}")
    if body is None:
        if relative == "index.html":
            return HTMLResponse(NO_QUALITY_RUN_YET_PAGE)
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no Data Docs file {file_path!r}")
    return Response(body, media_type=mimetypes.guess_type(relative)[0] or "application/octet-stream")


def read_latest_quality(
    registry: DeploymentRegistry, deployment_id: str | None, now: datetime
) -> QualityResponse:
    """The latest run (by check time) of `deployment_id`, or of any deployment when None (nothing is live),
    and when the next hourly run is due; before the first such run, why there is none yet."""
    from revenue_platform.quality.results import results_table_path

    def answer(latest: QualityRun | None, no_run_reason: str | None = None) -> QualityResponse:
        return QualityResponse(
            latest=latest,
            data_docs_url=DATA_DOCS_INDEX_URL,
            deployment_id=deployment_id,
            next_scheduled_at=next_scheduled_quality_run(now),
            no_run_reason=no_run_reason,
            dag_id=QUALITY_DAG_ID,
            dag_page=f"dags/{QUALITY_DAG_ID}",
        )

    table = open_lake_table(results_table_path(registry.lake_root))
    where: list[Filter] = [("deployment_id", "=", deployment_id)] if deployment_id else []
    rows = read_delta(table, None, where).to_pylist() if table is not None else []
    if not rows:
        live = registry.live_deployment()
        went_live = live_since(deployment_id, registry.events()) if deployment_id else None
        reason = why_no_quality_run(now, deployment_id, live, went_live)
        return answer(None, reason)
    newest = max(rows, key=lambda r: (r["checked_at"], r["run_id"]))
    run_rows = [r for r in rows if r["run_id"] == newest["run_id"]]
    # Failures first: they are what an operator opens the view for.
    run_rows.sort(key=lambda r: (r["success"], r["suite"], r["check"]))
    checks = [
        QualityCheck(
            check=r["check"],
            suite=r["suite"],
            dataset=r["dataset"],
            success=r["success"],
            element_count=r["element_count"],
            unexpected_count=r["unexpected_count"],
            observed=r["observed"],
            failing_keys_sample=list(r["failing_keys_sample"] or []),
        )
        for r in run_rows
    ]
    passed = sum(1 for c in checks if c.success)
    latest = QualityRun(
        run_id=newest["run_id"],
        deployment_id=newest["deployment_id"],
        checked_at=newest["checked_at"],
        interval_start=newest["interval_start"],
        interval_end=newest["interval_end"],
        passed=passed,
        failed=len(checks) - passed,
        checks=checks,
    )
    return answer(latest)


def window_slide(record: DeploymentRecord) -> timedelta:
    """Between two window starts of the deployment: its registered window slide, or its size (tumbling)."""
    window = record.app_config().window
    return timedelta(seconds=interval_seconds(window.slide or window.size))


@dataclass(frozen=True)
class _ShownGold:
    """A deployment's gold table and the range of it the chart shows (None: no table or no window yet)."""

    table: DeltaTable | None
    shown: ChartRange | None
    slide: timedelta


def _shown_gold(registry: DeploymentRegistry, deployment_id: str, windows: int) -> _ShownGold:
    from revenue_platform.gold_table import open_gold
    from revenue_platform.serving.operations_gold import newest_window_start

    table_path = DeploymentNames(registry.lake_root, deployment_id).gold_revenue_table
    slide = window_slide(registry.get(deployment_id))
    table = open_gold(table_path)
    newest = newest_window_start(table) if table is not None else None
    shown = chart_range(newest, slide, windows) if newest is not None else None
    return _ShownGold(table, shown, slide)


def read_stores(
    registry: DeploymentRegistry, deployment_id: str | None, windows: int = DEFAULT_CHART_WINDOWS
) -> StoresResponse:
    """Stores with a window in the chart's range (the latest `windows` window starts of the deployment's
    gold), with the city of their latest window there."""
    from revenue_platform.serving.operations_gold import stores_in_range

    if deployment_id is None:
        return StoresResponse(deployment_id=None, stores=[])
    gold = _shown_gold(registry, deployment_id, windows)
    if gold.table is None or gold.shown is None:
        return StoresResponse(deployment_id=deployment_id, stores=[])
    stores = [
        StoreOption(location_id=location_id, city=city)
        for location_id, city in stores_in_range(gold.table, gold.shown)
    ]
    return StoresResponse(deployment_id=deployment_id, stores=stores)


def _totals(totals: RevenueTotalsFacts) -> RevenueTotals:
    def total(facts: Total) -> RevenueTotal:
        return RevenueTotal(order_count=facts.order_count, revenue=facts.revenue, windows=facts.windows)

    return RevenueTotals(
        by_order_type={order_type: total(t) for order_type, t in totals.by_order_type.items()},
        overall=total(totals.overall),
    )


def read_revenue_series(
    registry: DeploymentRegistry, deployment_id: str, location_id: str, limit: int
) -> RevenueSeriesResponse:
    """The store's windows (every order type) among the latest `limit` window starts of the deployment's
    gold, oldest first, placed on a time axis; the totals of the store and of every store over them."""
    from revenue_platform.serving.operations_gold import order_type_sums, store_windows

    gold = _shown_gold(registry, deployment_id, limit)
    rows = store_windows(gold.table, gold.shown, location_id) if gold.table and gold.shown else []
    sums = order_type_sums(gold.table, gold.shown) if gold.table and gold.shown else []
    rows.sort(key=lambda row: (row["window_start"], row["order_type"]))
    starts = [row["window_start"] for row in rows]
    points = [
        RevenuePoint(
            window_start=row["window_start"],
            window_end=row["window_end"],
            order_type=row["order_type"],
            order_count=row["order_count"],
            revenue=row["revenue"],
            x=x,
        )
        for row, x in zip(rows, time_axis_positions(starts), strict=True)
    ]
    return RevenueSeriesResponse(
        deployment_id=deployment_id,
        location_id=location_id,
        points=points,
        window_limit=limit,
        window_slide_s=gold.slide.total_seconds(),
        range_start=gold.shown.start if gold.shown else None,
        range_end=gold.shown.end if gold.shown else None,
        axis_ticks=[AxisTick(at=t.at, x=t.position, label=t.label) for t in time_axis_ticks(starts)],
        store_totals=_totals(
            revenue_totals((r["order_type"], r["order_count"], r["revenue"], 1) for r in rows)
        ),
        all_stores_totals=_totals(revenue_totals(sums)),
    )


# --- the app ----------------------------------------------------------------------------------
def operations_page_html() -> str:
    """The page shell (no data in it: the page fetches everything through the authenticated API)."""
    return resources.files("revenue_platform.serving").joinpath("static/operations.html").read_text()


# Every route but the page shell and its icon needs an Airflow user.
_AUTHENTICATED = [Depends(require_airflow_user)]
DeploymentQuery = Annotated[str | None, Query(description="default: the live deployment")]
ChartWindows = Annotated[
    int,
    Query(
        ge=1,
        le=MAX_CHART_WINDOWS,
        description="the chart's range: this many window starts, up to the newest window of gold",
    ),
]


def utc_now() -> datetime:
    return datetime.now(UTC)


def create_operations_app(lake_root: str | None = None, clock: Callable[[], datetime] = utc_now) -> FastAPI:
    """The operations view app; `lake_root` defaults to the platform's (PLATFORM_LAKE_ROOT), per request;
    `clock` tells how old a batch's rates are (tests pin it)."""
    app = FastAPI(
        title="Revenue operations view",
        description="Deployments, lag, quality checks, live pointer history and revenue per window.",
        version="1",
    )

    @app.exception_handler(ValueError)
    def bad_value(_request: Request, error: ValueError) -> JSONResponse:
        # E.g. a deployment_id that is not a valid id (spark_apps.contract.naming refuses it): the
        # caller's error.
        return JSONResponse({"detail": str(error)}, status_code=status.HTTP_400_BAD_REQUEST)

    @app.exception_handler(DeploymentNotFoundError)
    def not_registered(_request: Request, error: DeploymentNotFoundError) -> JSONResponse:
        # A deployment_id the registry does not know: its window geometry (and role) are unknown.
        return JSONResponse({"detail": str(error)}, status_code=status.HTTP_404_NOT_FOUND)

    app.include_router(_page_router())
    app.include_router(_api_router(lake_root, clock))
    app.include_router(_data_docs_router(lake_root))
    return app


def _page_router() -> APIRouter:
    """The page shell and its icon: public, they hold no data."""
    router = APIRouter()

    @router.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(operations_page_html())

    @router.get("/icon.svg", include_in_schema=False)
    def icon() -> Response:
        # Public like the page shell: the UI's nav loads it as an <img>.
        return Response(NAV_ICON_SVG, media_type="image/svg+xml")

    return router


def _registry(lake_root: str | None) -> DeploymentRegistry:
    return DeploymentRegistry(lake_root or default_lake_root())


def _live_or_404(lake_root: str | None, chosen: str | None) -> str:
    deployment_id = chosen or _registry(lake_root).live_deployment()
    if deployment_id is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no deployment is live; name one with deployment_id")
    return deployment_id


def _api_router(lake_root: str | None, clock: Callable[[], datetime]) -> APIRouter:
    """The JSON the page fetches: deployments, quality, live history, stores and revenue per window."""
    router = APIRouter()

    @router.get("/api/deployments")
    def deployments(user: AirflowUser) -> DeploymentsResponse:
        return read_deployments(_registry(lake_root), clock(), show_paths=is_admin(user))

    @router.get("/api/quality", dependencies=_AUTHENTICATED)
    def quality(deployment_id: DeploymentQuery = None) -> QualityResponse:
        registry = _registry(lake_root)
        return read_latest_quality(registry, deployment_id or registry.live_deployment(), clock())

    @router.get("/api/live-history", dependencies=_AUTHENTICATED)
    def live_history() -> LiveHistoryResponse:
        return read_live_history(_registry(lake_root))

    @router.get("/api/stores", dependencies=_AUTHENTICATED)
    def stores(
        deployment_id: DeploymentQuery = None, limit: ChartWindows = DEFAULT_CHART_WINDOWS
    ) -> StoresResponse:
        registry = _registry(lake_root)
        return read_stores(registry, deployment_id or registry.live_deployment(), limit)

    @router.get("/api/revenue", dependencies=_AUTHENTICATED)
    def revenue(
        location_id: Annotated[str, Query(min_length=1)],
        deployment_id: DeploymentQuery = None,
        limit: ChartWindows = DEFAULT_CHART_WINDOWS,
    ) -> RevenueSeriesResponse:
        chosen = _live_or_404(lake_root, deployment_id)
        return read_revenue_series(_registry(lake_root), chosen, location_id, limit)

    return router


def _data_docs_router(lake_root: str | None) -> APIRouter:
    """The quality checks' Data Docs pages, for signed-in users."""
    router = APIRouter()

    @router.get("/data-docs/{file_path:path}", dependencies=_AUTHENTICATED, include_in_schema=False)
    def data_docs(file_path: str) -> Response:
        from revenue_platform.quality.data_docs import NO_QUALITY_RUN_YET_PAGE

        lake = lake_root or default_lake_root()
        if is_object_store_root(lake):
            return _data_docs_from_store(lake, file_path)
        root = data_docs_root(lake).resolve()
        target = (root / (file_path or "index.html")).resolve()
        if target == root / "index.html" and not target.is_file():
            return HTMLResponse(NO_QUALITY_RUN_YET_PAGE)
        # Never serve anything outside the Data Docs folder (`..` in the path).
        if not target.is_relative_to(root) or not target.is_file():
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no Data Docs file {file_path!r}")
        return FileResponse(target)

    return router
