"""Defaults every platform DAG shares: owner, one retry, errors that retrying cannot fix, an alert.

A spec error, a refused change or a missing deployment fails the same way on every attempt;
those fail at once (Airflow 3.3's ExceptionRetryPolicy), while anything else (a broker
hiccup) gets the one retry. A task that fails for good alerts the people the `platform_alerts`
connection names (`notify.TaskFailureNotifier`), once: a run's failure watcher, which only restates
that failure, stays quiet (`failure_watcher.FailureWatcherOperator`). DAG files build their
default_args here instead of copying them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from airflow.sdk import ExceptionRetryPolicy, RetryAction, RetryRule

from revenue_platform.airflow.notify import TaskFailureNotifier

OWNER = "platform"


def fail_without_retry(*exceptions: type[BaseException]) -> ExceptionRetryPolicy:
    """A retry policy that fails immediately on `exceptions` and retries anything else as usual."""
    return ExceptionRetryPolicy(
        rules=[
            RetryRule(
                exception=list(exceptions),
                action=RetryAction.FAIL,
                reason="not fixable by retrying; see the error message",
            )
        ]
    )


def platform_default_args(
    retry_delay: timedelta | None = None,
    non_retryable: tuple[type[BaseException], ...] = (),
    *,
    retries: int = 1,
) -> dict[str, Any]:
    """default_args for a platform DAG: owner, `retries` after `retry_delay`, no retry on `non_retryable`,
    and an alert when a task has failed for good (a retry is not a failure worth waking anyone for)."""
    args: dict[str, Any] = {
        "owner": OWNER,
        "retries": retries,
        "on_failure_callback": [TaskFailureNotifier()],
    }
    if retry_delay is not None:
        args["retry_delay"] = retry_delay
    if non_retryable:
        args["retry_policy"] = fail_without_retry(*non_retryable)
    return args


def actor_from_context(context: Mapping[str, Any]) -> str:
    """Who does it, for audit logs: the DAG run, and the user who triggered it (when one did)."""
    user = getattr(context["dag_run"], "triggering_user_name", None)
    return f"airflow:{context['dag'].dag_id}/{context['run_id']}" + (f" (user {user})" if user else "")


# What actor_from_context writes when a user triggered the run: "airflow:<dag_id>/<run_id> (user <name>)".
_ACTOR_USER = re.compile(r"airflow:[^/\s]+/\S+? \(user (?P<user>.+)\)")


def user_of_actor(actor: str | None) -> str | None:
    """The user an audit actor of `actor_from_context` names (who triggered the run), else None."""
    match = _ACTOR_USER.fullmatch(actor or "")
    return match["user"] if match else None
