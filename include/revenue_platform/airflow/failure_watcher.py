"""The last task of a multi-step DAG that fails the run when any of its tasks failed, without a second alert.

A teardown that succeeds (`ALL_DONE`) would otherwise leave a run whose body failed looking green, so
the watcher runs only when an upstream task failed (trigger rule `one_failed`) and fails on purpose.
It alerts nobody: the task that failed has already alerted (`notify.TaskFailureNotifier`), naming
itself and its error, and the watcher could only add "a task failed". The DAG-integrity test lets
only `one_failed` tasks go without that alert, so one failure is one message.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator, TriggerRule
from airflow.sdk.exceptions import AirflowException


class FailureWatcherOperator(BaseOperator):
    """Fails with `message` once any upstream task has failed; never retried, never alerting."""

    def __init__(self, *, message: str, **kwargs: Any) -> None:
        # Explicit arguments win over the DAG's default_args (its retries and failure alert).
        super().__init__(trigger_rule=TriggerRule.ONE_FAILED, retries=0, on_failure_callback=None, **kwargs)
        self.message = message

    def execute(self, context: Any) -> None:
        raise AirflowException(self.message)
