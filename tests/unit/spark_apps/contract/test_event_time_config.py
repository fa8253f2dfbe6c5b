"""Event-time rules of the config: the skew never exceeds the watermark delay, the past has a bound,
and the window geometry keeps the state a config asks for finite. Pure logic."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_apps.contract.config import AppConfigError, load_config

SHIPPED_CONFIG = Path(__file__).resolve().parents[4] / "include" / "config" / "streaming_app.yaml"


def test_the_skew_defaults_to_the_watermark_delay() -> None:
    config = load_config(SHIPPED_CONFIG)
    assert config.validation.max_future_skew is None
    assert config.order_rules().max_future_skew_s == 30
    assert config.skew_clamp_reason() is None
    assert config.order_rules().max_past_age_s == 3650 * 86400


def test_a_skew_longer_than_the_watermark_delay_is_clamped_to_it_with_the_reason() -> None:
    # Registered configs of existing deployments say "5 minutes": they still load, with the rule cut.
    config = load_config(SHIPPED_CONFIG, ["validation.max_future_skew=5 minutes"])
    assert config.order_rules().max_future_skew_s == 30
    reason = config.skew_clamp_reason()
    assert reason is not None
    assert "validation.max_future_skew '5 minutes'" in reason
    assert "window.watermark '30 seconds'" in reason


def test_a_skew_within_the_delay_is_kept() -> None:
    config = load_config(
        SHIPPED_CONFIG, ["validation.max_future_skew=10 seconds", "window.watermark=5 minutes"]
    )
    assert config.order_rules().max_future_skew_s == 10
    assert config.skew_clamp_reason() is None


@pytest.mark.parametrize(
    ("overrides", "field", "says"),
    [
        (["validation.max_past_age=3651 days"], "validation.max_past_age", "3650 days"),
        (["validation.max_past_age=0 seconds"], "validation.max_past_age", "between 1 second"),
        (["validation.max_future_skew=2 days"], "validation.max_future_skew", "1 day"),
        # 1-second windows with a 1-day watermark: 86,401 windows open per store and order type.
        (["window.size=1 second", "window.watermark=1 day"], "window", "86401 windows open"),
        (["window.size=1 hour", "window.slide=1 second"], "window", "3600 windows"),
    ],
)
def test_event_time_bounds_are_refused_naming_the_field(overrides: list[str], field: str, says: str) -> None:
    with pytest.raises(AppConfigError, match=rf"invalid streaming app config: {field}\b") as refused:
        load_config(SHIPPED_CONFIG, overrides)
    assert says in str(refused.value)


def test_common_window_shapes_stay_allowed() -> None:
    for overrides in (
        ["window.size=1 hour", "window.slide=5 minutes", "window.watermark=1 hour"],
        ["window.size=1 day", "window.watermark=1 hour"],
        ["window.size=1 minute", "window.watermark=1 day"],
        ["window.size=15 seconds", "window.watermark=30 minutes"],
    ):
        load_config(SHIPPED_CONFIG, overrides)
