"""The alerts' messages and channel settings: what a person reads, and what may never reach a header."""

from __future__ import annotations

import json
import re
import threading
from email import message_from_bytes, policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.error import HTTPError

import pytest
from pydantic import ValidationError

from revenue_platform.airflow.notify import (
    MAX_SUBJECT_CHARS,
    WORD_JOINER,
    AlertChannels,
    EmailChannel,
    WebhookChannel,
    approval_alert,
    describe_error,
    email_message,
    failure_alert,
    post_webhook,
)

EMAIL = EmailChannel.model_validate(
    {"to": ["oncall@example.com", "lead@example.com"], "from": "af@example.com"}
)
LOG_URL = "http://localhost:8080/dags/stop_streaming_app/runs/manual__1/tasks/stop?try_number=1"


def _raised(error: Exception) -> Exception:
    try:
        raise error
    except Exception as caught:
        return caught


def test_a_failure_alert_names_dag_run_and_task_and_carries_the_error_and_log() -> None:
    error = _raised(ValueError("unknown conf key(s) 'deploymnet_id'"))

    alert = failure_alert("stop_streaming_app", "manual__1", "stop", 2, error, LOG_URL)

    assert alert.subject == "[revenue platform] FAILED stop_streaming_app.stop (run manual__1)"
    assert "ValueError: unknown conf key(s) 'deploymnet_id'" in alert.text
    assert "try 2" in alert.text
    assert f"Log: {LOG_URL}" in alert.text
    assert "Traceback" in alert.text
    assert "_raised" in alert.text
    assert alert.webhook_payload()["event"] == "task_failed"
    assert alert.webhook_payload()["task_id"] == "stop"


def test_a_failure_without_an_exception_still_says_so() -> None:
    # A task killed from outside (heartbeat lost) reaches the callback without an exception.
    line, trace = describe_error(None)
    assert "no error was recorded" in line
    assert trace == ""
    assert describe_error("killed: heartbeat timeout") == ("killed: heartbeat timeout", "")


def test_line_breaks_in_values_never_reach_a_header() -> None:
    error = _raised(RuntimeError("boom\nBcc: attacker@example.com"))

    alert = failure_alert("dag", "manual__x\r\nBcc: attacker@example.com", "task", 1, error, LOG_URL)
    raw = email_message(alert, EMAIL).as_bytes()
    parsed = message_from_bytes(raw, policy=policy.default)

    assert "\n" not in alert.subject
    assert "\r" not in alert.subject
    assert parsed["Bcc"] is None
    assert parsed["To"] == "oncall@example.com, lead@example.com"
    assert "Bcc: attacker@example.com" in parsed.get_content()  # kept, as text of the body


def test_values_are_text_not_templates() -> None:
    alert = failure_alert("dag", "run", "task", 1, _raised(KeyError("{{ conf.secret_key }}")), LOG_URL)
    assert "{{ conf.secret_key }}" in alert.text


def test_a_long_subject_is_cut_to_one_bounded_line() -> None:
    alert = approval_alert("blue_green_replay", "r", "request_approval", "x" * 500, "", "http://u")
    assert len(alert.subject) == MAX_SUBJECT_CHARS
    assert alert.subject.endswith("…")


def test_an_approval_alert_has_the_question_the_evidence_the_link_and_the_deadline() -> None:
    details = {"version": "2.1.0", "diff": {"windows_compared": 48}}

    alert = approval_alert(
        "blue_green_replay",
        "asset_triggered__1",
        "request_approval",
        "Promote green green-2 (version 2.1.0) to live in place of blue?",
        "**Diff** over 48 closed windows",
        "http://localhost:8080/dags/blue_green_replay/runs/asset_triggered__1/tasks/request_approval/required_actions",
        "2026-11-27T09:00:00+00:00",
        details,
    )

    assert alert.subject == (
        "[revenue platform] APPROVAL NEEDED blue_green_replay: "
        "Promote green green-2 (version 2.1.0) to live in place of blue?"
    )
    assert "**Diff** over 48 closed windows" in alert.text
    assert "Approve or reject in the Airflow UI: http://localhost:8080/dags/blue_green_replay/" in alert.text
    assert "Without an answer by 2026-11-27T09:00:00+00:00 it is rejected." in alert.text
    payload = alert.webhook_payload()
    assert payload["event"] == "approval_requested"
    assert payload["details"] == details
    assert payload["approval_url"].endswith("/required_actions")


