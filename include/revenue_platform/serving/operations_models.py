"""The JSON the operations view answers with (`serving.operations_view`): one pydantic model per response.

Field docs are the API's documentation (FastAPI shows them in the app's OpenAPI schema). Money is
`Decimal` and a decimal string in JSON; times are UTC.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from pydantic import BaseModel, Field

from revenue_platform.serving.operations_state import RatesState, Role


class DeploymentStatus(BaseModel):
    """One deployment as an operator needs to see it."""

    deployment_id: str
    colour: str
    role: Role
    """live: readers use its output; outgoing: was live and runs on since the pointer moved away (a
    replay's grace period, or after a rollback); candidate: desired running, not live since its deploy
    (a replay's green); stopped: neither."""
    role_note: str | None = None
    """Since when it is live, or until when it was (outgoing)."""
    app_version: str
    desired_state: str
    observed_state: str
    is_live: bool
    restarts: int
    """Supervisor restarts since the last deploy."""
    last_error: str | None = None
    heartbeat_at: datetime | None = None
    offsets_behind_latest: int | None = None
    """Revenue query's offsets behind the latest Kafka offsets (the app's lag)."""
    rates_state: RatesState = "none"
    """current: the rates below are of a batch that ended less than `rates_current_for_s` ago; idle: the
    app found nothing new to read since its last batch; stale: no batch and no idle report for longer
    than that; none: no batch yet. Rates are null unless current."""
    rates_age_s: float | None = None
    """Seconds since the last batch ended."""
    rates_current_for_s: float
    """3 trigger intervals of the deployment, at least 30 s."""
    input_rows_per_second: float | None = None
    """Of the last batch, like `processed_rows_per_second`; null when Spark did not measure it (the first
    batch after a start)."""
    processed_rows_per_second: float | None = None
    last_batch_id: int | None = None
    last_batch_at: datetime | None = None
    """When the last batch started (Spark's batch timestamp)."""
    last_batch_ended_at: datetime | None = None
    """When it ended and its output was committed: what `rates_age_s` counts from."""
    last_batch_input_rows: int | None = None


class ApprovalRequest(BaseModel):
    """A blue-green replay whose green passed every gate and waits for a human to approve the switch."""

    green_deployment_id: str
    since: datetime
    requested_by: str
    """The audit actor of the replay run (DAG run and triggering user)."""
    dag_id: str | None
    run_id: str | None
    approval_page: str | None
    """Where to approve or reject it in the Airflow UI, relative to the UI's base URL (the view's page
    links to `../<approval_page>`); None when the run is not known (a replay of another Airflow)."""


class DeploymentsResponse(BaseModel):
    live_deployment_id: str | None
    deployments: list[DeploymentStatus]
    awaiting_approval: list[ApprovalRequest] = Field(default_factory=list)


class QualityCheck(BaseModel):
    check: str
    suite: str
    dataset: str
    success: bool
    element_count: int | None = None
    unexpected_count: int | None = None
    observed: str | None = None
    failing_keys_sample: list[str] = Field(default_factory=list)


class QualityRun(BaseModel):
    run_id: str
    deployment_id: str
    checked_at: datetime
    interval_start: datetime
    interval_end: datetime
    passed: int
    failed: int
    checks: list[QualityCheck]


class QualityResponse(BaseModel):
    latest: QualityRun | None
    data_docs_url: str
    """Relative URL of the Data Docs index served by this app; before the first quality run has built
    the site, that index says so and how to run one."""
    deployment_id: str | None = None
    """Whose runs: the one asked for, else the live deployment; null while nothing is live."""
    next_scheduled_at: datetime
    """When the next hourly run of `dag_id` is due (it checks the deployment live then, over the hour
    before)."""
    no_run_reason: str | None = None
    """Why there is no run of the deployment yet, and what to do meanwhile; null once there is one."""
    dag_id: str
    dag_page: str
    """The DAG's page in the Airflow UI, relative to the UI's base URL (runs queued or running, Trigger)."""


class LiveSwitch(BaseModel):
    at: datetime
    from_deployment: str | None
    to_deployment: str
    actor: str
    """Who switched: the DAG run and the user who triggered it, or a command (make demo)."""
    reason: str | None
    approved_by: str | None = None
    """The user who approved a blue-green promotion in its approval step."""
    approval_required: bool | None = None
    """Whether the promotion asked for approval; null when the switch was no blue-green promotion (a
    rollback, the demo's first deployment)."""


class LiveHistoryResponse(BaseModel):
    live_deployment_id: str | None
    switches: list[LiveSwitch]
    """Newest first."""


class StoreOption(BaseModel):
    location_id: str
    city: str | None


class StoresResponse(BaseModel):
    deployment_id: str | None
    stores: list[StoreOption]


class RevenuePoint(BaseModel):
    window_start: datetime
    window_end: datetime
    order_type: str
    order_count: int
    revenue: Decimal
    """DECIMAL(18,2) from gold; serialized as a decimal string."""
    x: float
    """Where the window sits on the chart's time axis: 0 at the oldest window start of the series, 1 at the
    newest, in proportion to time (a gap in the data is a gap on the axis)."""


class AxisTick(BaseModel):
    at: datetime
    x: float
    """On the same scale as `RevenuePoint.x`."""
    label: str
    """UTC, as short as the span allows (`HH:MM:SS`, `HH:MM`, with the date across midnight)."""


class RevenueTotal(BaseModel):
    order_count: int
    revenue: Decimal
    """The exact sum of the windows' DECIMAL(18,2) revenue; serialized as a decimal string."""
    windows: int
    """Gold rows summed (one per window, order type and store)."""


class RevenueTotals(BaseModel):
    by_order_type: dict[str, RevenueTotal]
    """GENERAL and RESTAURANT always (zero when none), then any other order type gold holds."""
    overall: RevenueTotal


class RevenueSeriesResponse(BaseModel):
    deployment_id: str
    location_id: str
    points: list[RevenuePoint]
    """Oldest window first: the store's windows starting in [range_start, range_end)."""
    window_limit: int
    """The range is this many window slides, the newest holding gold's newest window."""
    window_slide_s: float
    """Seconds between window starts (the deployment's registered window slide, or size)."""
    range_start: datetime | None = None
    """The oldest window start the range holds; null while gold has no window."""
    range_end: datetime | None = None
    """One slide after gold's newest window start (exclusive)."""
    axis_ticks: list[AxisTick] = Field(default_factory=list)
    store_totals: RevenueTotals
    """Of the store's windows in the range: what the chart shows."""
    all_stores_totals: RevenueTotals
    """Of every store's windows in the same range."""
