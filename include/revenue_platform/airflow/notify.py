"""Alerts to people: a task that failed for good, and a blue-green replay that waits for an approval.

One Airflow connection (`platform_alerts`) says where they go: its host, port, login and password are
the SMTP server, its extra which channels carry alerts (`email`: recipients, sender, TLS mode;
`webhook`: a URL that gets every alert as a JSON POST). Every platform task has `TaskFailureNotifier`
as its `on_failure_callback` (`dag_defaults`) but a run's failure watcher, whose failure only restates
one already alerted; the replay's approval task has `ApprovalRequestNotifier` as its HITL notifier.
A refused request pages nobody: a run a person started whose task stopped on a refusal of its form or
conf (`ConfigError`, `AppConfigError`: raised before anything is touched, naming the field) is red in
the UI for that person, and its task log says no alert was sent (`refused_request`); the same error in a
scheduled, asset-triggered or backfill run is the platform's own config gone wrong and alerts, and so
does a `PlatformConfigError` (an invalid `[revenue_platform]` Airflow option) in any run.
Alerting never changes what a run does: without the connection it logs one line and sends nothing,
and a channel that fails (SMTP down) is logged while the task's own outcome stands.
Messages are plain text built here from values, never rendered as templates (an error text with
`{{ }}` stays text), and mail headers go through `email.message.EmailMessage`, which refuses line
breaks; error texts are masked like Airflow masks its logs.
"""

from __future__ import annotations

import json
import logging
import re
import traceback
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any, Literal
from urllib.parse import urlsplit

from airflow.sdk import BaseNotifier
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from revenue_platform.connections import ALERTS_CONN_ID
from revenue_platform.errors import ConfigError, PlatformConfigError
from spark_apps.contract.config import AppConfigError
from spark_apps.contract.config_rules import validation_problems

log = logging.getLogger(__name__)

SUBJECT_PREFIX = "[revenue platform]"
MAX_SUBJECT_CHARS = 200
MAX_ERROR_CHARS = 4000
TRACEBACK_LINES = 40


LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
# What chat webhooks (Slack, Mattermost) read as markup in `text`: `<!channel>` and `<url|label>`
# (escaped as Slack documents: &amp; &lt; &gt;) and @-mentions (a word joiner after the @ keeps the
# text as it reads and notifies nobody). Alert texts echo values people typed (a refused form value,
# an error message): they must not page a channel or show a disguised link.
_CHAT_MARKUP = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_MENTION = re.compile(r"@(?=\w)")
WORD_JOINER = "\u2060"


def chat_text(text: str) -> str:
    """`text` as a chat webhook shows it literally: no mention, no link markup."""
    return _MENTION.sub("@" + WORD_JOINER, text.translate(_CHAT_MARKUP))


def _no_line_breaks(value: str) -> str:
    if "\r" in value or "\n" in value:
        raise ValueError("must not contain line breaks")
    return value


