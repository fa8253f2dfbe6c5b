"""Load and validate the declarative Kafka topic spec (``include/topics/topics.yaml``).

The YAML file lists every topic the platform uses once, plus per-environment overrides (replication
factor, configs such as ``min.insync.replicas``) that are layered over every topic, so ``local`` and
``cluster`` share one spec. Everything is validated here, before the broker is contacted: unknown
keys, wrong types, impossible values, unknown or removed Kafka config names, bad cleanup policies,
duplicate topics and ``min.insync.replicas`` above the replication factor. All problems are
collected and raised together as one ``TopicSpecError`` naming each topic and field. The result is
a list of resolved, immutable ``TopicSpec`` objects whose config values are normalised to the
strings Kafka reports.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from revenue_platform.topics.configs import (
    CLEANUP_POLICY,
    MIN_INSYNC_REPLICAS,
    ConfigValueError,
    normalize_config_value,
)
from revenue_platform.topics.errors import SpecIssue, TopicSpecError

SPEC_PATH_ENV = "TOPIC_SPEC_PATH"
ENVIRONMENT_ENV = "PLATFORM_ENV"
DEFAULT_ENVIRONMENT = "local"
# include/revenue_platform/topics/spec.py -> include/topics/topics.yaml
DEFAULT_SPEC_PATH = Path(__file__).resolve().parents[2] / "topics" / "topics.yaml"

# Kafka's own rule for topic names; "__" is reserved for broker-internal topics.
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
# Kafka stores replication factor as int16.
_MAX_REPLICATION_FACTOR = 32767


class _StrictModel(BaseModel):
    # strict: "4" is not a partition count and `true` is not a number; forbid: typos are errors.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _TopicDocument(_StrictModel):
    name: str
    description: str = Field(min_length=1)
    partitions: int = Field(ge=1)
    replication_factor: int = Field(ge=1, le=_MAX_REPLICATION_FACTOR)
    # Values are typed per config name by normalize_config_value, which gives clearer errors than a
    # pydantic union would.
    configs: dict[str, Any] = Field(default_factory=dict)


class _EnvironmentDocument(_StrictModel):
    replication_factor: int | None = Field(default=None, ge=1, le=_MAX_REPLICATION_FACTOR)
    configs: dict[str, Any] = Field(default_factory=dict)


class _SpecDocument(_StrictModel):
    version: Literal[1]
    environments: dict[str, _EnvironmentDocument] = Field(default_factory=dict)
    # Validated topic by topic (not as list[_TopicDocument]) so every error can name its topic.
    topics: list[Any] = Field(min_length=1)


@dataclass(frozen=True)
class TopicSpec:
    """One desired topic after environment overrides; config values are Kafka-normalised strings."""

    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)
    description: str = ""

    @property
    def compacted(self) -> bool:
        return "compact" in self.configs.get(CLEANUP_POLICY, "").split(",")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "partitions": self.partitions,
            "replication_factor": self.replication_factor,
            "configs": dict(sorted(self.configs.items())),
            "description": self.description,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TopicSpec:
        return cls(
            name=str(data["name"]),
            partitions=int(data["partitions"]),
            replication_factor=int(data["replication_factor"]),
            configs={str(k): str(v) for k, v in dict(data.get("configs", {})).items()},
            description=str(data.get("description", "")),
        )


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys, which PyYAML would silently overwrite."""


def _construct_unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise TopicSpecError(
                [
                    SpecIssue(
                        None,
                        str(key),
                        f"duplicate key on line {key_node.start_mark.line + 1} "
                        f"(first on line {seen[key] + 1}); YAML would silently keep only the last one",
                    )
                ]
            )
        seen[key] = key_node.start_mark.line
    loader.flatten_mapping(node)
    return dict(loader.construct_pairs(node, deep=True))


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def default_spec_path() -> Path:
    """The spec file to use: ``$TOPIC_SPEC_PATH`` if set, else ``include/topics/topics.yaml``."""
    override = os.environ.get(SPEC_PATH_ENV, "").strip()
    return Path(override) if override else DEFAULT_SPEC_PATH


def resolve_environment(requested: str | None = None) -> str:
    """The environment to provision: the explicit value, else ``$PLATFORM_ENV``, else ``local``."""
    if requested and requested.strip():
        return requested.strip()
    return os.environ.get(ENVIRONMENT_ENV, "").strip() or DEFAULT_ENVIRONMENT


def load_topic_spec(path: str | os.PathLike[str], environment: str = DEFAULT_ENVIRONMENT) -> list[TopicSpec]:
    """Read, validate and resolve the topic spec at ``path`` for ``environment``.

    Raises ``TopicSpecError`` listing every problem (topic and field) found; never touches Kafka.
    """
    spec_path = Path(path)
    try:
        text = spec_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TopicSpecError(
            [SpecIssue(None, "path", f"cannot read topic spec: {exc.strerror or exc}")], str(spec_path)
        ) from exc
    try:
        return parse_topic_spec(text, environment)
    except TopicSpecError as exc:
        # Re-raised with the file name so the task log says which spec was wrong.
        raise TopicSpecError(exc.issues, str(spec_path)) from None


