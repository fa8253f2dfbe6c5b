"""A small client of Airflow 3's REST API: log in, trigger a DAG run, wait for it.

`make demo` drives the running local Airflow through the same public API a user's
scripts would, instead of bypassing the scheduler.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime
from typing import Any

from revenue_platform.errors import PlatformError

TERMINAL_STATES = {"success", "failed"}
SERVER_ERROR_ATTEMPTS = 4
# How much of a failed task's log a failed run's error carries: its cause (the exception, a driver
# log's tail inside it) without the whole log.
FAILED_TASK_LOG_LINES = 40


def log_lines(content: Any) -> list[str]:
    """The lines of a task log as Airflow's logs endpoint returns it (`content`: structured messages,
    or plain strings from an older log): each message's text and its exceptions' types and values;
    the UI's `::group::` markers left out."""
    lines: list[str] = []
    for entry in content or []:
        if isinstance(entry, str):
            lines.extend(entry.splitlines())
            continue
        if not isinstance(entry, dict):
            continue
        event = str(entry.get("event") or "")
        if event and not event.startswith("::"):
            lines.extend(event.splitlines())
        for error in entry.get("error_detail") or []:
            if isinstance(error, dict):
                lines.extend(f"{error.get('exc_type', 'Error')}: {error.get('exc_value', '')}".splitlines())
    return lines


class DagRunFailed(PlatformError):
    """A DAG run ended in a state other than success."""


class AirflowApiClient:
    """Authenticated calls to /api/v2 of one Airflow API server."""

    def __init__(self, base_url: str, username: str, password: str) -> None:
        self.base_url = base_url.rstrip("/")
        self._username = username
        self._password = password
        self._token: str | None = None

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None, auth: bool = True) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self._login()}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.base_url}{path}", data=data, headers=headers, method=method)
        for attempt in range(1, SERVER_ERROR_ATTEMPTS + 1):
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    raw = response.read()
                break
            except urllib.error.HTTPError as error:
                detail = error.read().decode(errors="replace")[:500]
                # A 5xx from a busy single-machine Airflow (SQLite locked) is transient: try again.
                if error.code >= 500 and attempt < SERVER_ERROR_ATTEMPTS:
                    time.sleep(2 * attempt)
                    continue
                raise PlatformError(f"{method} {path} -> HTTP {error.code}: {detail}") from error
        content_type = response.headers.get("Content-Type", "")
        return json.loads(raw) if raw and "json" in content_type else raw.decode(errors="replace")

    def _login(self) -> str:
        if self._token is None:
            answer = self._request(
                "POST", "/auth/token", {"username": self._username, "password": self._password}, auth=False
            )
            self._token = answer["access_token"]
        return self._token

    def get(self, path: str) -> Any:
        """GET an Airflow REST path (e.g. `/api/v2/dags/~/dagRuns?state=failed`) as the logged-in user."""
        return self._request("GET", path)

    def wait_for_dag(
        self, dag_id: str, timeout_s: float = 120.0, progress: Callable[[str], None] = print
    ) -> None:
        """Wait until the DAG processor has parsed `dag_id` (a fresh stack needs a few seconds)."""
        started = time.monotonic()
        while True:
            try:
                dag = self._request("GET", f"/api/v2/dags/{dag_id}")
                if not dag.get("has_import_errors"):
                    return
            except PlatformError:
                pass
            if time.monotonic() - started > timeout_s:
                raise PlatformError(
                    f"DAG {dag_id} was not parsed within {timeout_s:.0f}s; check the import errors."
                )
            progress(f"[airflow] waiting for DAG {dag_id} to be parsed ...")
            time.sleep(3)

    def trigger(self, dag_id: str, conf: dict[str, Any], run_after: datetime | None = None) -> str:
        """Trigger a manual run of `dag_id` with `conf`; return its run id. With `run_after` (aware) the run
        is queued now and the scheduler starts it at that moment, not before."""
        body: dict[str, Any] = {"logical_date": None, "conf": conf}
        if run_after is not None:
            body["run_after"] = run_after.isoformat()
        run = self._request("POST", f"/api/v2/dags/{dag_id}/dagRuns", body)
        return str(run["dag_run_id"])

    def wait_for_run(
        self, dag_id: str, run_id: str, timeout_s: float = 600.0, progress: Callable[[str], None] = print
    ) -> None:
        """Poll until the run ends; raise DagRunFailed naming the failed tasks if it did not succeed."""
        started = time.monotonic()
        state = "queued"
        while time.monotonic() - started < timeout_s:
            run = self._request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
            state = run["state"]
            if state in TERMINAL_STATES:
                break
            tasks = self._request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
            summary = ", ".join(f"{ti['task_id']}={ti['state']}" for ti in tasks.get("task_instances", []))
            progress(f"[airflow] {dag_id} {state} after {time.monotonic() - started:.0f}s: {summary}")
            time.sleep(3)
        if state != "success":
            tasks = self._request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
            instances = tasks.get("task_instances", [])
            failed = [ti["task_id"] for ti in instances if ti["state"] != "success"]
            logs = "".join(
                self._failed_task_log(dag_id, run_id, ti) for ti in instances if ti["state"] == "failed"
            )
            raise DagRunFailed(
                f"DAG run {dag_id}/{run_id} ended as {state!r}; tasks not successful: {failed}. "
                f"See the task logs in the Airflow UI ({self.base_url}).{logs}"
            )
        progress(f"[airflow] {dag_id} run {run_id} succeeded")

    def _failed_task_log(self, dag_id: str, run_id: str, instance: dict[str, Any]) -> str:
        """The last lines of a failed task's log, for the error a user sees first; a note if the log
        cannot be read (the error about the run is raised either way)."""
        task_id, attempt = instance["task_id"], instance.get("try_number") or 1
        try:
            log = self._request(
                "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{attempt}"
            )
        except PlatformError as error:
            return f"\n(the log of {task_id} could not be read: {error})"
        tail = log_lines(log.get("content") if isinstance(log, dict) else [log])[-FAILED_TASK_LOG_LINES:]
        return f"\n--- the last {len(tail)} lines of {task_id}'s log (try {attempt}) ---\n" + "\n".join(tail)

    def run_and_wait(
        self,
        dag_id: str,
        conf: dict[str, Any],
        timeout_s: float = 600.0,
        progress: Callable[[str], None] = print,
    ) -> str:
        """Trigger `dag_id` and block until it succeeds; return the run id."""
        self.wait_for_dag(dag_id, progress=progress)
        run_id = self.trigger(dag_id, conf)
        progress(f"[airflow] triggered {dag_id} run {run_id}")
        self.wait_for_run(dag_id, run_id, timeout_s, progress)
        return run_id