class EmailChannel(BaseModel):
    """`email` in the connection's extra: who gets alerts by mail, from whom, over which TLS mode."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    to: list[str] = Field(min_length=1, description="Recipient addresses.")
    sender: str = Field(alias="from", description="The From address.")
    security: Literal["starttls", "ssl", "none"] = Field(
        "starttls", description="starttls (port 587), ssl (port 465) or none (a local relay only)."
    )
    timeout_s: float = Field(10.0, gt=0, le=120, description="Bound on connecting and sending.")

    @field_validator("to")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        for address in value:
            _no_line_breaks(address)
            if "@" not in address:
                raise ValueError(f"{address!r} is not a mail address")
        return value

    @field_validator("sender")
    @classmethod
    def _sender(cls, value: str) -> str:
        return _no_line_breaks(value)


class WebhookChannel(BaseModel):
    """`webhook` in the connection's extra: an http(s) URL that gets each alert as a JSON POST."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="http(s) URL; a Slack or Mattermost incoming webhook shows `text`.")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra headers, e.g. a token.")
    timeout_s: float = Field(10.0, gt=0, le=120, description="Bound on the POST.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        # urllib would also open file:// or ftp:// URLs.
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
            raise ValueError(
                "must be https:// unless its host is this machine (localhost, 127.0.0.1, ::1): over "
                "http:// the alert and the channel's headers, a token among them, cross the network in clear"
            )
        return value

    @field_validator("headers")
    @classmethod
    def _header_values(cls, value: dict[str, str]) -> dict[str, str]:
        for name, header in value.items():
            _no_line_breaks(name)
            _no_line_breaks(header)
        return value


class AlertChannels(BaseModel):
    """The connection's extra: each channel present is used; neither = nothing is sent."""

    model_config = ConfigDict(extra="forbid")

    email: EmailChannel | None = None
    webhook: WebhookChannel | None = None


@dataclass(frozen=True)
class SmtpServer:
    """The SMTP server from the connection's own fields."""

    host: str
    port: int
    login: str | None = None
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Alert:
    """One message: a subject line, a plain-text body, and the facts a webhook gets as JSON fields."""

    event: Literal["task_failed", "approval_requested"]
    subject: str
    text: str
    facts: dict[str, Any] = field(default_factory=dict)

    def webhook_payload(self) -> dict[str, Any]:
        """`text` first-class, so chat webhooks show the whole message without a template; subject and
        text escaped for chat (`chat_text`), the facts as they are (data, not markup)."""
        return {
            "event": self.event,
            "subject": chat_text(self.subject),
            "text": chat_text(self.text),
            **self.facts,
        }


def subject_line(*parts: str) -> str:
    """One header-safe line: whitespace runs (line breaks too) become one space, capped in length."""
    line = " ".join(" ".join(parts).split())
    return line if len(line) <= MAX_SUBJECT_CHARS else line[: MAX_SUBJECT_CHARS - 1] + "…"


def describe_error(error: BaseException | str | None) -> tuple[str, str]:
    """(the error line, the last lines of its traceback) of what failed the task, masked and bounded."""
    if error is None:
        return "no error was recorded (the task may have been killed or timed out)", ""
    if isinstance(error, str):
        return _masked(error)[:MAX_ERROR_CHARS], ""
    line = f"{type(error).__name__}: {error}"
    frames = traceback.format_exception(type(error), error, error.__traceback__)
    tail = "".join(frames).splitlines()[-TRACEBACK_LINES:]
    return _masked(line)[:MAX_ERROR_CHARS], _masked("\n".join(tail))


def _masked(text: str) -> str:
    """Secrets Airflow knows of (connection passwords, masked variables) replaced as in task logs."""
    try:
        from airflow.sdk._shared.secrets_masker import redact
    except ImportError:  # pragma: no cover - a future Airflow moving its masker must not stop alerts
        return text
    return str(redact(text))


def failure_alert(
    dag_id: str,
    run_id: str,
    task_id: str,
    try_number: int | None,
    error: BaseException | str | None,
    log_url: str,
) -> Alert:
    """The alert for a task that failed for good (no retry left)."""
    error_line, error_trace = describe_error(error)
    tries = f", try {try_number}" if try_number else ""
    lines = [
        f"Task {task_id} of DAG {dag_id} failed (run {run_id}{tries}); no retry is left.",
        "",
        "Error:",
        error_line,
        "",
        f"Log: {log_url}",
    ]
    if error_trace:
        lines += ["", f"Traceback (last {TRACEBACK_LINES} lines at most):", error_trace]
    return Alert(
        "task_failed",
        subject_line(SUBJECT_PREFIX, f"FAILED {dag_id}.{task_id}", f"(run {run_id})"),
        "\n".join(lines),
        {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "error": error_line, "log_url": log_url},
    )


def approval_alert(
    dag_id: str,
    run_id: str,
    task_id: str,
    question: str,
    evidence: str,
    approval_url: str,
    answer_by: str | None = None,
    details: Mapping[str, Any] | None = None,
) -> Alert:
    """The alert for a task that waits for a person: the question, the evidence and where to answer."""
    deadline = f" Without an answer by {answer_by} it is rejected." if answer_by else ""
    lines = [
        f"DAG {dag_id} (run {run_id}) waits at {task_id} for a person to approve or reject.{deadline}",
        "",
        question,
        "",
        evidence,
        "",
        f"Approve or reject in the Airflow UI: {approval_url}",
    ]
    facts = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "approval_url": approval_url}
    return Alert(
        "approval_requested",
        subject_line(SUBJECT_PREFIX, f"APPROVAL NEEDED {dag_id}:", question),
        "\n".join(lines),
        {**facts, "answer_by": answer_by, "details": dict(details or {})},
    )


