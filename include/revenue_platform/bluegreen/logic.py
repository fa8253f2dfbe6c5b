"""Pure decisions of a blue-green replay: green's config, its history, catch-up, the window diff, the gate.

Nothing here touches Kafka, Spark, Delta or Airflow, so every rule that decides whether a
new version may go live is unit-tested on plain values (tests/unit/revenue_platform/bluegreen/). The
orchestration module feeds these functions with what it read from the registry, the
progress files and the gold tables.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from revenue_platform.errors import ConfigError, PlatformConfigError

# Fields of the blue config that a green replay never inherits: identity and lease come from the
# registry, where to connect from today's kafka_default connection and registry, the starting
# position is always "earliest" and the revenue topic is per deployment.
NOT_INHERITED = (
    "deployment_id",
    "lake_root",
    "kafka.bootstrap_servers",
    "app_version",
    "lease_token",
    "registry_root",
    "kafka.starting_offsets",
    "kafka.starting_timestamp_ms",
    "kafka.revenue_topic",
)

WindowKey = tuple[str, str, datetime]


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"kafka": {"a": 1}}` -> `{"kafka.a": 1}`; dict-valued leaves such as kafka.options stay whole."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and dotted != "kafka.options":
            flat.update(flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def green_overrides(
    blue_config: Mapping[str, Any], overrides: Mapping[str, Any], green_topics: Mapping[str, str]
) -> dict[str, Any]:
    """Green's config overrides: blue's registered config, then the requested changes, then green's own
    output topics (`green_topics`: dotted field -> topic), which a replay never shares with blue."""
    inherited = {
        k: v
        for k, v in flatten(blue_config).items()
        # Where blue's own history came from is blue's business: green gets its source from the plan.
        # A blue on the retired two-query engine is migrated by its replay: green runs today's engine.
        if k not in NOT_INHERITED
        and k != "history"
        and not k.startswith("history.")
        and not (k == "engine" and v == "two_queries")
    }
    for key, topic in green_topics.items():
        if key in overrides:
            raise ConfigError(
                f"config_overrides: {key} is not allowed: a green replay always writes to its own "
                f"per-deployment topic ({topic})"
            )
    return {**inherited, **overrides, **green_topics}


OffsetBounds = dict[int, tuple[int, int]]
"""Per partition: (first, last) offset of the records an archive holds, or (low, high) watermarks."""


def plan_replay_history(
    source: str, bronze_bounds: OffsetBounds, kafka_watermarks: OffsetBounds, bronze_table: str
) -> dict[str, Any] | None:
    """Where green reads its history, proven complete before anything is deployed.

    `kafka_earliest`: None (plain earliest), unless retention already deleted records blue has
    archived, which green could then never see. `bronze`: the app's `history` config, i.e. per
    partition the first offset bronze does not hold, from which Kafka must still hold every record.
    ConfigError names the partition and the offsets that would be lost.
    """
    if source == "kafka_earliest":
        lost = [
            f"partition {p}: Kafka starts at offset {low}, blue archived from offset {bronze_bounds[p][0]}"
            for p, (low, _high) in sorted(kafka_watermarks.items())
            if p in bronze_bounds and bronze_bounds[p][0] < low
        ]
        if lost:
            raise ConfigError(
                "replay_source: Kafka's retention has deleted records blue has seen ("
                + "; ".join(lost)
                + "): a replay from 'kafka_earliest' would miss them, replay from 'bronze'"
            )
        return None
    if not bronze_bounds:
        raise ConfigError(f"replay_source: 'bronze' needs blue's bronze archive, but {bronze_table} is empty")
    cut_over: dict[int, int] = {}
    problems = []
    for partition, (low, _high) in sorted(kafka_watermarks.items()):
        if partition in bronze_bounds:
            first_not_archived = bronze_bounds[partition][1] + 1
            if first_not_archived < low:
                problems.append(
                    f"partition {partition}: offsets {first_not_archived}..{low - 1} are in neither bronze "
                    "nor Kafka (let blue catch up before replaying)"
                )
            cut_over[partition] = first_not_archived
        elif low > 0:
            problems.append(
                f"partition {partition}: bronze holds none of it and Kafka starts at offset {low}"
            )
        else:
            cut_over[partition] = -2  # nothing archived yet: all of it is still in Kafka
    missing = sorted(set(bronze_bounds) - set(kafka_watermarks))
    if missing:
        problems.append(f"partitions {missing} are archived in bronze but not in the topic any more")
    if problems:
        raise ConfigError("replay_source: 'bronze' cannot cover the whole history: " + "; ".join(problems))
    return {"bronze_table": bronze_table, "kafka_offsets": cut_over}


@dataclass(frozen=True)
class CatchUp:
    """How far green is behind the latest offsets, judged against the threshold."""

    offsets_behind: int | None
    processed_rows_per_second: float | None
    caught_up: bool
    eta_s: float | None
    history_pending: bool = False

    def describe(self) -> str:
        behind = "unknown (no batch yet)" if self.offsets_behind is None else str(self.offsets_behind)
        rate = "?" if self.processed_rows_per_second is None else f"{self.processed_rows_per_second:.1f}"
        eta = "?" if self.eta_s is None else f"{self.eta_s:.0f}s"
        pending = ", bronze history still being read" if self.history_pending else ""
        return f"offsets behind {behind}{pending}, rate {rate} rows/s, ETA {eta}"


def judge_catch_up(summary: Mapping[str, Any], max_offsets_behind: int) -> CatchUp:
    """Judge the supervisor's `progress_summary`: every query must be at most `max_offsets_behind` behind."""
    queries = summary.get("queries") or {}
    behinds = [q.get("max_offsets_behind_latest") for q in queries.values()]
    known = [int(b) for b in behinds if b is not None]
    # A query without a batch yet has no lag figure: never call that caught up.
    behind = max(known) if known and len(known) == len(behinds) else None
    # A replay from bronze must also have read all of its history (which Kafka's lag does not show).
    history_pending = any(q.get("history_pending") for q in queries.values())
    rate = summary.get("processed_rows_per_second")
    rate = float(rate) if rate is not None else None
    eta = behind / rate if behind is not None and rate else None
    caught_up = behind is not None and behind <= max_offsets_behind and not history_pending
    return CatchUp(behind, rate, caught_up, eta, history_pending)


