"""Curated catalogue of the Kafka 4.x topic-level configs a spec may declare, with value rules.

The spec is checked against this list before anything reaches the broker, so a typo
(``retention.msec``), a config removed in Kafka 4.0 (``message.format.version``) or an impossible
value (``retention.ms: -5``) fails fast with the topic and field named. The catalogue matches what a
Kafka 4.3 broker reports from ``describe_configs`` on a topic, minus the replication-throttle lists,
which belong to reassignment tooling, not to a declarative spec. Values are normalised to the
strings Kafka reports so that comparing desired and observed configs is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

ConfigKind = Literal["int", "long", "double", "bool", "enum", "list"]

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)

CLEANUP_POLICY = "cleanup.policy"
MIN_INSYNC_REPLICAS = "min.insync.replicas"


@dataclass(frozen=True)
class ConfigRule:
    """How one topic config is typed and bounded (bounds mirror the broker's own validators)."""

    kind: ConfigKind
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()


_MS = ConfigRule("long", minimum=0)

TOPIC_CONFIGS: dict[str, ConfigRule] = {
    CLEANUP_POLICY: ConfigRule("list", choices=("compact", "delete")),
    "compression.gzip.level": ConfigRule("int", minimum=-1, maximum=9),
    "compression.lz4.level": ConfigRule("int", minimum=1, maximum=17),
    "compression.type": ConfigRule(
        "enum", choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
    ),
    "compression.zstd.level": ConfigRule("int", minimum=-131072, maximum=22),
    "delete.retention.ms": _MS,
    "file.delete.delay.ms": _MS,
    "flush.messages": ConfigRule("long", minimum=1),
    "flush.ms": _MS,
    "index.interval.bytes": ConfigRule("int", minimum=0),
    # -2 means "same as retention.*" for tiered storage.
    "local.retention.bytes": ConfigRule("long", minimum=-2),
    "local.retention.ms": ConfigRule("long", minimum=-2),
    "max.compaction.lag.ms": ConfigRule("long", minimum=1),
    "max.message.bytes": ConfigRule("int", minimum=0),
    "message.timestamp.after.max.ms": _MS,
    "message.timestamp.before.max.ms": _MS,
    "message.timestamp.type": ConfigRule("enum", choices=("CreateTime", "LogAppendTime")),
    "min.cleanable.dirty.ratio": ConfigRule("double", minimum=0, maximum=1),
    "min.compaction.lag.ms": _MS,
    MIN_INSYNC_REPLICAS: ConfigRule("int", minimum=1),
    "preallocate": ConfigRule("bool"),
    "remote.log.copy.disable": ConfigRule("bool"),
    "remote.log.delete.on.disable": ConfigRule("bool"),
    "remote.storage.enable": ConfigRule("bool"),
    # -1 means unlimited.
    "retention.bytes": ConfigRule("long", minimum=-1),
    "retention.ms": ConfigRule("long", minimum=-1),
    # Kafka 4.0 raised the floor to 1 MiB (KIP-1030); smaller values are rejected by the broker.
    "segment.bytes": ConfigRule("int", minimum=1024 * 1024),
    "segment.index.bytes": ConfigRule("int", minimum=4),
    "segment.jitter.ms": _MS,
    "segment.ms": ConfigRule("long", minimum=1),
    "unclean.leader.election.enable": ConfigRule("bool"),
}

# Names people still copy from pre-4.0 docs: say why they fail instead of "unknown config".
REMOVED_IN_KAFKA_4: dict[str, str] = {
    "message.downconversion.enable": "removed in Kafka 4.0 (down-conversion no longer exists)",
    "message.format.version": "removed in Kafka 4.0 (only record format v2 is supported)",
    "message.timestamp.difference.max.ms": (
        "removed in Kafka 4.0; use message.timestamp.before.max.ms / message.timestamp.after.max.ms"
    ),
}

# Managed by partition reassignment tooling; declaring them would fight a running reassignment.
NOT_DECLARATIVE: dict[str, str] = {
    "leader.replication.throttled.replicas": "set by reassignment tooling, not declared in the spec",
    "follower.replication.throttled.replicas": "set by reassignment tooling, not declared in the spec",
}


class ConfigValueError(ValueError):
    """A config name or value is not acceptable; the message is meant to be shown next to the field."""


def unknown_config_reason(name: str) -> str | None:
    """Why ``name`` may not be declared, or None when it is a known topic config."""
    if name in TOPIC_CONFIGS:
        return None
    if name in REMOVED_IN_KAFKA_4:
        return REMOVED_IN_KAFKA_4[name]
    if name in NOT_DECLARATIVE:
        return NOT_DECLARATIVE[name]
    return "unknown Kafka topic config name (see TOPIC_CONFIGS in revenue_platform.topics.configs)"


def normalize_config_value(name: str, value: object) -> str:
    """Validate ``value`` for config ``name`` and return it as the string Kafka reports.

    Raises ``ConfigValueError`` for unknown names, wrong types and out-of-range values.
    """
    reason = unknown_config_reason(name)
    if reason is not None:
        raise ConfigValueError(reason)
    rule = TOPIC_CONFIGS[name]
    if rule.kind in ("int", "long"):
        return _normalize_integer(rule, value)
    if rule.kind == "double":
        return _normalize_double(rule, value)
    if rule.kind == "bool":
        return _normalize_bool(value)
    if rule.kind == "enum":
        return _normalize_enum(rule, value)
    return _normalize_list(rule, value)


def _normalize_integer(rule: ConfigRule, value: object) -> str:
    # bool is an int subclass in Python; `true` for a byte count is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigValueError(f"expected an integer, got {type(value).__name__} {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if not text.lstrip("-").isdigit():
            raise ConfigValueError(
                f"expected an integer, got {value!r} (durations are milliseconds, sizes are bytes)"
            )
        number = int(text)
    else:
        number = value
    low = rule.minimum if rule.minimum is not None else (LONG_MIN if rule.kind == "long" else -(2**31))
    high = rule.maximum if rule.maximum is not None else (LONG_MAX if rule.kind == "long" else INT_MAX)
    if not low <= number <= high:
        raise ConfigValueError(f"must be between {int(low)} and {int(high)}, got {number}")
    return str(number)


def _normalize_double(rule: ConfigRule, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigValueError(f"expected a number, got {type(value).__name__} {value!r}")
    try:
        number = float(value)
    except ValueError as exc:
        raise ConfigValueError(f"expected a number, got {value!r}") from exc
    if math.isnan(number) or math.isinf(number):
        raise ConfigValueError(f"expected a finite number, got {value!r}")
    if (rule.minimum is not None and number < rule.minimum) or (
        rule.maximum is not None and number > rule.maximum
    ):
        raise ConfigValueError(f"must be between {rule.minimum} and {rule.maximum}, got {number}")
    return repr(number)


def _normalize_bool(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower()
    raise ConfigValueError(f"expected true or false, got {value!r}")


def _normalize_enum(rule: ConfigRule, value: object) -> str:
    if not isinstance(value, str) or value.strip() not in rule.choices:
        raise ConfigValueError(f"must be one of {', '.join(rule.choices)}; got {value!r}")
    return value.strip()


def _normalize_list(rule: ConfigRule, value: object) -> str:
    if not isinstance(value, str):
        raise ConfigValueError(
            f"expected a comma-separated string of {', '.join(rule.choices)}; got {value!r}"
        )
    tokens = [token.strip() for token in value.split(",")]
    if not any(tokens):
        # Kafka 4 accepts an empty cleanup.policy (keep forever); a spec must say so explicitly
        # with retention.ms: -1 instead, so an empty string is always a mistake here.
        raise ConfigValueError(f"must list at least one of {', '.join(rule.choices)}; got {value!r}")
    bad = [token for token in tokens if token not in rule.choices]
    if bad:
        raise ConfigValueError(f"must be drawn from {', '.join(rule.choices)}; got {', '.join(bad)!s}")
    if len(set(tokens)) != len(tokens):
        raise ConfigValueError(f"lists a value twice: {value!r}")
    # Sorted so "delete,compact" and "compact,delete" compare equal; Kafka treats the list as a set.
    return ",".join(sorted(tokens))


def config_values_equal(name: str, expected: str, actual: str | None) -> bool:
    """True when the broker's ``actual`` value means the same as the normalised ``expected`` one."""
    if actual is None:
        return False
    rule = TOPIC_CONFIGS.get(name)
    if rule is None:
        return expected == actual
    try:
        if rule.kind in ("int", "long"):
            return int(expected) == int(actual)
        if rule.kind == "double":
            # Java prints 1.0E-5 where Python prints 1e-05: compare numbers, not text.
            return math.isclose(float(expected), float(actual), rel_tol=1e-12, abs_tol=0.0)
        if rule.kind == "bool":
            return expected.lower() == actual.strip().lower()
        if rule.kind == "list":
            return cleanup_tokens(expected) == cleanup_tokens(actual)
    except ValueError:
        return False
    return expected == actual.strip()


def cleanup_tokens(value: str | None) -> frozenset[str]:
    """The set of policies in a cleanup.policy value ("compact,delete" -> {"compact", "delete"})."""
    if not value:
        return frozenset()
    return frozenset(token.strip() for token in value.split(",") if token.strip())
