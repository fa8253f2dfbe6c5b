"""Errors raised by topic provisioning, each carrying enough structure to say exactly what is wrong.

Spec problems are collected (not raised one at a time) so a single run reports every broken topic
and field; refused destructive changes are listed one per topic with how to opt in. The broker
connectivity error is the platform-wide ``revenue_platform.errors.BrokerUnreachableError``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from revenue_platform.errors import ConfigError, PlatformError

if TYPE_CHECKING:
    from revenue_platform.topics.plan import RefusedChange


@dataclass(frozen=True)
class SpecIssue:
    """One problem in a topic spec: which topic (None for file-level problems), which field, and why."""

    topic: str | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"topic {self.topic!r}, field {self.field!r}" if self.topic else f"field {self.field!r}"
        return f"{where}: {self.message}"


class TopicSpecError(ConfigError, ValueError):
    """The topic spec (or the request made against it) is invalid; raised before any broker change."""

    def __init__(self, issues: Sequence[SpecIssue], source: str | None = None) -> None:
        self.issues: tuple[SpecIssue, ...] = tuple(issues)
        self.source = source
        where = f" in {source}" if source else ""
        lines = "\n".join(f"  - {issue}" for issue in self.issues)
        super().__init__(f"Invalid topic spec{where}: {len(self.issues)} problem(s)\n{lines}")

    def __reduce__(self) -> tuple[type[TopicSpecError], tuple[tuple[SpecIssue, ...], str | None]]:
        # Keeps the exception picklable despite the custom __init__.
        return (type(self), (self.issues, self.source))


class DestructiveChangeRefused(PlatformError):
    """The plan contains changes that could lose data or that Kafka cannot do, and nobody opted in."""

    def __init__(self, refused: Sequence[RefusedChange]) -> None:
        self.refused = tuple(refused)
        lines = "\n".join(f"  - {change.describe()}" for change in self.refused)
        topics = sorted({change.topic for change in self.refused})
        super().__init__(
            f"Refusing to apply the plan: {len(self.refused)} destructive change(s) without opt-in; "
            f"nothing was changed.\n{lines}\n"
            "Fix the spec, or opt in per topic with the `allow_destructive` param, e.g. "
            f"{json.dumps({'allow_destructive': topics})}"
        )

    def __reduce__(self) -> tuple[type[DestructiveChangeRefused], tuple[tuple[RefusedChange, ...]]]:
        return (type(self), (self.refused,))
