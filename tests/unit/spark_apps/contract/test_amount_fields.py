"""The two money fields of the configs (the app's largest accepted order, the quality gate's revenue
ceiling) share one rule: an amount of ASCII digits with at most two decimals, a whole number of cents."""

from __future__ import annotations

from decimal import Decimal

import pytest

from revenue_platform.paths import APP_CONFIG_PATH
from revenue_platform.quality.config import QualityConfig
from spark_apps.contract.config import AppConfigError, load_config


def app_amount(value: object) -> Decimal:
    return load_config(APP_CONFIG_PATH, {"validation.max_order_amount": value}).validation.max_order_amount


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("١٢٣", "is not an amount such as 1000000.00"),  # Arabic-Indic digits: Decimal() would read them
        ("12.5.0", "is not an amount"),
        ("12.345", "is not an amount"),
        (Decimal("12.345"), "whole number of cents"),
    ],
)
def test_an_amount_that_is_not_ascii_cents_is_refused_by_both_configs(value: object, message: str) -> None:
    with pytest.raises(AppConfigError, match=message):
        app_amount(value)
    with pytest.raises(ValueError, match=message):
        QualityConfig(revenue_ceiling=value)


def test_an_amount_in_cents_is_taken_by_both_configs() -> None:
    assert app_amount("2500.50") == Decimal("2500.50")
    assert QualityConfig(revenue_ceiling="2500.50").revenue_ceiling == Decimal("2500.50")
