"""Alerts reach people: a real SMTP server (aiosmtpd) and a real HTTP server stand in for the mail relay
and the chat webhook of the `platform_alerts` connection.

A platform DAG that fails under `dag.test()` (real task instances, the migrated metadata DB) mails and
posts an alert naming the DAG, run and task with the error; a run refused on its form or conf (a
person's mistake, not a platform failure) pages nobody and says so in its log; a failed blue-green
replay alerts once, for the task that failed (its `fail_if_any_failed` watcher, which only restates
that, stays quiet); the blue-green approval task's notifier, called as Airflow's HITL operator calls
it, sends the gates' numbers and the link to answer. Without the connection nothing is sent and the
run fails as before; with the mail server down the webhook still gets the alert and the task's own
error stands.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import pytest
from aiosmtpd.controller import Controller

from revenue_platform.airflow.notify import chat_text
from revenue_platform.connections import ALERTS_CONN_ID, connection_env_var
from tests.approval_helpers import CAUGHT_UP, DIFF, QUALITY, REQUEST
from tests.port_helpers import free_loopback_port
from tests.streaming_helpers import load_dags, task_states

pytestmark = pytest.mark.integration

RECIPIENTS = ["oncall@example.com", "lead@example.com"]
# A conf key the DAG does not declare fails its first task; the braces must arrive as text.
BAD_CONF = {"deploymnet_id{{ 7 * 7 }}": "green"}


class Inbox:
    """aiosmtpd handler keeping every message it accepts."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.recipients: list[list[str]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.content, policy=policy.default))  # type: ignore[arg-type]
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 OK"


@pytest.fixture
def inbox() -> Iterator[tuple[Inbox, int]]:
    handler, port = Inbox(), free_loopback_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield handler, port
    finally:
        controller.stop()


