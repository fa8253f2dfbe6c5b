"""The provisioning plan: what compute_plan decides per topic, and that refusals stop apply. No broker."""

from __future__ import annotations

import json
import pickle

import pytest

from revenue_platform.topics.admin import apply_plan
from revenue_platform.topics.errors import DestructiveChangeRefused, TopicSpecError
from revenue_platform.topics.plan import (
    Action,
    ObservedTopic,
    RefusalKind,
    TopicPlan,
    compute_plan,
)
from revenue_platform.topics.provision import apply_plan_step
from revenue_platform.topics.spec import TopicSpec

# Nothing listens here: tests that pass it prove the code refused before connecting.
UNREACHABLE = {"bootstrap.servers": "localhost:1"}

ORDERS = TopicSpec(
    "orders",
    partitions=4,
    replication_factor=1,
    configs={"cleanup.policy": "delete", "retention.ms": "604800000", "min.insync.replicas": "1"},
)
WINDOWS = TopicSpec(
    "revenue_windows",
    partitions=4,
    replication_factor=1,
    configs={"cleanup.policy": "compact", "min.insync.replicas": "1"},
)


def observed(spec: TopicSpec, **changes: object) -> ObservedTopic:
    """The topic exactly as ``spec`` says, with ``changes`` applied."""
    fields: dict[str, object] = {
        "name": spec.name,
        "partitions": spec.partitions,
        "replication_factor": spec.replication_factor,
        "configs": dict(spec.configs),
        "inherited": {"segment.ms": "604800000"},
    }
    fields.update(changes)
    return ObservedTopic(**fields)  # type: ignore[arg-type]


def plan_for(spec: TopicSpec, current: ObservedTopic | None, allow: set[str] | None = None) -> TopicPlan:
    return compute_plan([spec], {current.name: current} if current else {}, 1, allow or set())


def test_a_missing_topic_is_created_with_its_configs() -> None:
    plan = plan_for(ORDERS, None)
    (change,) = plan.changes
    assert change.actions == (Action.CREATE,)
    assert plan.has_changes
    assert "retention.ms=604800000" in plan.render()


def test_a_matching_topic_is_unchanged_and_undeclared_configs_are_not_drift() -> None:
    current = observed(ORDERS, configs={**ORDERS.configs, "segment.ms": "3600000"})
    plan = plan_for(ORDERS, current)
    assert plan.changes[0].actions == (Action.UNCHANGED,)
    assert not plan.has_changes
    assert plan.summary()["unchanged"] == 1