def email_message(alert: Alert, channel: EmailChannel) -> EmailMessage:
    """The mail for `alert`; EmailMessage's default policy refuses a header value with a line break."""
    message = EmailMessage()
    message["Subject"] = alert.subject
    message["From"] = channel.sender
    message["To"] = ", ".join(channel.to)
    message["Date"] = formatdate(localtime=False)
    message["Message-ID"] = make_msgid(domain=channel.sender.rpartition("@")[2].strip("<> ") or None)
    message.set_content(alert.text)
    return message


def send_email(server: SmtpServer, channel: EmailChannel, message: EmailMessage) -> None:
    """Deliver `message` through the SMTP server, with the channel's TLS mode and login if any."""
    import smtplib
    import ssl

    tls = ssl.create_default_context()
    client: smtplib.SMTP
    if channel.security == "ssl":
        client = smtplib.SMTP_SSL(server.host, server.port, timeout=channel.timeout_s, context=tls)
    else:
        client = smtplib.SMTP(server.host, server.port, timeout=channel.timeout_s)
    with client:
        if channel.security == "starttls":
            client.starttls(context=tls)
        if server.login:
            client.login(server.login, server.password or "")
        client.send_message(message)


def post_webhook(channel: WebhookChannel, payload: Mapping[str, Any]) -> None:
    """POST `payload` as JSON; an HTTP error status raises (urllib's HTTPError), and so does a
    redirect: urllib would follow it with the channel's headers (a token among them) to whatever host
    the answer names."""
    body = json.dumps(payload, default=str).encode()
    headers = {**channel.headers, "Content-Type": "application/json"}
    request = urllib.request.Request(channel.url, data=body, headers=headers, method="POST")
    opener = urllib.request.build_opener(_RefuseRedirects)
    with opener.open(request, timeout=channel.timeout_s) as response:
        response.read()


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        raise urllib.error.HTTPError(
            req.full_url,
            code,
            f"the webhook answered {code} {msg}, a redirect to {urlsplit(newurl).hostname!r}: not "
            "followed (the channel's headers would go along); set the URL it redirects to",
            headers,
            fp,
        )


def load_alert_settings(conn_id: str = ALERTS_CONN_ID) -> tuple[SmtpServer | None, AlertChannels] | None:
    """The SMTP server and channels of the alerts connection; None when it is not defined."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        connection = Connection.get(conn_id)
    except AirflowNotFoundException:
        return None
    channels = AlertChannels.model_validate(connection.extra_dejson)
    server = (
        SmtpServer(connection.host, int(connection.port or 25), connection.login, connection.password)
        if connection.host
        else None
    )
    return server, channels


def deliver(alert: Alert, conn_id: str = ALERTS_CONN_ID) -> list[str]:
    """Send `alert` on every configured channel; returns the channels that took it. Never raises:
    a broken channel or connection is logged, and the caller's outcome stands."""
    try:
        settings = load_alert_settings(conn_id)
    except ValidationError as error:
        # Field and reason only: pydantic's own text would repeat the values, a webhook token among them.
        problems = validation_problems(error)
        log.error("alert not sent: the extra of connection %r is invalid: %s", conn_id, problems)
        return []
    except Exception:
        log.exception("alert not sent: connection %r could not be read", conn_id)
        return []
    if settings is None:
        log.info("no Airflow connection %r: alert not sent (%s)", conn_id, alert.subject)
        return []
    server, channels = settings
    senders: dict[str, Any] = {}
    if channels.email is not None:
        email = channels.email
        senders["email"] = lambda: _send_email_to(server, email, alert)
    if channels.webhook is not None:
        webhook = channels.webhook
        senders["webhook"] = lambda: post_webhook(webhook, alert.webhook_payload())
    delivered = []
    for name, send in senders.items():
        try:
            send()
        except Exception:
            log.exception("alert %r not delivered by %s (connection %r)", alert.subject, name, conn_id)
        else:
            delivered.append(name)
    log.info("alert %r sent by %s", alert.subject, ", ".join(delivered) or "no channel")
    return delivered


