"""Pure rules of a blue-green replay: green's config, catch-up, the diff and the gate."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from revenue_platform.bluegreen.logic import (
    approval_given,
    approver_outside_group,
    assigned_approvers,
    diff_blockers,
    diff_windows,
    flatten,
    green_overrides,
    judge_catch_up,
    parse_approvers,
    plan_replay_history,
    previous_live,
    promotion_blockers,
)
from revenue_platform.errors import ConfigError

T0 = datetime(2026, 11, 22, 9, 0, 0)
# Windows ending at or before this are final in both deployments (streaming.finality.final_through).
FINAL_THROUGH = T0 + timedelta(seconds=30)


def window(start_s: int, revenue: str, count: int = 1, location: str = "store_1001") -> dict[str, Any]:
    start = T0 + timedelta(seconds=start_s)
    return {
        "location_id": location,
        "order_type": "GENERAL",
        "window_start": start,
        "window_end": start + timedelta(seconds=15),
        "order_count": count,
        "revenue": Decimal(revenue),
    }


def series(revenues: list[str]) -> list[dict[str, Any]]:
    return [window(15 * i, r) for i, r in enumerate(revenues)]


def test_green_inherits_blue_config_but_not_identity_start_or_topic() -> None:
    blue = {
        "deployment_id": "blue",
        "app_version": "1.0",
        "lease_token": "1-abc",
        "kafka": {
            "orders_topic": "o",
            "revenue_topic": "rev",
            "starting_offsets": "latest",
            "options": {"a": "b"},
        },
        "window": {"size": "15 seconds"},
    }
    own = {"kafka.revenue_topic": "rev_green", "kafka.dlq_topic": "dlq_green"}
    overrides = green_overrides(blue, {"window.size": "1 minute"}, own)
    assert overrides == {
        "kafka.orders_topic": "o",
        "kafka.options": {"a": "b"},
        "window.size": "1 minute",
        "kafka.revenue_topic": "rev_green",
        "kafka.dlq_topic": "dlq_green",
    }
    for taken in own:
        with pytest.raises(ConfigError, match=taken.replace(".", r"\.")):
            green_overrides(blue, {taken: "shared"}, own)
    assert flatten({"a": {"b": {"c": 1}}}) == {"a.b.c": 1}


def test_a_green_of_a_blue_on_the_retired_two_query_engine_runs_todays_engine() -> None:
    own = {"kafka.revenue_topic": "rev_green"}
    retired = green_overrides({"engine": "two_queries", "window": {"size": "1 minute"}}, {}, own)
    assert "engine" not in retired
    assert retired["window.size"] == "1 minute"
    assert green_overrides({"engine": "micro_batch"}, {}, own)["engine"] == "micro_batch"
    # A blue registered under the engine's former name: green inherits it as written (it still loads).
    assert green_overrides({"engine": "one_query"}, {}, own)["engine"] == "one_query"


def test_catch_up_needs_every_query_within_the_threshold() -> None:
    def summary(*behind: int | None, rate: float | None = 10.0) -> dict[str, Any]:
        queries = {f"q{i}": {"max_offsets_behind_latest": b} for i, b in enumerate(behind)}
        return {"queries": queries, "processed_rows_per_second": rate}

    assert judge_catch_up(summary(0, 0), 0).caught_up
    lagging = judge_catch_up(summary(0, 50), 0)
    assert not lagging.caught_up
    assert (lagging.offsets_behind, lagging.eta_s) == (50, 5.0)
    assert judge_catch_up(summary(0, 50), 50).caught_up
    assert not judge_catch_up(summary(0, None), 100).caught_up, "a query without a batch is not caught up"
    assert not judge_catch_up({"queries": {}}, 0).caught_up
    assert "ETA ?" in judge_catch_up(summary(3, rate=None), 0).describe()


def test_a_replay_from_bronze_is_not_caught_up_while_its_history_is_being_read() -> None:
    queries = {"archive": {"max_offsets_behind_latest": 0}, "revenue": {"max_offsets_behind_latest": 0}}
    queries["revenue"]["history_pending"] = True
    pending = judge_catch_up({"queries": queries}, 0)
    assert not pending.caught_up
    assert "bronze history still being read" in pending.describe()
    queries["revenue"]["history_pending"] = False
    assert judge_catch_up({"queries": queries}, 0).caught_up


BRONZE = "/lake/bronze/orders_raw/blue"


def test_bronze_history_cuts_over_to_kafka_at_the_first_offset_bronze_lacks() -> None:
    # Retention deleted offsets < 40 of partition 0; bronze holds 0..99 of it and nothing of partition 1.
    history = plan_replay_history("bronze", {0: (0, 99)}, {0: (40, 120), 1: (0, 7)}, BRONZE)
    assert history == {"bronze_table": BRONZE, "kafka_offsets": {0: 100, 1: -2}}


@pytest.mark.parametrize(
    ("bronze", "kafka", "message"),
    [
        ({}, {0: (0, 10)}, "is empty"),
        # Kafka lost 100..149 before blue archived them: neither side has them.
        ({0: (0, 99)}, {0: (150, 200)}, "offsets 100..149 are in neither bronze nor Kafka"),
        ({0: (0, 99)}, {0: (0, 200), 1: (5, 9)}, "partition 1: bronze holds none of it"),
        ({0: (0, 9), 3: (0, 9)}, {0: (0, 20)}, "partitions [3] are archived in bronze"),
    ],
)
def test_a_bronze_replay_that_would_lose_records_is_refused(
    bronze: dict[int, tuple[int, int]], kafka: dict[int, tuple[int, int]], message: str
) -> None:
    with pytest.raises(ConfigError, match="replay_source") as refused:
        plan_replay_history("bronze", bronze, kafka, BRONZE)
    assert message in str(refused.value)


def test_kafka_earliest_is_refused_once_retention_deleted_what_blue_has_seen() -> None:
    assert plan_replay_history("kafka_earliest", {0: (0, 99)}, {0: (0, 120)}, BRONZE) is None
    # Blue started later than Kafka's first kept offset: nothing it saw is gone.
    assert plan_replay_history("kafka_earliest", {0: (50, 99)}, {0: (40, 120)}, BRONZE) is None
    with pytest.raises(ConfigError, match="replay from 'bronze'") as refused:
        plan_replay_history("kafka_earliest", {0: (0, 99)}, {0: (40, 120)}, BRONZE)
    assert "partition 0: Kafka starts at offset 40, blue archived from offset 0" in str(refused.value)


def test_green_never_inherits_blue_history_source() -> None:
    blue = {"kafka": {"orders_topic": "orders"}, "history": {"bronze_table": "/x", "kafka_offsets": {"0": 5}}}
    overrides = green_overrides(blue, {}, {"kafka.revenue_topic": "revenue_windows_green"})
    assert not any(key == "history" or key.startswith("history.") for key in overrides)


def test_identical_outputs_pass_and_windows_not_final_yet_are_ignored() -> None:
    blue = series(["1.00", "2.00", "3.00", "4.00", "5.00"])
    # The windows ending after FINAL_THROUGH may still change: only the first two are compared.
    green = series(["1.00", "2.00", "3.00", "9.99", "0.01"])
    diff = diff_windows(blue, green, FINAL_THROUGH)
    assert diff.passed
    assert diff.windows_compared == 2
    assert diff.blue_revenue == diff.green_revenue == Decimal("3.00")


def test_every_window_is_compared_once_both_deployments_had_read_all_of_kafka() -> None:
    # Idle apps that had read all of Kafka a watermark delay after the newest window's end (their
    # final_through lies beyond it, while the watermark stands 30 s behind the newest event).
    blue = series(["1.00", "2.00", "3.00", "4.00", "5.00"])
    green = series(["1.00", "2.00", "3.00", "4.00", "5.01"])
    diff = diff_windows(blue, green, T0 + timedelta(hours=1))
    assert diff.windows_compared == 5
    assert [m["window_start"] for m in diff.mismatches] == [(T0 + timedelta(seconds=60)).isoformat()]


def test_nothing_is_compared_while_one_side_has_no_final_window_known() -> None:
    blue = series(["1.00", "2.00"])
    assert diff_windows(blue, blue, None).windows_compared == 0
    assert diff_blockers(diff_windows(blue, blue, None).summary()) == [
        "no final window covered by both blue and green to compare"
    ]


def test_a_revenue_or_count_difference_beyond_tolerance_fails() -> None:
    blue = series(["1.00", "2.00", "3.00", "4.00", "5.00"])
    green = series(["1.00", "2.01", "3.00", "4.00", "5.00"])
    diff = diff_windows(blue, green, FINAL_THROUGH)
    assert not diff.passed
    assert diff.mismatches[0]["blue_revenue"] == "2.00"
    assert diff.mismatches[0]["green_revenue"] == "2.01"
    assert diff_windows(blue, green, FINAL_THROUGH, revenue_tolerance=Decimal("0.01")).passed
    counted = [dict(r, order_count=2) if i == 0 else r for i, r in enumerate(blue)]
    assert not diff_windows(counted, blue, FINAL_THROUGH).passed
    within = diff_windows(counted, blue, FINAL_THROUGH, count_tolerance=1)
    assert within.passed
    # The totals over the compared windows show a difference the per-window tolerance let through.
    assert (within.blue_orders, within.green_orders) == (3, 2)
    assert within.summary()["blue_orders"] == 3


def test_a_window_missing_on_one_side_within_the_common_range_is_a_mismatch() -> None:
    blue = series(["1.00", "2.00", "3.00", "4.00", "5.00"])
    green = [row for i, row in enumerate(blue) if i != 1]
    diff = diff_windows(blue, green, FINAL_THROUGH)
    assert [m["green_count"] for m in diff.mismatches] == [0]


def test_only_the_range_both_cover_is_compared() -> None:
    blue = series(["1.00", "2.00", "3.00", "4.00", "5.00", "6.00"])
    green = blue[2:]  # started later (e.g. retention): windows before it are not compared
    diff = diff_windows(blue, green, T0 + timedelta(seconds=60))
    assert diff.passed
    assert diff.windows_compared == 2
    assert diff.common_from == T0 + timedelta(seconds=30)
    assert diff_windows([], green, FINAL_THROUGH).windows_compared == 0


def test_promotion_blockers() -> None:
    ok = diff_windows(
        series(["1", "2", "3", "4"]), series(["1", "2", "3", "4"]), T0 + timedelta(seconds=15)
    ).summary()
    assert promotion_blockers(True, True, ok, False, False) == []
    assert promotion_blockers(True, True, ok, True, False) == ["approval required and not given"]
    assert promotion_blockers(True, True, ok, True, True) == []
    assert "quality checks failed" in promotion_blockers(True, False, ok, False, False)
    assert "green has not caught up" in promotion_blockers(False, True, ok, False, False)
    empty = diff_windows([], [], FINAL_THROUGH).summary()
    assert promotion_blockers(True, True, empty, False, False) == [
        "no final window covered by both blue and green to compare"
    ]
    bad = diff_windows(
        series(["1", "2", "3", "4"]), series(["9", "2", "3", "4"]), T0 + timedelta(seconds=15)
    ).summary()
    assert promotion_blockers(True, True, bad, False, False) == [
        "1 of 1 final window(s) differ beyond tolerance"
    ]
    assert promotion_blockers(True, True, None, False, False)


def test_approval_is_the_approve_option_of_the_hitl_result() -> None:
    assert approval_given(None) == (False, None)
    assert approval_given({"chosen_options": ["Reject"], "responded_by_user": "ann"}) == (False, "ann")
    assert approval_given({"chosen_options": ["Approve"], "responded_by_user": "ann"}) == (True, "ann")


@dataclass
class Event:
    kind: str
    from_value: str | None
    to_value: str | None
    at: datetime


def test_previous_live_comes_from_the_newest_switch_to_the_current_one() -> None:
    events = [
        Event("live_switched", None, "blue", T0),
        Event("live_switched", "blue", "green", T0 + timedelta(minutes=1)),
        Event("stopped", None, "stopped", T0 + timedelta(minutes=2)),
    ]
    assert previous_live(events, "green") == "blue"
    assert previous_live(events, "blue") is None
    events.append(Event("live_switched", "green", "blue", T0 + timedelta(minutes=3)))
    assert previous_live(events, "blue") == "green"


def test_the_approver_group_is_parsed_strictly_and_names_its_option() -> None:
    assert parse_approvers(None) == ()
    assert parse_approvers(" , ") == ()
    assert parse_approvers("approver, ops.lead@example.com ,approver") == ("approver", "ops.lead@example.com")
    for hostile in ("bob;rm -rf /", "<@U123>", "-flag", "x" * 129, "bob\nalice"):
        with pytest.raises(ConfigError, match=r"^\[revenue_platform\] approvers: .* is not a user id"):
            parse_approvers(f"ann,{hostile}")
    with pytest.raises(ConfigError, match="at most 100 user ids, got 101"):
        parse_approvers(",".join(f"u{i}" for i in range(101)))


def test_the_approval_is_assigned_to_the_group_without_the_requesters() -> None:
    assert assigned_approvers((), ["ann"]) is None, "no group: any user is offered the approval"
    assert assigned_approvers(("ann", "bob"), ["ann"]) == [{"id": "bob", "name": "bob"}]
    assert assigned_approvers(("bob",), []) == [{"id": "bob", "name": "bob"}]
    with pytest.raises(ConfigError, match=r"every approver \(ann, carol\) requested this replay"):
        assigned_approvers(("ann", "carol"), ["carol", "ann"])


def test_an_approval_from_outside_the_group_is_named() -> None:
    assert approver_outside_group({"id": "ann", "name": "Ann"}, ("bob",)) == "ann"
    assert approver_outside_group("ann", ("bob",)) == "ann"
    assert approver_outside_group({"id": "bob", "name": "Bob"}, ("bob",)) is None
    assert approver_outside_group({"id": "ann", "name": "Ann"}, ()) is None, "no group configured"
    assert approver_outside_group(None, ("bob",)) is None, "no approval: another blocker says so"
    blockers = promotion_blockers(
        True, True, {"passed": True, "windows_compared": 1}, True, True, None, "ann"
    )
    assert blockers == ["approved by ann, who is not one of the approvers ([revenue_platform] approvers)"]
