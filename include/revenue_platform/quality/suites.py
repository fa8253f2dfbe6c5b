"""The revenue expectation suites, as code: the versioned source of truth of what "good gold" means.

One suite per derived dataset (see `frames.py`), named per deployment. Every expectation carries a
stable `meta.check` name (what error messages, the results table and tests refer to) and a
description shown in Data Docs. Bump `SUITE_VERSION` whenever a check's meaning changes, so the
results history says which version judged a run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from revenue_platform.quality.config import QualityConfig
from spark_apps.contract.records import GOLD_KEY_COLUMNS, GOLD_WINDOW_COLUMNS, ORDER_TYPES

# Expectations are imported from their defining modules: GX's package `__init__` files re-export
# without `__all__`, which strict type checking does not count as an export.
if TYPE_CHECKING:
    import great_expectations as gx
    from great_expectations.expectations.expectation import Expectation

SUITE_VERSION: Final = "1"


def suite_name(deployment_id: str, dataset: str) -> str:
    return f"revenue_quality__{deployment_id}__{dataset}"


def _meta(check: str) -> dict[str, str]:
    return {"check": check, "suite_version": SUITE_VERSION}


def gold_schema_expectations(config: QualityConfig) -> list[Expectation]:
    from great_expectations.expectations.core.expect_column_pair_values_to_be_equal import (
        ExpectColumnPairValuesToBeEqual,
    )
    from great_expectations.expectations.core.expect_column_values_to_not_be_null import (
        ExpectColumnValuesToNotBeNull,
    )

    return [
        ExpectColumnValuesToNotBeNull(
            column="actual_type",
            meta=_meta("schema_columns_present"),
            description="Every column of the gold contract exists in the table.",
        ),
        ExpectColumnValuesToNotBeNull(
            column="expected_type",
            meta=_meta("schema_no_unexpected_columns"),
            description="The table has no column outside the gold contract.",
        ),
        ExpectColumnPairValuesToBeEqual(
            column_A="actual_type",
            column_B="expected_type",
            ignore_row_if="either_value_is_missing",
            meta=_meta("schema_column_types"),
            description="Each column has its contract's Delta type (revenue is decimal(38,2)).",
        ),
    ]


def gold_windows_expectations(config: QualityConfig) -> list[Expectation]:
    from great_expectations.expectations.core.expect_column_values_to_be_between import (
        ExpectColumnValuesToBeBetween,
    )
    from great_expectations.expectations.core.expect_column_values_to_be_in_set import (
        ExpectColumnValuesToBeInSet,
    )
    from great_expectations.expectations.core.expect_column_values_to_not_be_null import (
        ExpectColumnValuesToNotBeNull,
    )
    from great_expectations.expectations.core.expect_compound_columns_to_be_unique import (
        ExpectCompoundColumnsToBeUnique,
    )

    not_null: list[Expectation] = [
        ExpectColumnValuesToNotBeNull(
            column=column, meta=_meta(f"not_null_{column}"), description=f"{column} is never null."
        )
        for column in GOLD_WINDOW_COLUMNS
    ]
    return [
        *not_null,
        ExpectColumnValuesToBeInSet(
            column="order_type",
            value_set=list(ORDER_TYPES),
            meta=_meta("order_type_known"),
            description="order_type is GENERAL or RESTAURANT.",
        ),
        ExpectColumnValuesToBeBetween(
            column="order_count",
            min_value=1,
            meta=_meta("order_count_positive"),
            description="A window row exists only if at least one order fell into it.",
        ),
        ExpectColumnValuesToBeBetween(
            column="revenue_cents",
            min_value=0,
            max_value=config.revenue_ceiling_cents,
            strict_max=True,
            meta=_meta("revenue_in_range"),
            description=f"Revenue (in cents) is >= 0 and below the ceiling {config.revenue_ceiling}.",
        ),
        ExpectColumnValuesToBeBetween(
            column="window_duration_seconds",
            min_value=config.size_seconds,
            max_value=config.size_seconds,
            meta=_meta("window_duration"),
            description=f"window_end - window_start equals the window size ({config.window_size}).",
        ),
        ExpectColumnValuesToBeInSet(
            column="window_start_epoch_mod_slide",
            value_set=[0],
            meta=_meta("window_start_aligned"),
            description=f"window_start is a multiple of the slide ({config.slide_seconds} s) since epoch.",
        ),
        ExpectCompoundColumnsToBeUnique(
            column_list=list(GOLD_KEY_COLUMNS),
            meta=_meta("window_key_unique"),
            description="(location_id, order_type, window_start) identifies one row.",
        ),
    ]


def reconciliation_expectations(config: QualityConfig) -> list[Expectation]:
    from great_expectations.expectations.core.expect_column_values_to_be_between import (
        ExpectColumnValuesToBeBetween,
    )
    from great_expectations.expectations.core.expect_column_values_to_be_in_set import (
        ExpectColumnValuesToBeInSet,
    )

    return [
        ExpectColumnValuesToBeInSet(
            column="present_in",
            value_set=["both"],
            meta=_meta("reconciliation_window_present"),
            description="Every closed window is in gold exactly when bronze has valid orders for it.",
        ),
        ExpectColumnValuesToBeBetween(
            column="order_count_diff",
            min_value=0,
            max_value=0,
            meta=_meta("reconciliation_order_count"),
            description="Gold order_count equals the count of valid, deduplicated bronze orders.",
        ),
        ExpectColumnValuesToBeBetween(
            column="revenue_diff_cents",
            min_value=0,
            max_value=0,
            meta=_meta("reconciliation_revenue"),
            description="Gold revenue equals the Decimal sum of bronze finalAmount, to the cent.",
        ),
    ]


def freshness_expectations(config: QualityConfig) -> list[Expectation]:
    from great_expectations.expectations.core.expect_column_values_to_be_between import (
        ExpectColumnValuesToBeBetween,
    )
    from great_expectations.expectations.core.expect_column_values_to_not_be_null import (
        ExpectColumnValuesToNotBeNull,
    )

    return [
        ExpectColumnValuesToNotBeNull(
            column="lag_seconds",
            meta=_meta("freshness_closed_window_exists"),
            description="Gold has at least one closed window ending at or before the interval end.",
        ),
        ExpectColumnValuesToBeBetween(
            column="lag_seconds",
            min_value=0,
            max_value=config.freshness_max_lag_seconds,
            meta=_meta("freshness_lag"),
            description=f"The newest closed window ends at most {config.freshness_max_lag} before "
            "the interval end.",
        ),
    ]


def input_health_expectations(config: QualityConfig) -> list[Expectation]:
    from great_expectations.expectations.core.expect_column_values_to_be_between import (
        ExpectColumnValuesToBeBetween,
    )

    return [
        ExpectColumnValuesToBeBetween(
            column="dlq_share",
            min_value=0,
            max_value=config.max_dlq_share,
            meta=_meta("dlq_share"),
            description=f"At most {config.max_dlq_share:.2%} of the interval's records are dead letters.",
        ),
        ExpectColumnValuesToBeBetween(
            column="late_share",
            min_value=0,
            max_value=config.max_late_share,
            meta=_meta("late_share"),
            description=f"At most {config.max_late_share:.2%} of the interval's valid records are late.",
        ),
        ExpectColumnValuesToBeBetween(
            column="valid_records_parse",
            min_value=0,
            max_value=0,
            meta=_meta("valid_records_parse"),
            description="Every record the app accepted also parses with the independent parser.",
        ),
    ]


@dataclass(frozen=True)
class SuiteSpec:
    dataset: str
    build: Callable[[QualityConfig], list[Expectation]]


SUITES: Final = (
    SuiteSpec("gold_schema", gold_schema_expectations),
    SuiteSpec("gold_windows", gold_windows_expectations),
    SuiteSpec("reconciliation", reconciliation_expectations),
    SuiteSpec("freshness", freshness_expectations),
    SuiteSpec("input_health", input_health_expectations),
)


def build_suite(deployment_id: str, spec: SuiteSpec, config: QualityConfig) -> gx.ExpectationSuite:
    """The ExpectationSuite of one dataset for one deployment, parameterised by `config`."""
    import great_expectations as gx

    return gx.ExpectationSuite(
        name=suite_name(deployment_id, spec.dataset),
        expectations=spec.build(config),
        meta={"suite_version": SUITE_VERSION, "dataset": spec.dataset, "deployment_id": deployment_id},
    )