def _send_email_to(server: SmtpServer | None, channel: EmailChannel, alert: Alert) -> None:
    if server is None:
        raise ValueError("the connection has an email channel but no host (the SMTP server)")
    send_email(server, channel, email_message(alert, channel))


class PlatformNotifier(BaseNotifier):
    """An Airflow notifier that builds one `Alert` from the context and delivers it; it never raises,
    so neither a failure callback nor an approval task is changed by an alert that could not go out."""

    def __init__(self, conn_id: str = ALERTS_CONN_ID) -> None:
        super().__init__()
        self.conn_id = conn_id

    def build_alert(self, context: Mapping[str, Any]) -> Alert:
        raise NotImplementedError

    def notify(self, context: Any) -> None:
        try:
            alert = self.build_alert(context)
        except Exception:
            log.exception("alert not sent: it could not be built from the task's context")
            return
        deliver(alert, self.conn_id)


# What a refusal is: the platform's "this request is invalid" errors, raised before anything is touched.
REFUSALS: tuple[type[BaseException], ...] = (ConfigError, AppConfigError)
# Runs a person starts (the trigger form, the REST API, `airflow dags trigger`, `dag.test()`).
PERSON_STARTED_RUN_TYPES = frozenset({"manual"})


def refused_request(context: Mapping[str, Any]) -> BaseException | None:
    """The refusal a person's run failed on (the error), or None: a failure worth an alert. The
    platform's own settings gone wrong (`PlatformConfigError`) are never the person's refusal."""
    error = context.get("exception")
    run_type = getattr(context.get("dag_run"), "run_type", None)
    started_by_a_person = str(getattr(run_type, "value", run_type)) in PERSON_STARTED_RUN_TYPES
    refused = isinstance(error, REFUSALS) and not isinstance(error, PlatformConfigError)
    return error if refused and started_by_a_person else None


class TaskFailureNotifier(PlatformNotifier):
    """`on_failure_callback` of every platform task: which DAG, run and task failed, the error, the log;
    nothing for a refused request (`refused_request`)."""

    def notify(self, context: Any) -> None:
        refusal = refused_request(context)
        if refusal is None:
            super().notify(context)
            return
        ti = context["ti"]
        log.warning(
            "no alert: %s.%s (run %s) refused the request of the person who started it, which is not "
            "a platform failure: %s",
            ti.dag_id,
            ti.task_id,
            ti.run_id,
            describe_error(refusal)[0],
        )

    def build_alert(self, context: Mapping[str, Any]) -> Alert:
        ti = context["ti"]
        return failure_alert(
            ti.dag_id,
            ti.run_id,
            ti.task_id,
            getattr(ti, "try_number", None),
            context.get("exception"),
            str(getattr(ti, "log_url", "")),
        )


class ApprovalRequestNotifier(PlatformNotifier):
    """HITL notifier: the approval task's question (subject) and evidence (body), and the link to answer.

    Airflow calls it after the request is written and before the task parks, with the task's rendered
    subject and body.
    """

    def build_alert(self, context: Mapping[str, Any]) -> Alert:
        task, ti = context["task"], context["ti"]
        extra = dict(getattr(task, "hitl_summary_extra", {}) or {})
        return approval_alert(
            ti.dag_id,
            ti.run_id,
            ti.task_id,
            str(task.subject),
            str(task.body or ""),
            approval_link(context),
            extra.get("timeout_datetime"),
            extra.get("evidence"),
        )


def approval_link(context: Mapping[str, Any]) -> str:
    """The task's "Required actions" page in the Airflow UI (api.base_url), else its log page."""
    from airflow.providers.standard.operators.hitl import HITLOperator

    try:
        return HITLOperator.generate_link_to_ui_from_context(context=context)  # type: ignore[arg-type]
    except ValueError:  # no api.base_url configured
        return str(context["ti"].log_url)