@dataclass(frozen=True)
class WindowDiff:
    """Blue against green over the final windows both cover."""

    common_from: datetime | None
    common_until: datetime | None
    windows_compared: int
    mismatches: list[dict[str, Any]]
    blue_revenue: Decimal
    green_revenue: Decimal
    blue_orders: int
    green_orders: int

    @property
    def passed(self) -> bool:
        return not self.mismatches

    def summary(self, sample: int = 10) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "common_from": self.common_from.isoformat() if self.common_from else None,
            "common_until": self.common_until.isoformat() if self.common_until else None,
            "windows_compared": self.windows_compared,
            "mismatched_windows": len(self.mismatches),
            "blue_revenue": str(self.blue_revenue),
            "green_revenue": str(self.green_revenue),
            "blue_orders": self.blue_orders,
            "green_orders": self.green_orders,
            "sample": self.mismatches[:sample],
        }


def diff_windows(
    blue_rows: Sequence[Mapping[str, Any]],
    green_rows: Sequence[Mapping[str, Any]],
    final_through: datetime | None,
    revenue_tolerance: Decimal = Decimal("0.00"),
    count_tolerance: int = 0,
) -> WindowDiff:
    """Per-window count and revenue difference over the final windows both blue and green cover.

    `final_through`: windows ending at or before it are final in both deployments (the earlier of
    their `streaming.finality.final_through`; None: not known for one of them, nothing is compared).
    Covered by both = from the later of the two earliest window starts to `final_through`. A window
    present on one side only inside that range is a mismatch (the other side counts as 0). Tolerances
    are per window, absolute, inclusive.
    """
    if final_through is None or not blue_rows or not green_rows:
        return WindowDiff(None, None, 0, [], Decimal(0), Decimal(0), 0, 0)
    since = max(min(r["window_start"] for r in blue_rows), min(r["window_start"] for r in green_rows))
    until = final_through

    def index(rows: Sequence[Mapping[str, Any]]) -> dict[WindowKey, tuple[int, Decimal]]:
        return {
            (r["location_id"], r["order_type"], r["window_start"]): (
                int(r["order_count"]),
                Decimal(r["revenue"]),
            )
            for r in rows
            if r["window_start"] >= since and r["window_end"] <= until
        }

    blue, green = index(blue_rows), index(green_rows)
    mismatches = []
    for key in sorted(blue.keys() | green.keys()):
        blue_count, blue_revenue = blue.get(key, (0, Decimal(0)))
        green_count, green_revenue = green.get(key, (0, Decimal(0)))
        if (
            abs(green_count - blue_count) > count_tolerance
            or abs(green_revenue - blue_revenue) > revenue_tolerance
        ):
            mismatches.append(
                {
                    "location_id": key[0],
                    "order_type": key[1],
                    "window_start": key[2].isoformat(),
                    "blue_count": blue_count,
                    "green_count": green_count,
                    "blue_revenue": str(blue_revenue),
                    "green_revenue": str(green_revenue),
                }
            )
    return WindowDiff(
        since,
        until,
        len(blue.keys() | green.keys()),
        mismatches,
        sum((v[1] for v in blue.values()), Decimal(0)),
        sum((v[1] for v in green.values()), Decimal(0)),
        sum(v[0] for v in blue.values()),
        sum(v[0] for v in green.values()),
    )


def diff_blockers(diff_summary: Mapping[str, Any] | None) -> list[str]:
    """Why a diff summary (`WindowDiff.summary`) does not clear green (empty = it does).

    A diff over zero windows proves nothing: it blocks.
    """
    if diff_summary is None or not diff_summary.get("windows_compared"):
        return ["no final window covered by both blue and green to compare"]
    if not diff_summary.get("passed"):
        return [
            f"{diff_summary.get('mismatched_windows')} of {diff_summary['windows_compared']} final "
            "window(s) differ beyond tolerance"
        ]
    return []


