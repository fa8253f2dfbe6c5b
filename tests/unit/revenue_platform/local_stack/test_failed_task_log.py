"""What `make demo` shows of a failed task: the lines of its log as Airflow 3's logs endpoint returns them
(JSON structured messages, as a task's log file holds them), the exception's type and value included."""

from __future__ import annotations

from revenue_platform.local_stack.airflow_api import log_lines

# The shape of `GET /api/v2/dags/{dag}/dagRuns/{run}/taskInstances/{task}/logs/{try}` (application/json):
# one message per line of the task's log file, the failure with its exception in `error_detail`.
FAILED_DEPLOY_LOG = [
    {
        "timestamp": "2026-12-02T22:24:42.1Z",
        "level": "info",
        "event": "::group::Pre Execute",
        "logger": "task",
    },
    {"timestamp": "2026-12-02T22:24:42.2Z", "level": "info", "event": "[deploy] demo: launching the driver"},
    {
        "timestamp": "2026-12-02T22:24:58.9Z",
        "level": "error",
        "event": "Task failed with exception",
        "logger": "task",
        "error_detail": [
            {
                "exc_type": "DeploymentFailedError",
                "exc_value": "the streaming app of deployment 'demo' exited at start; log /x/driver.log, "
                "last lines:\nERROR StandaloneAppClient: All masters are unresponsive! Giving up.",
                "frames": [{"filename": "deploy.py", "lineno": 448, "name": "wait_for_first_heartbeat"}],
            }
        ],
    },
    {"timestamp": "2026-12-02T22:24:59.0Z", "level": "info", "event": "::endgroup::"},
]


def test_a_failed_tasks_log_gives_its_messages_and_its_exception_with_the_drivers_last_lines() -> None:
    assert log_lines(FAILED_DEPLOY_LOG) == [
        "[deploy] demo: launching the driver",
        "Task failed with exception",
        "DeploymentFailedError: the streaming app of deployment 'demo' exited at start; log /x/driver.log, "
        "last lines:",
        "ERROR StandaloneAppClient: All masters are unresponsive! Giving up.",
    ]


def test_plain_text_lines_and_unexpected_entries() -> None:
    assert log_lines(["first\nsecond", 7, {"no_event": True}, None]) == ["first", "second"]
    assert log_lines(None) == []
