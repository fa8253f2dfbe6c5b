"""The revenue query API: the seed's interactive queries over the live deployment's gold output.

`create_app()` builds a FastAPI app that the plugin `plugins/revenue_query_api.py` mounts on the
Airflow API server under `/revenue`. Every route requires an authenticated Airflow user
(`serving.auth.require_airflow_user`, answered by Airflow's auth through the plugin's
`airflow.auth.with_airflow_auth`); the OpenAPI schema (`/revenue/openapi.json`) and the docs
page (`/revenue/docs`, Swagger UI served from local files by `serving.offline_docs`) are public.
Each request resolves the live deployment anew, so a live switch changes the next answer; gold is
read through the per-version cache in `serving.gold`.

Errors are `{"detail": "<what is wrong and what to do>"}`: 400 for bad values, 404 for an
unknown order type or location, 422 for a parameter of the wrong type (FastAPI's check), 401/403
from authentication, 503 while no deployment is live. No answer names a path on the server, except
`/v1/metadata/all` to an admin (`serving.auth.is_admin`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse

from revenue_platform.serving.auth import AirflowUser, is_admin, require_airflow_user
from revenue_platform.serving.gold import GoldSnapshot, NoLiveDeploymentError, read_live_gold
from revenue_platform.serving.metadata import deployments_metadata
from revenue_platform.serving.models import (
    Metadata,
    OrderCountPerStore,
    OrderCountWindowPage,
    RevenuePerStore,
    RevenueWindowPage,
)
from revenue_platform.serving.offline_docs import add_offline_swagger_ui
from revenue_platform.serving.params import (
    ORDER_TYPE_BY_PATH_NAME,
    BadRequestError,
    ServingLimits,
    parse_order_type,
    parse_page,
    parse_time_range,
)

_ORDER_TYPE_DOC = f"one of {', '.join(ORDER_TYPE_BY_PATH_NAME)} (the seed's names)"
OrderTypePath = Annotated[str, Path(description=_ORDER_TYPE_DOC, examples=["general_orders"])]
LocationQuery = Annotated[
    str | None, Query(description="a store's locationId; omit for every store", examples=["store_1234"])
]
FromTime = Annotated[
    str | None,
    Query(
        description="ISO-8601 start (inclusive) of window starts; no zone means UTC",
        examples=["2026-11-22T09:00:00Z"],
    ),
]
ToTime = Annotated[
    str | None,
    Query(
        description="ISO-8601 end (exclusive) of window starts; no zone means UTC",
        examples=["2026-11-22T10:00:00Z"],
    ),
]
Limit = Annotated[int | None, Query(description="windows per page (default 100, at most 1000)")]
Offset = Annotated[int | None, Query(description="windows to skip (from the previous page's next_offset)")]

DESCRIPTION = """
Order counts and revenue per store, order type and event-time window, read from the gold table
of the **live** deployment (the registry's live pointer, switched atomically by blue-green
releases). Revenue is a decimal string with two places, never a number.