def test_the_mail_is_plain_text_with_sender_recipients_and_date() -> None:
    alert = failure_alert("dag", "run", "task", 1, "error", LOG_URL)
    message = email_message(alert, EMAIL)
    assert message.get_content_type() == "text/plain"
    assert message["From"] == "af@example.com"
    assert message["Subject"] == alert.subject
    assert message["Date"]
    assert message["Message-ID"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"webhook": {"url": "file:///etc/passwd"}}, "webhook.url"),
        ({"webhook": {"url": "https://"}}, "webhook.url"),
        # A token in clear text over the network: http only to this machine.
        ({"webhook": {"url": "http://hooks.example.com/alerts"}}, "webhook.url"),
        ({"webhook": {"url": "http://10.0.0.7/alerts"}}, "webhook.url"),
        (
            {"webhook": {"url": "https://hooks.example.com", "headers": {"X-Token": "a\r\nb"}}},
            "webhook.headers",
        ),
        ({"email": {"to": [], "from": "af@example.com"}}, "email.to"),
        ({"email": {"to": ["not-an-address"], "from": "af@example.com"}}, "email.to"),
        ({"email": {"to": ["a@example.com"], "from": "af@example.com\nBcc: x@example.com"}}, "email.from"),
        ({"email": {"to": ["a@example.com"], "from": "af@example.com", "security": "tls"}}, "email.security"),
        ({"slack": {"url": "https://hooks.example.com"}}, "slack"),
    ],
)
def test_bad_channel_settings_are_refused_naming_the_field(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        AlertChannels.model_validate(extra)
    assert field in str(refused.value)


def test_channels_are_the_sections_present() -> None:
    both = AlertChannels.model_validate(
        {
            "email": {"to": ["a@example.com"], "from": "af@example.com"},
            "webhook": {"url": "https://h.example"},
        }
    )
    assert both.email is not None
    assert both.email.security == "starttls"
    assert both.webhook is not None
    assert AlertChannels.model_validate({}) == AlertChannels()


def test_an_invalid_connection_is_logged_by_field_without_its_values(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from revenue_platform.airflow.notify import deliver

    webhook = {"url": "file:///etc/passwd", "headers": {"Authorization": "Bearer s3cret-token\n"}}
    connection = {"conn_type": "generic", "extra": {"webhook": webhook}}
    monkeypatch.setenv("AIRFLOW_CONN_PLATFORM_ALERTS", json.dumps(connection))

    assert deliver(failure_alert("dag", "run", "task", 1, "error", LOG_URL)) == []

    assert "webhook.url: Value error, must be an http:// or https:// URL" in caplog.text
    assert "webhook.headers" in caplog.text
    assert "s3cret-token" not in caplog.text


@pytest.mark.parametrize("url", ["https://hooks.example.com/x", "http://127.0.0.1:9/x", "http://localhost/x"])
def test_a_webhook_is_https_or_on_this_machine(url: str) -> None:
    assert AlertChannels.model_validate({"webhook": {"url": url}}).webhook is not None


def test_echoed_values_neither_mention_nor_link_in_chat() -> None:
    """A refused form value lands in the alert's text; in Slack `<!channel>` pages everyone and
    `<https://evil.example|the runbook>` shows a disguised link; in Mattermost `@channel` pages."""
    typed = "<!channel> see <https://evil.example|the runbook> & @channel @here a@b.example"
    alert = failure_alert("deploy_streaming_app", "manual__1", "validate", 1, f"refused: {typed}", LOG_URL)
    payload = alert.webhook_payload()
    assert "<" not in payload["text"]
    assert ">" not in payload["text"]
    assert "&lt;!channel&gt; see &lt;https://evil.example|the runbook&gt; &amp;" in payload["text"]
    assert f"@{WORD_JOINER}channel @{WORD_JOINER}here a@{WORD_JOINER}b.example" in payload["text"]
    # As read: the word joiner is invisible, and the escapes are how Slack shows < > & as text.
    shown = payload["text"].replace(WORD_JOINER, "").replace("&lt;", "<").replace("&gt;", ">")
    assert shown.replace("&amp;", "&") == alert.text
    # The facts stay data, as typed; the mail is plain text, as typed.
    assert typed in payload["error"]
    assert typed in email_message(alert, EMAIL).get_content()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_webhook_that_redirects_is_refused_and_its_headers_stay_home(status: int) -> None:
    """urllib followed a 301/302/303 (as a GET) with the channel's headers, its token among them, to
    the host the answer named."""
    seen: list[tuple[str, str | None]] = []

    class Hooks(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append((self.path, self.headers.get("Authorization")))
            if self.path == "/alerts":
                self.send_response(status)
                self.send_header("Location", f"http://127.0.0.1:{self.server.server_address[1]}/elsewhere")
                self.send_header("Content-Length", "0")
            else:
                self.send_response(204)
            self.end_headers()

        do_GET = do_POST  # a 301/302/303 is followed as a GET

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hooks)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        channel = WebhookChannel(
            url=f"http://127.0.0.1:{server.server_address[1]}/alerts",
            headers={"Authorization": "Bearer s3cret"},
        )
        with pytest.raises(HTTPError, match=re.escape("a redirect to '127.0.0.1': not followed")):
            post_webhook(channel, {"text": "hello"})
    finally:
        server.shutdown()
        server.server_close()
    assert seen == [("/alerts", "Bearer s3cret")]


def test_only_a_refusal_in_a_run_a_person_started_goes_without_an_alert() -> None:
    from types import SimpleNamespace

    from revenue_platform.airflow.notify import refused_request
    from revenue_platform.bluegreen.logic import parse_approvers
    from revenue_platform.errors import BrokerUnreachableError, ConfigError, PlatformConfigError
    from spark_apps.contract.config import AppConfigError

    def context(error: BaseException | None, run_type: str) -> dict[str, Any]:
        return {"exception": error, "dag_run": SimpleNamespace(run_type=SimpleNamespace(value=run_type))}

    typo = ConfigError("range_end: before range_start")
    assert refused_request(context(typo, "manual")) is typo
    bad_set = AppConfigError("shuffle_partitions: at most 10000")
    assert refused_request(context(bad_set, "manual")) is bad_set
    # The platform's own config gone wrong in a run nobody typed: an alert.
    for run_type in ("scheduled", "asset_triggered", "backfill"):
        assert refused_request(context(typo, run_type)) is None, run_type
    # ... and in a run a person typed: a malformed approver group met at a manual replay's switch.
    with pytest.raises(PlatformConfigError) as malformed:
        parse_approvers("alice, bob smith")
    assert refused_request(context(malformed.value, "manual")) is None
    # Anything but a refusal fails a person's run for a reason they cannot fix: an alert.
    assert refused_request(context(BrokerUnreachableError("no broker"), "manual")) is None
    assert refused_request(context(RuntimeError("boom"), "manual")) is None
    assert refused_request(context(None, "manual")) is None, "killed, timed out: no exception"
