"""The trigger forms of the DAGs: the field rules their request models share, and `validated`.

Airflow validates a run's Params, but a REST call, a test or another DAG may hand a task values the
form never saw, and JSON schema cannot express every rule (a quality interval's span, a lake root
inside the platform's lake). So each DAG's first task reads its run through
`airflow.params.run_request` (unknown conf keys refused, then the params validated by its request
model) before anything is registered, launched or written; a bad value is a ConfigError naming the
field. The replay is the one exception: its request may come from a release or the schedule
(`airflow.replay_tasks`). docs/security.md ("Input surfaces") lists the forms' bounds.

Every form is a typed request model beside its feature: a pydantic model with `FORM_MODEL_CONFIG`,
built from the shared field types below (`DeploymentId`, `TopicName`, `AuditText`, `DateTimeText`);
`airflow.params.params_from_model` builds its DAG's Params from it (each field's default,
description and bounds stated once), `validated` checks a request. The models: `streaming.request`
(`DeployForm`, `StopRequest`, `SuperviseRequest`), `bluegreen.request` (`ReplayRequest`, `RollbackRequest`,
`PublishRequest`), `reprocessing.ReprocessRequest`, `quality.request.QualityRequest`,
`lake_maintenance.MaintenanceRequest`, `topics.request.ProvisionRequest`
(tests/unit/project/test_form_params.py holds their rendered forms against a snapshot).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Annotated, Any, Final, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
)

from revenue_platform.errors import ConfigError
from spark_apps.contract.naming import DEPLOYMENT_ID_PATTERN, validate_deployment_id

Model = TypeVar("Model", bound=BaseModel)

# Lists of names a form may carry (deployments to supervise, topics to provision).
MAX_LIST_ITEMS: Final = 100
# A free-text reason recorded in the audit trail.
MAX_REASON: Final = 500
# A driver's graceful stop before it is killed.
MIN_STOP_TIMEOUT_S: Final = 1
MAX_STOP_TIMEOUT_S: Final = 3600
# A quality run loads its interval's bronze (plus the lookback) into the worker's memory: one day at
# most per run; longer checks are several runs (a backfill of the hourly schedule).
MAX_QUALITY_SPAN: Final = timedelta(days=1)
# ISO date-times in forms: at most this many characters (2026-11-22T09:00:00.000000+00:00 has 32).
MAX_DATETIME_TEXT: Final = 40
# App version labels (semver-like: 2.1.0); they end up in registry rows, deployment ids and logs,
# never in SQL or shell. Full-string: `$(?!\n)` refuses a trailing newline where JSON schema searches
# (spark_apps/contract/naming.py).
VERSION_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,62}$(?!\n)"
# Kafka topic names as the spec and the app accept them.
_TOPIC: Final = re.compile(r"[a-zA-Z0-9._-]{1,249}")
# Audit text: printable, tabs and newlines allowed, no other control characters.
TEXT_PATTERN: Final = r"^[^\x00-\x08\x0b-\x1f\x7f]*$"
_TEXT: Final = re.compile(TEXT_PATTERN)
# A date-time as the forms take it, for the JSON schema Airflow checks before a run exists (JSON
# schema's `format: date-time` is not checked there): a date of 1970..2999, optionally a time
# (HH:MM[:SS[.ffffff]]) and a zone (Z or ±HH:MM); empty = the field's default. `iso_datetime` then
# reads it (a 30th of February passes the pattern, not the model).
ISO_DATETIME_PATTERN: Final = (
    r"^(|(19[7-9][0-9]|2[0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"([T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
    r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?)?)$(?!\n)"
)


# --- the fields request models share (one rule, one message, wherever a form has the field) -------

FORM_MODEL_CONFIG: Final = ConfigDict(
    # Strict: "5" is not a number and 1 is not true. Extra keys are ignored: `refuse_unknown_conf`
    # already refused a run's unknown conf keys, and `dag.test()` keeps earlier runs' keys in params.
    strict=True,
    frozen=True,
    extra="ignore",
    validate_default=True,  # the defaults as the checked types (900 seconds -> 900.0)
    use_attribute_docstrings=True,  # a field's docstring is its description on the form
    # The forms' patterns refuse a trailing newline with a look-ahead (`$(?!\n)`), as JSON schema
    # searches; Rust's regex engine has no look-ahead.
    regex_engine="python-re",
)

# The form's pattern for the JSON schema, the friendlier rule of spark_apps/contract/naming.py for the model.
DeploymentId = Annotated[
    str,
    AfterValidator(validate_deployment_id),
    WithJsonSchema({"type": "string", "pattern": DEPLOYMENT_ID_PATTERN.pattern}),
]


def _empty_is_none(value: Any) -> Any:
    return None if value == "" else value


# On an optional field: "" (what some REST clients send for an empty field) is the same as leaving it
# out, i.e. the form's null.
EMPTY_IS_NONE: Final = BeforeValidator(_empty_is_none)
OptionalDeploymentId = Annotated[DeploymentId | None, EMPTY_IS_NONE]


def _kafka_topic_name(value: str) -> str:
    if not _TOPIC.fullmatch(value) or value in (".", ".."):
        raise ValueError(f"{value[:80]!r} is not a Kafka topic name (1-249 letters, digits, '.', '_', '-')")
    return value


# A Kafka topic name as the spec and the app accept it (the spec then checks it is declared).
TopicName = Annotated[
    str,
    AfterValidator(_kafka_topic_name),
    WithJsonSchema({"type": "string", "pattern": r"^(?!\.\.?$)[a-zA-Z0-9._-]{1,249}$(?!\n)"}),
]


def iso_datetime(value: str) -> str:
    """`value` if it is an ISO date-time `times.parse_utc` reads; ValueError otherwise (a field rule)."""
    from revenue_platform.times import parse_utc

    try:
        parse_utc(value, "value")
    except (ConfigError, OverflowError, ValueError) as error:  # year 1 with a positive offset overflows
        raise ValueError(f"{value[:40]!r} is not an ISO date-time such as 2026-11-22T09:00:00Z") from error
    return value


# An ISO date-time as a form gives it (text; `times.parse_utc` reads it as aware UTC).
DateTimeText = Annotated[
    str,
    Field(max_length=MAX_DATETIME_TEXT),
    AfterValidator(iso_datetime),
    # `format` gives the form its date-time picker; the pattern is what Airflow checks.
    WithJsonSchema(
        {
            "type": "string",
            "format": "date-time",
            "maxLength": MAX_DATETIME_TEXT,
            "pattern": ISO_DATETIME_PATTERN,
        }
    ),
]


def _without_control_characters(value: str) -> str:
    if not _TEXT.fullmatch(value):
        raise ValueError("must be text without control characters (tabs and newlines are allowed)")
    return value


# Audit text: 1..MAX_REASON characters without control characters (tabs and newlines allowed).
AuditText = Annotated[
    str,
    Field(min_length=1, max_length=MAX_REASON),
    AfterValidator(_without_control_characters),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": MAX_REASON, "pattern": TEXT_PATTERN}),
]


def validated(model: type[Model], params: Mapping[str, Any]) -> Model:
    """`params` as a `model`; a ConfigError naming each bad field (and the value) otherwise."""
    try:
        return model.model_validate(dict(params))
    except ValidationError as error:
        raise ConfigError("; ".join(_problem(issue) for issue in error.errors(include_url=False))) from error


def _problem(issue: Any) -> str:
    field = ".".join(str(part) for part in issue["loc"])
    if issue["type"] == "value_error":  # the model's own message says what is wrong with the value
        message = str(issue["msg"]).removeprefix("Value error, ")
        return f"{field}: {message}" if field else message
    return f"{field}: {issue['msg']} (got {repr(issue['input'])[:40]})"


def datetime_text(value: Any, field: str) -> datetime | None:
    """An optional ISO date-time from a form, as aware UTC; ConfigError naming `field` otherwise."""
    from revenue_platform.times import parse_utc

    if value in (None, ""):
        return None
    if isinstance(value, str) and len(value) > MAX_DATETIME_TEXT:
        raise ConfigError(f"{field}: at most {MAX_DATETIME_TEXT} characters of ISO date-time")
    if not isinstance(value, str | datetime):
        raise ConfigError(
            f"{field}: {str(value)[:40]!r} is not an ISO date-time such as 2026-11-22T09:00:00Z"
        )
    try:
        return parse_utc(value, field)
    except (OverflowError, ValueError) as error:  # year 1 with a positive offset overflows
        raise ConfigError(f"{field}: {str(value)[:40]!r} is out of range ({error})") from error


def validate_quality_interval(start: datetime, end: datetime) -> None:
    """A quality run checks a non-empty interval of at most MAX_QUALITY_SPAN."""
    if start >= end:
        raise ConfigError(f"interval_start {start.isoformat()} must be before interval_end {end.isoformat()}")
    if end - start > MAX_QUALITY_SPAN:
        raise ConfigError(
            f"interval_start..interval_end spans {end - start}, more than the {MAX_QUALITY_SPAN} one quality "
            "run may check (it loads the interval's bronze into memory): split it into several runs"
        )