def test_equal_values_in_different_spellings_are_not_drift() -> None:
    spec = TopicSpec("t", 1, 1, {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.5"})
    current = observed(
        spec, configs={"cleanup.policy": "delete,compact", "min.cleanable.dirty.ratio": "0.50"}
    )
    assert plan_for(spec, current).changes[0].actions == (Action.UNCHANGED,)


def test_more_partitions_in_the_spec_increase_the_topic() -> None:
    change = plan_for(ORDERS, observed(ORDERS, partitions=2)).changes[0]
    assert change.actions == (Action.INCREASE_PARTITIONS,)
    assert change.current_partitions == 2
    assert change.notes == ()


def test_adding_partitions_to_a_compacted_topic_warns_about_key_remapping() -> None:
    change = plan_for(WINDOWS, observed(WINDOWS, partitions=2)).changes[0]
    assert change.actions == (Action.INCREASE_PARTITIONS,)
    assert "remaps keys" in change.notes[0]


def test_drifted_configs_are_listed_with_expected_and_actual() -> None:
    current = observed(
        ORDERS,
        configs={"cleanup.policy": "delete", "retention.ms": "1000"},
        inherited={"min.insync.replicas": "1"},
    )
    plan = plan_for(ORDERS, current)
    change = plan.changes[0]
    assert change.actions == (Action.ALTER_CONFIGS,)
    assert [(d.key, d.expected, d.actual, d.inherited) for d in change.config_drift] == [
        # Not set on the topic: declared configs are pinned on the topic, whatever the broker default.
        ("min.insync.replicas", "1", None, "1"),
        ("retention.ms", "604800000", "1000", None),
    ]
    rendered = plan.render()
    assert "retention.ms: expected 604800000, actual 1000" in rendered
    assert "min.insync.replicas: expected 1, actual <not set on topic; inherits 1>" in rendered


def test_a_topic_can_need_partitions_and_configs_at_once() -> None:
    current = observed(ORDERS, partitions=1, configs={**ORDERS.configs, "retention.ms": "1"})
    assert plan_for(ORDERS, current).changes[0].actions == (Action.INCREASE_PARTITIONS, Action.ALTER_CONFIGS)


REFUSALS = [
    ("fewer partitions", ORDERS, {"partitions": 8}, RefusalKind.DECREASE_PARTITIONS, "partitions"),
    (
        "other replication factor",
        ORDERS,
        {"replication_factor": 3},
        RefusalKind.CHANGE_REPLICATION_FACTOR,
        "replication_factor",
    ),
    (
        "compacted to delete",
        TopicSpec("revenue_windows", 4, 1, {"cleanup.policy": "delete"}),
        {"configs": {"cleanup.policy": "compact"}},
        RefusalKind.REMOVE_COMPACTION,
        "cleanup.policy",
    ),
    (
        "compact,delete to delete",
        TopicSpec("revenue_windows", 4, 1, {"cleanup.policy": "delete"}),
        {"configs": {"cleanup.policy": "compact,delete"}},
        RefusalKind.REMOVE_COMPACTION,
        "cleanup.policy",
    ),
    (
        "inherited compaction to delete",
        TopicSpec("revenue_windows", 4, 1, {"cleanup.policy": "delete"}),
        {"configs": {}, "inherited": {"cleanup.policy": "compact"}},
        RefusalKind.REMOVE_COMPACTION,
        "cleanup.policy",
    ),
]


@pytest.mark.parametrize(
    ("spec", "current_changes", "kind", "field"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_each_destructive_change_is_refused(
    spec: TopicSpec, current_changes: dict[str, object], kind: RefusalKind, field: str
) -> None:
    plan = plan_for(spec, observed(spec, **current_changes))
    change = plan.changes[0]
    assert Action.REFUSED in change.actions
    (refusal,) = change.refused
    assert (refusal.topic, refusal.kind, refusal.field, refusal.opted_in) == (spec.name, kind, field, False)
    assert plan.blocking_refusals == [refusal]
    # A refused cleanup.policy must not be smuggled into the configs to set.
    assert all(drift.key != "cleanup.policy" for drift in change.config_drift)
    assert "REFUSED" in plan.render()


def test_adding_compaction_or_delete_is_not_destructive() -> None:
    to_compact = TopicSpec("t", 1, 1, {"cleanup.policy": "compact"})
    change = plan_for(to_compact, observed(to_compact, configs={"cleanup.policy": "delete"})).changes[0]
    assert change.actions == (Action.ALTER_CONFIGS,)
    both = TopicSpec("t", 1, 1, {"cleanup.policy": "compact,delete"})
    change = plan_for(both, observed(both, configs={"cleanup.policy": "compact"})).changes[0]
    assert change.actions == (Action.ALTER_CONFIGS,)


def test_safe_changes_are_still_reported_next_to_a_refusal() -> None:
    current = observed(ORDERS, partitions=8, configs={**ORDERS.configs, "retention.ms": "1"})
    change = plan_for(ORDERS, current).changes[0]
    assert change.actions == (Action.ALTER_CONFIGS, Action.REFUSED)


def test_opting_in_to_impossible_changes_skips_them_without_blocking() -> None:
    current = observed(ORDERS, partitions=8, replication_factor=3)
    plan = compute_plan([ORDERS], {"orders": current}, 3, {"orders"})
    change = plan.changes[0]
    assert {r.kind for r in change.refused} == {
        RefusalKind.DECREASE_PARTITIONS,
        RefusalKind.CHANGE_REPLICATION_FACTOR,
    }
    assert all(r.opted_in for r in change.refused)
    assert plan.blocking_refusals == []
    assert "skipped (opted in, still impossible)" in plan.render()
    assert "reassignment" in plan.render()


def test_opting_in_to_compaction_removal_applies_it() -> None:
    spec = TopicSpec("revenue_windows", 4, 1, {"cleanup.policy": "delete"})
    plan = plan_for(spec, observed(spec, configs={"cleanup.policy": "compact"}), {"revenue_windows"})
    change = plan.changes[0]
    assert change.actions == (Action.ALTER_CONFIGS,)
    assert change.refused == ()
    (drift,) = change.config_drift
    assert (drift.key, drift.expected, drift.destructive) == ("cleanup.policy", "delete", True)


def test_opt_in_is_per_topic() -> None:
    spec = TopicSpec("revenue_windows", 4, 1, {"cleanup.policy": "delete"})
    plan = plan_for(spec, observed(spec, configs={"cleanup.policy": "compact"}), {"orders"})
    assert len(plan.blocking_refusals) == 1


def test_a_replication_factor_above_the_broker_count_names_topic_and_field() -> None:
    spec = TopicSpec("orders", 4, 3, {})
    with pytest.raises(
        TopicSpecError, match=r"topic 'orders', field 'replication_factor': 3 exceeds the 1 broker"
    ):
        compute_plan([spec], {}, 1)
    # An existing topic that already has that replication factor is not re-checked.
    assert compute_plan([spec], {"orders": observed(spec)}, 1).changes[0].actions == (Action.UNCHANGED,)


def test_the_plan_round_trips_through_json() -> None:
    spec = TopicSpec("revenue_windows", 2, 1, {"cleanup.policy": "delete", "retention.ms": "5"}, "Windows.")
    current = observed(spec, partitions=4, configs={"cleanup.policy": "compact", "retention.ms": "1"})
    plan = compute_plan([spec, ORDERS], {spec.name: current}, 1, {"revenue_windows"})
    payload = json.loads(json.dumps(plan.to_dict()))
    assert TopicPlan.from_dict(payload) == plan
    assert payload["summary"] == {
        "create": 1,
        "increase_partitions": 0,
        "alter_configs": 1,
        "unchanged": 0,
        "refused": 1,
    }


def test_render_is_a_table_with_one_block_per_topic() -> None:
    plan = compute_plan([ORDERS, WINDOWS], {"revenue_windows": observed(WINDOWS)}, 1)
    lines = plan.render().splitlines()
    assert lines[0].startswith("Topic plan: 2 topic(s) on 1 broker(s)")
    assert lines[1].split() == ["TOPIC", "ACTION", "DETAILS"]
    assert any(line.split()[:2] == ["orders", "create"] for line in lines)
    assert any(line.split()[:2] == ["revenue_windows", "unchanged"] for line in lines)


def test_apply_refuses_before_touching_the_broker_and_lists_each_refusal() -> None:
    current = observed(ORDERS, partitions=8)
    spec = TopicSpec("revenue_windows", 4, 1, {"cleanup.policy": "delete"})
    plan = compute_plan(
        [ORDERS, spec],
        {"orders": current, spec.name: observed(spec, configs={"cleanup.policy": "compact"})},
        1,
    )
    with pytest.raises(DestructiveChangeRefused) as caught:
        apply_plan(UNREACHABLE, plan)
    message = str(caught.value)
    assert "nothing was changed" in message
    assert "topic 'orders': decrease_partitions" in message
    assert "topic 'revenue_windows': remove_compaction" in message
    assert '"allow_destructive": ["orders", "revenue_windows"]' in message
    assert str(pickle.loads(pickle.dumps(caught.value))) == message
    with pytest.raises(DestructiveChangeRefused):
        apply_plan_step(plan.to_dict())


def test_applying_a_plan_without_changes_does_not_connect() -> None:
    plan = plan_for(ORDERS, observed(ORDERS))
    result = apply_plan(UNREACHABLE, plan)
    assert not result.changed
