"""How the library reads a connection (`connections.read_connection`): outside Airflow from the
`AIRFLOW_CONN_<ID>` variable in Airflow's JSON form; once the Airflow face is imported, through Airflow's
own lookup. A variable it cannot read fails naming the variable, never echoing what it holds."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from revenue_platform.connections import ConnectionFields, connection_from_environment
from revenue_platform.errors import ConfigError

VARIABLE = "AIRFLOW_CONN_PROBE_STORE"


def test_a_json_connection_is_read_with_every_field(monkeypatch: pytest.MonkeyPatch) -> None:
    connection = {
        "conn_type": "aws",
        "host": "store.example",
        "port": 9000,
        "login": "key",
        "password": "secret",
        "extra": json.dumps({"endpoint_url": "http://store.example:9000"}),
    }
    monkeypatch.setenv(VARIABLE, json.dumps(connection))
    assert connection_from_environment("probe_store") == ConnectionFields(
        "store.example", 9000, "key", "secret", {"endpoint_url": "http://store.example:9000"}
    )
    monkeypatch.delenv(VARIABLE)
    assert connection_from_environment("probe_store") is None


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("aws://key:secret@store.example:9000", "JSON form"),
        ('{"extra": ["a"], "password": "secret"}', "extra must be a JSON object"),
        ('{"extra": "{not json", "password": "secret"}', "extra is not JSON"),
        ('{"port": "ninety", "password": "secret"}', "is not a number"),
        ('["secret"]', "JSON form"),
    ],
)
def test_a_variable_it_cannot_read_fails_naming_it_without_its_secret(
    monkeypatch: pytest.MonkeyPatch, text: str, names: str
) -> None:
    monkeypatch.setenv(VARIABLE, text)
    with pytest.raises(ConfigError, match=names) as refused:
        connection_from_environment("probe_store")
    assert VARIABLE in str(refused.value)
    assert "secret" not in str(refused.value)


def test_importing_the_airflow_face_installs_airflow_s_lookup() -> None:
    # A fresh interpreter: this test process imported the face long ago (every DAG file does).
    probe = (
        "import revenue_platform.connections as c\n"
        "assert c._reader is c.connection_from_environment, c._reader\n"
        "import revenue_platform.airflow\n"
        "from revenue_platform.airflow.connections import airflow_connection\n"
        "assert c._reader is airflow_connection, c._reader\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=120)


def test_airflow_s_lookup_reads_what_airflow_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    from revenue_platform.airflow.connections import airflow_connection

    monkeypatch.setenv(VARIABLE, "aws://key:secret@store.example:9000/?endpoint_url=http%3A%2F%2Fs%3A1")
    assert airflow_connection("probe_store") == ConnectionFields(
        "store.example", 9000, "key", "secret", {"endpoint_url": "http://s:1"}
    )
    monkeypatch.delenv(VARIABLE)
    assert airflow_connection("probe_store") is None
