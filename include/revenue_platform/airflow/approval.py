"""The promotion prompt: what a person reads before letting a replayed green go live, with the gates' numbers.

`promotion_prompt` turns the validated request and the results of `wait_for_catch_up`, `check_quality`
and `diff_against_blue` into the question (which green, which version, replacing which blue) and a
Markdown body: windows compared and beyond tolerance, orders and revenue on both sides with their
difference, the quality verdict and the catch-up, so the decision needs no log.
`PromotionApprovalOperator` is Airflow's `ApprovalOperator` asking that question; the gates' results
exist only when it runs, so it fills in the prompt then, and its notifiers send the same text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk.execution_time.hitl import HITLUser

from revenue_platform.airflow.notify import ApprovalRequestNotifier
from revenue_platform.airflow.replay_tasks import ReplayRun, configured_approvers
from revenue_platform.bluegreen.logic import assigned_approvers
from revenue_platform.bluegreen.triggers import APPROVAL_TASK_ID

UNKNOWN = "?"
APPROVAL_TIMEOUT = timedelta(hours=24)
"""How long a promotion waits for a human; then it counts as a rejection."""


@dataclass(frozen=True)
class PromotionPrompt:
    """The approval request: its question, its Markdown body and the same numbers as plain fields."""

    question: str
    body: str
    evidence: dict[str, Any]


def _decimal(value: Any) -> Decimal | None:
    try:
        return None if value is None else Decimal(str(value))
    except InvalidOperation:
        return None


def _difference(blue: Any, green: Any) -> str:
    """green - blue, signed; `?` when a side is unknown (a diff recorded before totals existed)."""
    blue_value, green_value = _decimal(blue), _decimal(green)
    if blue_value is None or green_value is None:
        return UNKNOWN
    return f"{green_value - blue_value:+}"


def _shown(value: Any) -> str:
    return UNKNOWN if value is None else str(value)


def _totals_table(blue: str, green: str, diff: Mapping[str, Any]) -> list[str]:
    lines = [f"| | {blue} (live) | {green} (replay) | difference |", "| --- | ---: | ---: | ---: |"]
    for name in ("orders", "revenue"):
        on_blue, on_green = diff.get(f"blue_{name}"), diff.get(f"green_{name}")
        lines.append(
            f"| {name} | {_shown(on_blue)} | {_shown(on_green)} | {_difference(on_blue, on_green)} |"
        )
    return lines


def _quality_line(quality: Mapping[str, Any]) -> str:
    if not quality:
        return "**Quality**: no result recorded."
    verdict = "passed" if quality.get("success") else "FAILED"
    failed: Sequence[str] = quality.get("failed_checks") or []
    failed_text = f" ({', '.join(failed)})" if failed else ""
    stats = quality.get("stats") or {}
    checked = ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in sorted(stats.items()))
    return (
        f"**Quality**: {verdict}: {_shown(quality.get('expectations'))} expectations, "
        f"{len(failed)} failed{failed_text}" + (f"; checked {checked}" if checked else "") + "."
    )


def promotion_prompt(
    request: Mapping[str, Any],
    caught_up: Mapping[str, Any] | None,
    quality: Mapping[str, Any] | None,
    diff: Mapping[str, Any] | None,
) -> PromotionPrompt:
    """The prompt for promoting the request's green over its blue, from the gates' results (XComs)."""
    green, blue, version = request["green_deployment_id"], request["blue_deployment_id"], request["version"]
    diff, quality, caught_up = dict(diff or {}), dict(quality or {}), dict(caught_up or {})
    question = f"Promote green {green} (version {version}) to live in place of {blue}?"
    window_range = f"{_shown(diff.get('common_from'))} to {_shown(diff.get('common_until'))}"
    body = [
        f"Green **{green}** (version **{version}**) replayed the history next to live **{blue}** and passed "
        f"catch-up, quality and diff. Approve to make it live; reject to stop it and keep {blue} live.",
        "",
        f"**Diff** over {_shown(diff.get('windows_compared'))} closed windows both cover ({window_range}): "
        f"{_shown(diff.get('mismatched_windows'))} beyond tolerance (per window: revenue "
        f"±{request.get('revenue_tolerance')}, orders ±{request.get('count_tolerance')}).",
        "",
        *_totals_table(blue, green, diff),
        "",
        _quality_line(quality),
        "",
        f"**Catch-up**: {_shown(caught_up.get('offsets_behind'))} offsets behind the latest "
        f"(allowed {request.get('max_offsets_behind')}).",
    ]
    evidence = {
        "green_deployment_id": green,
        "blue_deployment_id": blue,
        "version": version,
        "diff": {key: value for key, value in diff.items() if key != "sample"},
        "quality": {key: quality.get(key) for key in ("success", "expectations", "failed_checks", "stats")},
        "caught_up": caught_up,
    }
    return PromotionPrompt(question, "\n".join(body), evidence)


class PromotionApprovalOperator(ApprovalOperator):
    """`ApprovalOperator` whose subject and body are the promotion prompt of this run's gates.

    `request`, `caught_up`, `quality` and `diff` are the XComs of the tasks of those names (template
    fields, so the DAG passes the tasks' outputs).
    """

    template_fields: Sequence[str] = (
        *ApprovalOperator.template_fields,
        "request",
        "caught_up",
        "quality",
        "diff",
    )

    def __init__(self, *, request: Any, caught_up: Any, quality: Any, diff: Any, **kwargs: Any) -> None:
        # Placeholders until the gates' results exist; execute() replaces both before the request is written.
        kwargs.setdefault("subject", "Promote the blue-green replay?")
        kwargs.setdefault("task_id", APPROVAL_TASK_ID)
        # The notifier sends the prompt, with the link to answer it, to the platform_alerts channels.
        kwargs.setdefault("notifiers", [ApprovalRequestNotifier()])
        # Rejecting must end in the teardown stopping green, and a failed run says so. A human's "Reject"
        # (or the timeout) is an answer, not a glitch: a retry would only park the task and ask again.
        kwargs.setdefault("fail_on_reject", True)
        kwargs.setdefault("retries", 0)
        kwargs.setdefault("response_timeout", APPROVAL_TIMEOUT)
        super().__init__(**kwargs)
        self.request, self.caught_up, self.quality, self.diff = request, caught_up, quality, diff

    def fill_in_prompt(self) -> PromotionPrompt:
        """Subject, body and the summary's `evidence` from the (rendered) gate results."""
        prompt = promotion_prompt(self.request, self.caught_up, self.quality, self.diff)
        self.subject, self.body = prompt.question, prompt.body
        self.hitl_summary_extra["evidence"] = prompt.evidence
        return prompt

    def execute(self, context: Any) -> Any:
        # Before Airflow writes the request and calls the notifiers, which both read subject and body.
        self.fill_in_prompt()
        # Who may answer: the configured approver group without this replay's requesters (Airflow's
        # HITL API refuses anyone else); read at run time, so a form cannot choose its own approver.
        assigned = assigned_approvers(configured_approvers(), ReplayRun.current().requesters(self.request))
        self.assigned_users = (
            None if assigned is None else [HITLUser(id=user["id"], name=user["name"]) for user in assigned]
        )
        return super().execute(context)
