"""Response bodies of the revenue query API (pydantic), shaped after the seed's DTOs in snake_case.

Money is `Money`: a `Decimal` in Python and a decimal string with two places in JSON ("108.00"),
never a float, and documented as a string in the OpenAPI schema. Times are UTC ISO-8601.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema

from revenue_platform.serving.params import format_money

Money = Annotated[
    Decimal,
    PlainSerializer(format_money, return_type=str),
    WithJsonSchema({"type": "string", "pattern": r"^-?\d+\.\d{2}$", "examples": ["108.00"]}),
]


class _Response(BaseModel):
    model_config = ConfigDict(frozen=True)


class Address(_Response):
    address_line1: str | None
    address_line2: str | None
    city: str | None
    state: str | None
    zip: str | None


class Store(_Response):
    """The store as the gold row was enriched with it (the seed's `Store`)."""

    location_id: str
    address: Address
    contact_num: str | None


class OrderCountPerStore(_Response):
    """Orders of one type at one store over every window of the live gold (seed: OrderCountPerStoreDTO)."""

    location_id: str
    order_type: str = Field(description="GENERAL or RESTAURANT")
    order_count: int


class RevenuePerStore(_Response):
    """Orders and revenue of one type at one store with its address (seed: TotalRevenueWithAddress)."""

    location_id: str
    order_type: str
    order_count: int
    revenue: Money
    store: Store | None = Field(description="null when the store was unknown when the windows were computed")


class OrderCountPerWindow(_Response):
    """One event-time window of one store and order type (seed: OrdersCountPerStoreByWindowsDTO)."""

    location_id: str
    order_type: str
    window_start: datetime
    window_end: datetime
    order_count: int


class RevenuePerWindow(_Response):
    """Revenue of one window with the store's address (seed: OrdersRevenuePerStoreByWindowsDTO)."""

    location_id: str
    order_type: str
    window_start: datetime
    window_end: datetime
    order_count: int
    revenue: Money
    store: Store | None


class _WindowPage(_Response):
    deployment_id: str = Field(description="the live deployment that answered")
    table_version: int | None = Field(description="Delta version of its gold table (null: no output yet)")
    from_time: datetime
    to_time: datetime
    total: int = Field(description="windows in [from_time, to_time) over all pages")
    limit: int
    offset: int
    next_offset: int | None = Field(description="offset of the next page; null on the last page")


class OrderCountWindowPage(_WindowPage):
    items: list[OrderCountPerWindow]


class RevenueWindowPage(_WindowPage):
    items: list[RevenuePerWindow]


_ADMINS_ONLY = "absolute path on the API server's machine; shown to Airflow admins only, null for other users"


class Lag(_Response):
    """How far the deployment's revenue query is behind, from the progress file the app publishes."""

    offsets_behind_latest: int | None
    last_batch_at: str | None
    heartbeat_at: str | None = Field(
        description="the driver's last heartbeat (every few seconds, also while idle); null before its first"
    )
    watermark: str | None
    progress_file: str | None = Field(description=_ADMINS_ONLY)
    driver_status_file: str | None = Field(description=_ADMINS_ONLY)


class DeploymentMetadata(_Response):
    deployment_id: str
    colour: str
    app_version: str
    is_live: bool
    desired_state: str
    observed_state: str
    registered_at: datetime
    updated_at: datetime
    gold_table: str | None = Field(description=_ADMINS_ONLY)
    lag: Lag | None = Field(description="null until the app has published progress")


class Metadata(_Response):
    """What `/v1/metadata/all` answers: the registry's deployments and the live pointer."""

    live_deployment_id: str | None
    deployments: list[DeploymentMetadata]