def approval_given(approval: Mapping[str, Any] | None) -> tuple[bool, str | None]:
    """(approved?, by whom) from the approval task's result (Airflow's HITL `ApprovalOperator` XCom)."""
    if not approval:
        return False, None
    return approval.get("chosen_options") == ["Approve"], approval.get("responded_by_user")


def approved_by_a_requester(approved_by: Any, requesters: Iterable[str | None]) -> str | None:
    """The requester who approved their own replay (by user id or name), or None. Airflow's HITL
    result names the responder as a name, or as {"id": ..., "name": ...}."""
    if approved_by is None:
        return None
    named = (
        {approved_by.get("id"), approved_by.get("name")}
        if isinstance(approved_by, Mapping)
        else {approved_by}
    )
    responder = {str(name) for name in named if name}
    return next((str(who) for who in requesters if who and str(who) in responder), None)


APPROVERS_OPTION = ("revenue_platform", "approvers")
"""Airflow config option (env `AIRFLOW__REVENUE_PLATFORM__APPROVERS`): the user ids who may approve a
switch, comma-separated. Set where Airflow is deployed, never by a form: whoever asks for a replay
cannot choose who approves it."""
_APPROVER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,127}")
MAX_APPROVERS = 100


def parse_approvers(text: str | None) -> tuple[str, ...]:
    """The approver group from `APPROVERS_OPTION`'s text (empty: no group, any user who may see the
    run is offered the approval). Each id as the auth manager names its users (the simple auth
    manager: the user name); PlatformConfigError naming the option for anything else."""
    option = "[{}] {}".format(*APPROVERS_OPTION)
    ids = [part.strip() for part in (text or "").split(",") if part.strip()]
    if len(ids) > MAX_APPROVERS:
        raise PlatformConfigError(f"{option}: at most {MAX_APPROVERS} user ids, got {len(ids)}")
    for user_id in ids:
        if not _APPROVER_ID.fullmatch(user_id):
            raise PlatformConfigError(
                f"{option}: {user_id[:40]!r} is not a user id (letters, digits and _.@+-, "
                "at most 128, starting with a letter or digit)"
            )
    return tuple(dict.fromkeys(ids))


def assigned_approvers(approvers: Sequence[str], requesters: Iterable[str]) -> list[dict[str, str]] | None:
    """The approval task's `assigned_users` (Airflow's HITL API refuses every other user's answer
    with 403): the approver group without this replay's requesters. None when no group is
    configured. ConfigError when every approver is a requester: nobody else could approve."""
    if not approvers:
        return None
    asked = set(requesters)
    assigned = [user_id for user_id in approvers if user_id not in asked]
    if not assigned:
        raise ConfigError(
            "[{}] {}: every approver ({}) requested this replay; a switch needs another person's "
            "approval".format(*APPROVERS_OPTION, ", ".join(approvers))
        )
    return [{"id": user_id, "name": user_id} for user_id in assigned]


def approver_outside_group(approved_by: Any, approvers: Sequence[str]) -> str | None:
    """Who approved, when an approver group is configured and they are not in it (Airflow's
    `simple_auth_manager_all_admins` lets any user answer an assigned task); else None."""
    if approved_by is None or not approvers:
        return None
    user_id = approved_by.get("id") if isinstance(approved_by, Mapping) else approved_by
    return None if str(user_id) in approvers else str(user_id)


def promotion_blockers(
    caught_up: bool,
    quality_passed: bool,
    diff_summary: Mapping[str, Any] | None,
    approval_required: bool,
    approved: bool,
    self_approved_by: str | None = None,
    unassigned_approver: str | None = None,
) -> list[str]:
    """Why green may not go live (empty = promote). `self_approved_by`: the requester who approved
    their own replay (`approved_by_a_requester`); an approval is a second person's, or none.
    `unassigned_approver`: who approved from outside the approver group (`approver_outside_group`)."""
    blockers = []
    if not caught_up:
        blockers.append("green has not caught up")
    if not quality_passed:
        blockers.append("quality checks failed")
    blockers += diff_blockers(diff_summary)
    if approval_required and not approved:
        blockers.append("approval required and not given")
    elif approval_required and self_approved_by is not None:
        blockers.append(
            f"approved by {self_approved_by}, who requested it: another person must approve a switch"
        )
    elif approval_required and unassigned_approver is not None:
        blockers.append(
            "approved by {}, who is not one of the approvers ([{}] {})".format(
                unassigned_approver, *APPROVERS_OPTION
            )
        )
    return blockers


def previous_live(events: Iterable[Any], current: str | None) -> str | None:
    """The deployment that was live before `current`, from `live_switched` audit events (newest first)."""
    for event in sorted(events, key=lambda e: e.at, reverse=True):
        if event.kind == "live_switched" and event.to_value == current and event.from_value:
            return str(event.from_value)
    return None