def parse_topic_spec(text: str, environment: str = DEFAULT_ENVIRONMENT) -> list[TopicSpec]:
    """Validate spec YAML ``text`` and resolve it for ``environment`` (see ``load_topic_spec``)."""
    try:
        # A SafeLoader subclass: no arbitrary object construction.
        raw = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise TopicSpecError([SpecIssue(None, "yaml", f"not valid YAML: {exc}")]) from exc
    if not isinstance(raw, dict):
        raise TopicSpecError([SpecIssue(None, "document", "the spec must be a YAML mapping")])

    try:
        document = _SpecDocument.model_validate(raw)
    except ValidationError as exc:
        raise TopicSpecError(_issues_from_validation(None, exc)) from None

    issues: list[SpecIssue] = []
    env_overrides = _resolve_environment_overrides(document, environment, issues)
    topics: list[TopicSpec] = []
    seen: set[str] = set()
    for index, raw_topic in enumerate(document.topics):
        label = _topic_label(raw_topic, index)
        try:
            topic = _TopicDocument.model_validate(raw_topic)
        except ValidationError as exc:
            issues.extend(_issues_from_validation(label, exc))
            continue
        name_problem = _topic_name_problem(topic.name)
        if name_problem:
            issues.append(SpecIssue(label, "name", name_problem))
            continue
        if topic.name in seen:
            issues.append(SpecIssue(topic.name, "name", "duplicate topic name; each topic is declared once"))
            continue
        seen.add(topic.name)
        if "\n" in topic.description.strip():
            issues.append(SpecIssue(topic.name, "description", "must be a single line"))
        resolved = _resolve_topic(topic, environment, env_overrides, issues)
        if resolved is not None:
            topics.append(resolved)

    if issues:
        raise TopicSpecError(issues)
    return topics


def select_topics(specs: Sequence[TopicSpec], names: Iterable[str] | None) -> list[TopicSpec]:
    """Restrict ``specs`` to ``names`` (all when empty/None); unknown names are a ``TopicSpecError``."""
    wanted = [name for name in (names or []) if name]
    if not wanted:
        return list(specs)
    known = {spec.name for spec in specs}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise TopicSpecError(
            [
                SpecIssue(name, "topics", f"not declared in the spec (declared: {', '.join(sorted(known))})")
                for name in unknown
            ]
        )
    return [spec for spec in specs if spec.name in set(wanted)]


def _resolve_environment_overrides(
    document: _SpecDocument, environment: str, issues: list[SpecIssue]
) -> tuple[int | None, dict[str, str]]:
    overrides = document.environments.get(environment)
    if overrides is None:
        available = ", ".join(sorted(document.environments)) or "none declared"
        issues.append(
            SpecIssue(None, "environment", f"unknown environment {environment!r} (available: {available})")
        )
        return None, {}
    configs: dict[str, str] = {}
    for key, value in overrides.configs.items():
        try:
            configs[key] = normalize_config_value(key, value)
        except ConfigValueError as exc:
            issues.append(SpecIssue(None, f"environments.{environment}.configs.{key}", str(exc)))
    return overrides.replication_factor, configs


def _resolve_topic(
    topic: _TopicDocument,
    environment: str,
    env_overrides: tuple[int | None, dict[str, str]],
    issues: list[SpecIssue],
) -> TopicSpec | None:
    env_replication_factor, env_configs = env_overrides
    configs: dict[str, str] = {}
    ok = True
    for key, value in topic.configs.items():
        try:
            configs[key] = normalize_config_value(key, value)
        except ConfigValueError as exc:
            issues.append(SpecIssue(topic.name, f"configs.{key}", str(exc)))
            ok = False
    # Environment values win: they describe the cluster (broker count, durability), not the topic.
    configs.update(env_configs)
    replication_factor = env_replication_factor or topic.replication_factor

    min_isr = configs.get(MIN_INSYNC_REPLICAS)
    if min_isr is not None and int(min_isr) > replication_factor:
        issues.append(
            SpecIssue(
                topic.name,
                f"configs.{MIN_INSYNC_REPLICAS}",
                f"{min_isr} exceeds replication_factor {replication_factor} in environment "
                f"{environment!r}: producers using acks=all could never write",
            )
        )
        ok = False
    min_lag = configs.get("min.compaction.lag.ms")
    max_lag = configs.get("max.compaction.lag.ms")
    if min_lag is not None and max_lag is not None and int(min_lag) > int(max_lag):
        issues.append(
            SpecIssue(
                topic.name,
                "configs.min.compaction.lag.ms",
                f"{min_lag} is greater than max.compaction.lag.ms {max_lag}",
            )
        )
        ok = False
    if not ok:
        return None
    return TopicSpec(
        name=topic.name,
        partitions=topic.partitions,
        replication_factor=replication_factor,
        configs=configs,
        description=topic.description.strip(),
    )


def _topic_label(raw_topic: Any, index: int) -> str:
    # Name the topic even when its entry is broken, falling back to its position in the list.
    if isinstance(raw_topic, dict) and isinstance(raw_topic.get("name"), str) and raw_topic["name"]:
        return str(raw_topic["name"])
    return f"topics[{index}]"


def _topic_name_problem(name: str) -> str | None:
    if not _TOPIC_NAME.match(name):
        return "must be 1-249 characters of letters, digits, '.', '_' or '-'"
    if name in (".", ".."):
        return "'.' and '..' are not valid topic names"
    if name.startswith("__"):
        return "names starting with '__' are reserved for Kafka's internal topics"
    return None


def _issues_from_validation(topic: str | None, exc: ValidationError) -> list[SpecIssue]:
    issues = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"]) or ("topic entry" if topic else "document")
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown key (not part of the spec format)"
        elif "input" in error and error["type"] != "missing":
            message = f"{message} (got {error['input']!r})"
        issues.append(SpecIssue(topic, loc, message))
    return issues