Authenticate with an Airflow token: `POST /auth/token` on the Airflow API server, then send
`Authorization: Bearer <access_token>` (the Airflow UI's session cookie works too).
"""


def create_app(lake_root: str | None = None, limits: ServingLimits | None = None) -> FastAPI:
    """The query API. `lake_root` None: `revenue_platform.paths.lake_root()` per request."""
    app = FastAPI(
        title="Revenue query API",
        version="1",
        description=DESCRIPTION,
        # Applies to every route of the routers included below.
        dependencies=[Depends(require_airflow_user)],
        # FastAPI's own pages load Swagger UI / Redoc from a CDN: /docs is served offline below.
        docs_url=None,
        redoc_url=None,
    )
    add_offline_swagger_ui(app)
    _add_error_handlers(app)
    app.include_router(_totals_router(lake_root))
    app.include_router(_windows_router(lake_root, limits or ServingLimits()))
    app.include_router(_metadata_router(lake_root))
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Bad values answer 400/404 with what is wrong; no live deployment answers 503."""

    @app.exception_handler(BadRequestError)
    def bad_request(_: Request, error: BadRequestError) -> JSONResponse:
        return JSONResponse(status_code=error.status_code, content={"detail": error.message})

    @app.exception_handler(NoLiveDeploymentError)
    def nothing_live(_: Request, error: NoLiveDeploymentError) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": str(error)})


def _check_location(gold: GoldSnapshot, location_id: str | None) -> None:
    """404 for a store the live deployment has never seen (None: every store, nothing to check)."""
    from revenue_platform.serving.queries import has_location

    if location_id is not None and not has_location(gold, location_id):
        raise BadRequestError(
            f"location_id {location_id!r} has no orders in the live deployment {gold.deployment_id!r}",
            status_code=404,
        )


def _totals_router(lake_root: str | None) -> APIRouter:
    """Order counts and revenue per store, summed over every window."""
    router = APIRouter()

    @router.get("/v1/orders/count/{order_type}", tags=["totals"])
    def count_by_order_type(
        order_type: OrderTypePath, location_id: LocationQuery = None
    ) -> list[OrderCountPerStore]:
        """Orders of one type per store, summed over every window (one store with `location_id`)."""
        from revenue_platform.serving.queries import order_counts

        gold_type = parse_order_type(order_type)
        gold = read_live_gold(lake_root)
        _check_location(gold, location_id)
        counts = order_counts(gold, gold_type, location_id)
        if location_id is not None and not counts:
            counts = [OrderCountPerStore(location_id=location_id, order_type=gold_type, order_count=0)]
        return counts

    @router.get("/v1/orders/count", tags=["totals"])
    def count_all() -> list[OrderCountPerStore]:
        """Orders per store and order type, summed over every window."""
        from revenue_platform.serving.queries import order_counts

        return order_counts(read_live_gold(lake_root))

    @router.get("/v1/orders/revenue/{order_type}", tags=["totals"])
    def revenue_by_order_type(
        order_type: OrderTypePath, location_id: LocationQuery = None
    ) -> list[RevenuePerStore]:
        """Orders and revenue of one type per store with its address (seed: TotalRevenueWithAddress)."""
        from revenue_platform.serving.queries import revenues

        gold_type = parse_order_type(order_type)
        gold = read_live_gold(lake_root)
        _check_location(gold, location_id)
        totals = revenues(gold, gold_type, location_id)
        if location_id is not None and not totals:
            totals = [_no_revenue_of_type(gold, gold_type, location_id)]
        return totals

    @router.get("/v1/orders/revenue", tags=["totals"])
    def revenue_all() -> list[RevenuePerStore]:
        """Orders and revenue per store and order type with addresses."""
        from revenue_platform.serving.queries import revenues

        return revenues(read_live_gold(lake_root))

    return router


def _no_revenue_of_type(gold: GoldSnapshot, gold_type: str, location_id: str) -> RevenuePerStore:
    """The zero row of a known store without orders of `gold_type`, with its address from other orders."""
    from decimal import Decimal

    from revenue_platform.serving.queries import revenues

    other = revenues(gold, None, location_id)[0]  # check_location guarantees a row
    return RevenuePerStore(
        location_id=location_id, order_type=gold_type, order_count=0, revenue=Decimal(0), store=other.store
    )


def _window_page(
    lake_root: str | None,
    bounds: ServingLimits,
    order_type: str | None,
    from_time: str | None,
    to_time: str | None,
    limit: int | None,
    offset: int | None,
) -> tuple[dict[str, object], list[dict[str, object]]]:
    """One page of windows (of `order_type`, None: both) starting in [from_time, to_time): the page's
    envelope (deployment, range, total, next offset) and its gold rows."""
    from revenue_platform.serving.queries import windows

    # Bad parameters answer 400 before the live deployment is looked up.
    time_range = parse_time_range(from_time, to_time, bounds)
    page = parse_page(limit, offset, bounds)
    gold = read_live_gold(lake_root)
    selected = windows(gold, order_type, time_range, page)
    following = page.offset + len(selected.rows)
    envelope: dict[str, object] = {
        "deployment_id": gold.deployment_id,
        "table_version": gold.table_version,
        "from_time": time_range.start,
        "to_time": time_range.end,
        "total": selected.total,
        "limit": page.limit,
        "offset": page.offset,
        "next_offset": following if following < selected.total else None,
    }
    return envelope, selected.rows


def _windows_router(lake_root: str | None, bounds: ServingLimits) -> APIRouter:
    """Order counts and revenue per event-time window, a page at a time."""
    router = APIRouter()

    @router.get("/v1/orders/windows/count/{order_type}", tags=["windows"])
    def window_counts_by_order_type(
        order_type: OrderTypePath,
        from_time: FromTime = None,
        to_time: ToTime = None,
        limit: Limit = None,
        offset: Offset = None,
    ) -> OrderCountWindowPage:
        """Order count per window of one order type, for windows starting in [from_time, to_time)."""
        from revenue_platform.serving.queries import count_windows

        gold_type = parse_order_type(order_type)
        envelope, rows = _window_page(lake_root, bounds, gold_type, from_time, to_time, limit, offset)
        return OrderCountWindowPage.model_validate({**envelope, "items": count_windows(rows)})

    @router.get("/v1/orders/windows/count", tags=["windows"])
    def window_counts(
        from_time: FromTime = None, to_time: ToTime = None, limit: Limit = None, offset: Offset = None
    ) -> OrderCountWindowPage:
        """Order count per window of both order types, for windows starting in [from_time, to_time)."""
        from revenue_platform.serving.queries import count_windows

        envelope, rows = _window_page(lake_root, bounds, None, from_time, to_time, limit, offset)
        return OrderCountWindowPage.model_validate({**envelope, "items": count_windows(rows)})

    @router.get("/v1/orders/windows/revenue/{order_type}", tags=["windows"])
    def window_revenue_by_order_type(
        order_type: OrderTypePath,
        from_time: FromTime = None,
        to_time: ToTime = None,
        limit: Limit = None,
        offset: Offset = None,
    ) -> RevenueWindowPage:
        """Revenue per window of one order type with addresses; windows starting in [from_time, to_time)."""
        from revenue_platform.serving.queries import revenue_windows

        gold_type = parse_order_type(order_type)
        envelope, rows = _window_page(lake_root, bounds, gold_type, from_time, to_time, limit, offset)
        return RevenueWindowPage.model_validate({**envelope, "items": revenue_windows(rows)})

    @router.get("/v1/orders/windows/revenue", tags=["windows"])
    def window_revenue(
        from_time: FromTime = None, to_time: ToTime = None, limit: Limit = None, offset: Offset = None
    ) -> RevenueWindowPage:
        """Revenue per window of both order types with addresses, windows starting in [from_time, to_time)."""
        from revenue_platform.serving.queries import revenue_windows

        envelope, rows = _window_page(lake_root, bounds, None, from_time, to_time, limit, offset)
        return RevenueWindowPage.model_validate({**envelope, "items": revenue_windows(rows)})

    return router


def _metadata_router(lake_root: str | None) -> APIRouter:
    """The registry's deployments and live pointer."""
    router = APIRouter()

    @router.get("/v1/metadata/all", tags=["metadata"])
    def metadata_all(user: AirflowUser) -> Metadata:
        """Registered deployments (colour, version, states, live flag, lag) and the live pointer; the
        server paths of each deployment's files for admins only (null for other users)."""
        return deployments_metadata(lake_root, show_paths=is_admin(user))

    return router
