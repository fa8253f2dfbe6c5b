"""Pure diff between the desired topic spec and what the cluster has: the provisioning plan.

``compute_plan`` decides, per topic, whether to create it, add partitions, set drifted configs,
leave it alone, or refuse the change because it would lose data or Kafka cannot do it (fewer
partitions, a different replication factor, dropping ``compact`` from ``cleanup.policy``). It never
talks to Kafka, so every rule is unit-testable, and its output is both a readable table for the
task log (``render``) and a JSON-serialisable dict for XCom (``to_dict``/``from_dict``). Only
configs declared in the spec are compared: anything else the topic inherits from the broker is
not drift. A declared config counts as converged only when it is set on the topic itself, so a
later change of a broker default cannot silently change a declared topic.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from revenue_platform.topics.configs import CLEANUP_POLICY, cleanup_tokens, config_values_equal
from revenue_platform.topics.errors import SpecIssue, TopicSpecError
from revenue_platform.topics.spec import TopicSpec


class Action(StrEnum):
    CREATE = "create"
    INCREASE_PARTITIONS = "increase_partitions"
    ALTER_CONFIGS = "alter_configs"
    UNCHANGED = "unchanged"
    REFUSED = "refused"


class RefusalKind(StrEnum):
    DECREASE_PARTITIONS = "decrease_partitions"
    CHANGE_REPLICATION_FACTOR = "change_replication_factor"
    REMOVE_COMPACTION = "remove_compaction"


_REFUSAL_REASONS = {
    RefusalKind.DECREASE_PARTITIONS: (
        "Kafka cannot reduce a topic's partition count; shrinking means creating a new topic and "
        "migrating data"
    ),
    RefusalKind.CHANGE_REPLICATION_FACTOR: (
        "changing the replication factor needs a partition reassignment "
        "(kafka-reassign-partitions), which this DAG does not run"
    ),
    RefusalKind.REMOVE_COMPACTION: (
        "removing 'compact' from cleanup.policy lets retention delete the latest value of every key"
    ),
}


@dataclass(frozen=True)
class ObservedTopic:
    """A topic as the cluster reports it.

    ``configs`` holds only values set on the topic itself; ``inherited`` holds the effective values
    the topic gets from broker or cluster defaults (shown in the plan, used for safety checks).
    """

    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)
    inherited: dict[str, str] = field(default_factory=dict)

    def effective(self, key: str) -> str | None:
        return self.configs.get(key, self.inherited.get(key))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "partitions": self.partitions,
            "replication_factor": self.replication_factor,
            "configs": dict(sorted(self.configs.items())),
            "inherited": dict(sorted(self.inherited.items())),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ObservedTopic:
        return cls(
            name=str(data["name"]),
            partitions=int(data["partitions"]),
            replication_factor=int(data["replication_factor"]),
            configs={str(k): str(v) for k, v in dict(data.get("configs", {})).items()},
            inherited={str(k): str(v) for k, v in dict(data.get("inherited", {})).items()},
        )


@dataclass(frozen=True)
class ConfigDrift:
    """A declared config whose topic-level value differs from the spec (``actual`` None: not set)."""

    key: str
    expected: str
    actual: str | None
    inherited: str | None = None
    destructive: bool = False

    def describe(self) -> str:
        if self.actual is not None:
            actual = self.actual
        elif self.inherited is not None:
            actual = f"<not set on topic; inherits {self.inherited}>"
        else:
            actual = "<not set on topic>"
        suffix = " [destructive, opted in]" if self.destructive else ""
        return f"{self.key}: expected {self.expected}, actual {actual}{suffix}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "expected": self.expected,
            "actual": self.actual,
            "inherited": self.inherited,
            "destructive": self.destructive,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConfigDrift:
        return cls(
            key=str(data["key"]),
            expected=str(data["expected"]),
            actual=None if data.get("actual") is None else str(data["actual"]),
            inherited=None if data.get("inherited") is None else str(data["inherited"]),
            destructive=bool(data.get("destructive", False)),
        )


@dataclass(frozen=True)
class RefusedChange:
    """A change the spec asks for that will not be made; ``opted_in`` means it no longer blocks the run."""

    topic: str
    kind: RefusalKind
    field: str
    expected: str
    actual: str
    opted_in: bool = False

    @property
    def reason(self) -> str:
        return _REFUSAL_REASONS[self.kind]

    def describe(self) -> str:
        change = f"topic {self.topic!r}: {self.kind.value} ({self.field} {self.actual} -> {self.expected})"
        if self.opted_in:
            return f"{change}: opted in, but still skipped: {self.reason}"
        return f"{change}: refused: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "kind": self.kind.value,
            "field": self.field,
            "expected": self.expected,
            "actual": self.actual,
            "opted_in": self.opted_in,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RefusedChange:
        return cls(
            topic=str(data["topic"]),
            kind=RefusalKind(data["kind"]),
            field=str(data["field"]),
            expected=str(data["expected"]),
            actual=str(data["actual"]),
            opted_in=bool(data.get("opted_in", False)),
        )


@dataclass(frozen=True)
class TopicChange:
    """Everything the plan says about one topic."""

    topic: str
    actions: tuple[Action, ...]
    spec: TopicSpec
    current_partitions: int | None = None
    current_replication_factor: int | None = None
    config_drift: tuple[ConfigDrift, ...] = ()
    refused: tuple[RefusedChange, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "actions": [action.value for action in self.actions],
            "spec": self.spec.to_dict(),
            "current_partitions": self.current_partitions,
            "current_replication_factor": self.current_replication_factor,
            "config_drift": [drift.to_dict() for drift in self.config_drift],
            "refused": [refusal.to_dict() for refusal in self.refused],
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TopicChange:
        return cls(
            topic=str(data["topic"]),
            actions=tuple(Action(action) for action in data["actions"]),
            spec=TopicSpec.from_dict(data["spec"]),
            current_partitions=_optional_int(data.get("current_partitions")),
            current_replication_factor=_optional_int(data.get("current_replication_factor")),
            config_drift=tuple(ConfigDrift.from_dict(d) for d in data.get("config_drift", [])),
            refused=tuple(RefusedChange.from_dict(r) for r in data.get("refused", [])),
            notes=tuple(str(note) for note in data.get("notes", [])),
        )


@dataclass(frozen=True)
class TopicPlan:
    """The per-topic changes for one run, in spec order."""

    changes: tuple[TopicChange, ...]
    broker_count: int
    allow_destructive: frozenset[str] = frozenset()

    def by_action(self, action: Action) -> list[TopicChange]:
        return [change for change in self.changes if action in change.actions]

    @property
    def blocking_refusals(self) -> list[RefusedChange]:
        """Refused changes nobody opted in to: while any exist, ``apply_plan`` changes nothing."""
        return [r for change in self.changes for r in change.refused if not r.opted_in]

    @property
    def skipped_refusals(self) -> list[RefusedChange]:
        return [r for change in self.changes for r in change.refused if r.opted_in]

    @property
    def has_changes(self) -> bool:
        return any(
            action in (Action.CREATE, Action.INCREASE_PARTITIONS, Action.ALTER_CONFIGS)
            for change in self.changes
            for action in change.actions
        )

    def summary(self) -> dict[str, int]:
        return {action.value: len(self.by_action(action)) for action in Action}

    def render(self) -> str:
        """A fixed-width table for the task log: one block per topic, one line per detail."""
        counts = ", ".join(f"{name} {count}" for name, count in self.summary().items())
        lines = [
            f"Topic plan: {len(self.changes)} topic(s) on {self.broker_count} broker(s): {counts}",
        ]
        if self.allow_destructive:
            lines.append(f"allow_destructive: {', '.join(sorted(self.allow_destructive))}")
        rows = [
            (change.topic, ",".join(a.value for a in change.actions), _details(change))
            for change in self.changes
        ]
        topic_width = max([len("TOPIC"), *(len(row[0]) for row in rows)])
        action_width = max([len("ACTION"), *(len(row[1]) for row in rows)])
        lines.append(f"{'TOPIC':<{topic_width}}  {'ACTION':<{action_width}}  DETAILS")
        lines.append(f"{'-' * topic_width}  {'-' * action_width}  {'-' * 40}")
        for topic, actions, details in rows:
            first, *rest = details or [""]
            lines.append(f"{topic:<{topic_width}}  {actions:<{action_width}}  {first}".rstrip())
            lines.extend(f"{'':<{topic_width}}  {'':<{action_width}}  {detail}" for detail in rest)
        blocking = self.blocking_refusals
        if blocking:
            topics = sorted({r.topic for r in blocking})
            lines.append(
                f"{len(blocking)} refused change(s) will stop apply_plan; opt in per topic with "
                f"allow_destructive={topics} or fix the spec."
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "broker_count": self.broker_count,
            "allow_destructive": sorted(self.allow_destructive),
            "summary": self.summary(),
            "has_changes": self.has_changes,
            "blocking_refusals": len(self.blocking_refusals),
            "topics": [change.to_dict() for change in self.changes],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TopicPlan:
        return cls(
            changes=tuple(TopicChange.from_dict(change) for change in data["topics"]),
            broker_count=int(data["broker_count"]),
            allow_destructive=frozenset(str(t) for t in data.get("allow_destructive", [])),
        )


def compute_plan(
    desired: Sequence[TopicSpec],
    observed: Mapping[str, ObservedTopic],
    broker_count: int,
    allow_destructive: Collection[str] = frozenset(),
) -> TopicPlan:
    """Diff ``desired`` against ``observed`` for a cluster of ``broker_count`` live brokers.

    ``allow_destructive`` names the topics whose refused changes may proceed (compaction removal is
    then applied; partition decreases and replication-factor changes are skipped, as Kafka cannot
    do them here). Raises ``TopicSpecError`` when a topic needs more replicas than there are brokers.
    """
    allowed = frozenset(allow_destructive)
    _check_replication_factor(desired, observed, broker_count)
    changes = tuple(_plan_topic(spec, observed.get(spec.name), spec.name in allowed) for spec in desired)
    return TopicPlan(changes=changes, broker_count=broker_count, allow_destructive=allowed)


def _check_replication_factor(
    desired: Iterable[TopicSpec], observed: Mapping[str, ObservedTopic], broker_count: int
) -> None:
    issues = []
    for spec in desired:
        current = observed.get(spec.name)
        if current is not None and current.replication_factor == spec.replication_factor:
            # Already placed; a temporarily missing broker must not block unrelated changes.
            continue
        if spec.replication_factor > broker_count:
            issues.append(
                SpecIssue(
                    spec.name,
                    "replication_factor",
                    f"{spec.replication_factor} exceeds the {broker_count} broker(s) available; "
                    "choose the environment that matches this cluster (e.g. 'local' for a single "
                    "broker) or add brokers",
                )
            )
    if issues:
        raise TopicSpecError(issues, "plan")


def _plan_topic(spec: TopicSpec, current: ObservedTopic | None, opted_in: bool) -> TopicChange:
    if current is None:
        return TopicChange(topic=spec.name, actions=(Action.CREATE,), spec=spec)

    actions: list[Action] = []
    refused: list[RefusedChange] = []
    notes: list[str] = []

    if spec.partitions > current.partitions:
        actions.append(Action.INCREASE_PARTITIONS)
        if spec.compacted:
            notes.append(
                "adding partitions to a compacted topic remaps keys: older values of a key stay "
                "in their old partition until overwritten"
            )
    elif spec.partitions < current.partitions:
        refused.append(
            RefusedChange(
                spec.name,
                RefusalKind.DECREASE_PARTITIONS,
                "partitions",
                str(spec.partitions),
                str(current.partitions),
                opted_in,
            )
        )

    if spec.replication_factor != current.replication_factor:
        refused.append(
            RefusedChange(
                spec.name,
                RefusalKind.CHANGE_REPLICATION_FACTOR,
                "replication_factor",
                str(spec.replication_factor),
                str(current.replication_factor),
                opted_in,
            )
        )

    drift, config_refused, config_notes = _config_drift(spec, current, opted_in)
    refused.extend(config_refused)
    notes.extend(config_notes)
    if drift:
        actions.append(Action.ALTER_CONFIGS)

    if refused:
        actions.append(Action.REFUSED)
    if not actions:
        actions.append(Action.UNCHANGED)
    return TopicChange(
        topic=spec.name,
        actions=tuple(actions),
        spec=spec,
        current_partitions=current.partitions,
        current_replication_factor=current.replication_factor,
        config_drift=tuple(drift),
        refused=tuple(refused),
        notes=tuple(notes),
    )


def _config_drift(
    spec: TopicSpec, current: ObservedTopic, opted_in: bool
) -> tuple[list[ConfigDrift], list[RefusedChange], list[str]]:
    """The declared configs whose value on the cluster differs (to SET), the refused ones (removing
    compaction without opting in) and notes for the operator."""
    refused: list[RefusedChange] = []
    notes: list[str] = []
    drift: list[ConfigDrift] = []
    for key, expected in sorted(spec.configs.items()):
        actual = current.configs.get(key)
        if config_values_equal(key, expected, actual):
            continue
        inherited = current.inherited.get(key) if actual is None else None
        destructive = False
        if key == CLEANUP_POLICY and _removes_compaction(expected, current.effective(key)):
            if not opted_in:
                refused.append(
                    RefusedChange(
                        spec.name,
                        RefusalKind.REMOVE_COMPACTION,
                        CLEANUP_POLICY,
                        expected,
                        current.effective(key) or "",
                    )
                )
                # Not applied; the rest of this topic's drift is still reported.
                continue
            destructive = True
            notes.append("compaction removal opted in via allow_destructive: it will be applied")
        drift.append(ConfigDrift(key, expected, actual, inherited, destructive))
    return drift, refused, notes


def _removes_compaction(expected: str, actual: str | None) -> bool:
    return "compact" in cleanup_tokens(actual) and "compact" not in cleanup_tokens(expected)


def _details(change: TopicChange) -> list[str]:
    spec = change.spec
    details: list[str] = []
    if Action.CREATE in change.actions:
        configs = " ".join(f"{k}={v}" for k, v in sorted(spec.configs.items()))
        details.append(f"partitions={spec.partitions} replication_factor={spec.replication_factor}")
        if configs:
            details.append(f"configs: {configs}")
    if Action.INCREASE_PARTITIONS in change.actions:
        details.append(f"partitions: {change.current_partitions} -> {spec.partitions}")
    details.extend(drift.describe() for drift in change.config_drift)
    for refusal in change.refused:
        status = "skipped (opted in, still impossible)" if refusal.opted_in else "REFUSED"
        details.append(
            f"{status}: {refusal.kind.value}: {refusal.field} {refusal.actual} -> {refusal.expected}"
        )
        details.append(f"  why: {refusal.reason}")
    details.extend(f"note: {note}" for note in change.notes)
    if change.actions == (Action.UNCHANGED,):
        details.append(
            f"partitions={spec.partitions} replication_factor={spec.replication_factor}, configs match"
        )
    return details


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)