@pytest.fixture
def webhook() -> Iterator[tuple[list[dict[str, Any]], str]]:
    received: list[dict[str, Any]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            assert self.headers["Content-Type"] == "application/json"
            received.append(json.loads(self.rfile.read(length)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received, f"http://127.0.0.1:{server.server_address[1]}/alerts"
    finally:
        server.shutdown()
        server.server_close()


def _alerts_connection(monkeypatch: pytest.MonkeyPatch, smtp_port: int, webhook_url: str) -> None:
    extra = {
        "email": {"to": RECIPIENTS, "from": "airflow@example.com", "security": "none", "timeout_s": 5},
        "webhook": {"url": webhook_url, "timeout_s": 5},
    }
    connection = {"conn_type": "generic", "host": "127.0.0.1", "port": smtp_port, "extra": extra}
    monkeypatch.setenv(connection_env_var(ALERTS_CONN_ID), json.dumps(connection))


@pytest.fixture
def alerts(
    inbox: tuple[Inbox, int], webhook: tuple[list[dict[str, Any]], str], monkeypatch: pytest.MonkeyPatch
) -> tuple[Inbox, list[dict[str, Any]]]:
    """The platform_alerts connection pointing at both servers; what each of them received."""
    (mail, smtp_port), (posts, url) = inbox, webhook
    _alerts_connection(monkeypatch, smtp_port, url)
    return mail, posts


@pytest.fixture(scope="module")
def dags(airflow_db: Any) -> dict[str, Any]:
    return load_dags("stop_streaming_app")


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    root = str(tmp_path / "lake")
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", root)
    return root


# A deployment no registry holds: stopping it fails with DeploymentNotFoundError, a platform failure.
GHOST = {"deployment_id": "ghost"}


def _fail_the_first_task(dags: dict[str, Any], conf: dict[str, Any] | None = None) -> Any:
    """A stop_streaming_app run whose only task fails (on a deployment the lake does not have, unless
    `conf` says otherwise): the run is failed."""
    run = dags["stop_streaming_app"].test(run_conf=GHOST if conf is None else conf)
    assert run.state == "failed"
    assert task_states(run)["stop"] == "failed"
    return run


def test_a_failed_task_is_mailed_and_posted_naming_dag_run_and_task_with_the_error(
    dags: dict[str, Any], lake: str, alerts: tuple[Inbox, list[dict[str, Any]]]
) -> None:
    mail, posts = alerts

    run = _fail_the_first_task(dags)
    [message] = mail.messages
    assert message["Subject"] == f"[revenue platform] FAILED stop_streaming_app.stop (run {run.run_id})"
    assert message["To"] == ", ".join(RECIPIENTS)
    assert mail.recipients == [RECIPIENTS]
    body = message.get_content().replace("\r\n", "\n")
    assert "DeploymentNotFoundError" in body
    assert "ghost" in body
    assert f"/dags/stop_streaming_app/runs/{quote(run.run_id)}/tasks/stop" in body
    [post] = posts
    assert (post["event"], post["dag_id"], post["run_id"], post["task_id"]) == (
        "task_failed",
        "stop_streaming_app",
        run.run_id,
        "stop",
    )
    assert "ghost" in post["error"]
    # The same text, escaped for chat (nothing to escape here but what a URL may hold).
    assert post["text"] == chat_text(body.rstrip("\n"))


def test_a_refused_request_pages_nobody_and_its_log_says_so(
    dags: dict[str, Any],
    lake: str,
    alerts: tuple[Inbox, list[dict[str, Any]]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A typo in a form is the person's to fix, in front of them; on-call is not woken for it."""
    mail, posts = alerts

    run = _fail_the_first_task(dags, BAD_CONF)

    assert (mail.messages, posts) == ([], [])
    [said] = [r.getMessage() for r in caplog.records if r.name == "revenue_platform.airflow.notify"]
    assert said.startswith(f"no alert: stop_streaming_app.stop (run {run.run_id}) refused the request")
    # The refused key is named as typed: never rendered as a template (it would read deploymnet_id49).
    assert "unknown conf key(s) 'deploymnet_id{{ 7 * 7 }}'" in said


def test_a_failed_replay_alerts_once_naming_the_task_that_failed_not_the_watcher(
    airflow_db: Any, lake: str, alerts: tuple[Inbox, list[dict[str, Any]]]
) -> None:
    mail, posts = alerts
    replay = load_dags("blue_green_replay")["blue_green_replay"]

    # An empty lake: the blue it names is not registered.
    run = replay.test(run_conf={"green_deployment_id": "green-1", "blue_deployment_id": "ghost"})

    states = task_states(run)
    assert run.state == "failed", states
    assert states["validate_request"] == "failed"
    assert states["fail_if_any_failed"] == "failed", "the watcher still fails the run"
    [message] = mail.messages
    subject = f"[revenue platform] FAILED blue_green_replay.validate_request (run {run.run_id})"
    assert message["Subject"] == subject
    assert "ghost" in message.get_content()
    assert [(post["task_id"], post["event"]) for post in posts] == [("validate_request", "task_failed")]


def test_without_the_connection_nothing_is_sent_and_the_run_fails_as_before(
    dags: dict[str, Any],
    lake: str,
    inbox: tuple[Inbox, int],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _fail_the_first_task(dags)

    assert inbox[0].messages == []
    alerts_log = [r.getMessage() for r in caplog.records if r.name == "revenue_platform.airflow.notify"]
    assert len(alerts_log) == 1
    assert alerts_log[0].startswith(f"no Airflow connection '{ALERTS_CONN_ID}': alert not sent")
    assert "DeploymentNotFoundError" in "".join(capfd.readouterr())


def test_a_mail_server_that_is_down_is_logged_and_the_webhook_still_alerts(
    dags: dict[str, Any],
    lake: str,
    webhook: tuple[list[dict[str, Any]], str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    posts, url = webhook
    _alerts_connection(monkeypatch, free_loopback_port(), url)  # nothing listens there

    _fail_the_first_task(dags)

    log = "".join(capfd.readouterr()) + caplog.text
    assert "not delivered by email" in log
    assert "DeploymentNotFoundError" in log, "the task's own error is still in its log"
    assert [post["event"] for post in posts] == ["task_failed"]


def test_a_replay_awaiting_approval_sends_the_gates_numbers_and_the_link_to_answer(
    airflow_db: Any, alerts: tuple[Inbox, list[dict[str, Any]]]
) -> None:
    mail, posts = alerts
    dag = load_dags("blue_green_replay")["blue_green_replay"]
    approval = dag.get_task("request_approval")
    # What the gates returned in a real run, as Airflow renders them into the task before it runs.
    approval.request, approval.caught_up, approval.quality, approval.diff = REQUEST, CAUGHT_UP, QUALITY, DIFF
    approval.fill_in_prompt()
    approval.hitl_summary_extra["timeout_datetime"] = "2026-11-27T09:00:00+00:00"
    run_id = "asset_triggered__2026-11-26T09:00:00+00:00"
    ti = SimpleNamespace(
        dag_id="blue_green_replay",
        run_id=run_id,
        task_id="request_approval",
        map_index=-1,
        log_url="http://localhost/log",
    )

    # What HITLOperator.execute does once the request is written, before the task parks.
    for notifier in approval.notifiers:
        notifier({"task": approval, "ti": ti, "task_instance": ti, "dag": dag})

    [message] = mail.messages
    assert message["Subject"] == (
        "[revenue platform] APPROVAL NEEDED blue_green_replay: "
        "Promote green green-2 (version 2.1.0) to live in place of blue?"
    )
    body = message.get_content().replace("\r\n", "\n")
    assert "**Diff** over 48 closed windows both cover" in body
    assert "| orders | 1200 | 1200 | +0 |" in body
    assert "| revenue | 12345.67 | 12345.68 | +0.01 |" in body
    assert "**Quality**: passed: 23 expectations, 0 failed" in body
    # The UI page where a person approves or rejects (the stack's api.base_url).
    assert (
        f"/dags/blue_green_replay/runs/{run_id}/tasks/request_approval/required_actions?map_index=-1" in body
    )
    [post] = posts
    assert post["event"] == "approval_requested"
    assert post["details"]["diff"]["windows_compared"] == 48
    assert post["details"]["version"] == "2.1.0"
    assert post["approval_url"].endswith("/tasks/request_approval/required_actions?map_index=-1")
