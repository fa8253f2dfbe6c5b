"""The local stack is closed by default: loopback binds, a generated login, full-strength secrets."""

from __future__ import annotations

import base64
import http.server
import json
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from revenue_platform.local_stack.airflow_local import (
    LOCAL_ADMIN_USER,
    LOCAL_APPROVER_USER,
    AirflowLocalSettings,
    airflow_environment,
    local_admin_password,
    local_password,
    signing_secrets,
)
from revenue_platform.spark_submit import spark_submit_command
from spark_apps.engine.session import loopback_driver_conf
from tests.port_helpers import free_loopback_port


def _settings(tmp_path: Path) -> AirflowLocalSettings:
    return AirflowLocalSettings(home=tmp_path / "airflow", port=18999, kafka_bootstrap_servers="localhost:1")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_api_server_listens_on_loopback_unless_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = airflow_environment(_settings(tmp_path))
    assert env["AIRFLOW__API__HOST"] == "127.0.0.1"

    monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("AIRFLOW_HOST", raising=False)
    assert AirflowLocalSettings.from_env("localhost:1").host == "127.0.0.1"
    monkeypatch.setenv("AIRFLOW_HOST", "0.0.0.0")
    opened = AirflowLocalSettings.from_env("localhost:1")
    assert airflow_environment(opened)["AIRFLOW__API__HOST"] == "0.0.0.0"


def test_the_admin_password_is_generated_once_into_a_0600_file(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    env = airflow_environment(settings)

    passwords = Path(env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
    assert passwords == tmp_path / "secrets" / "airflow_passwords.json"
    assert _mode(passwords) == 0o600
    stored = json.loads(passwords.read_text())
    password = stored[LOCAL_ADMIN_USER]
    assert password != "admin"
    assert len(password) >= 32
    assert local_admin_password(settings) == password, "generated once, then reused"
    airflow_environment(settings)
    assert json.loads(passwords.read_text()) == stored
    # Another stack (another state dir) gets its own password.
    assert local_admin_password(_settings(tmp_path / "other")) != password


def test_signing_secrets_are_at_least_64_bytes_shared_by_every_component_and_0600(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    env = airflow_environment(settings)

    secrets_file = tmp_path / "secrets" / "airflow_signing_secrets.json"
    assert _mode(secrets_file) == 0o600
    for variable, name in (
        ("AIRFLOW__API_AUTH__JWT_SECRET", "jwt_secret"),
        ("AIRFLOW__API__SECRET_KEY", "secret_key"),
    ):
        value = env[variable]
        assert value == signing_secrets(settings)[name]
        assert len(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))) >= 64
    assert env["AIRFLOW__API_AUTH__JWT_SECRET"] != env["AIRFLOW__API__SECRET_KEY"]
    assert (
        airflow_environment(settings)["AIRFLOW__API_AUTH__JWT_SECRET"] == env["AIRFLOW__API_AUTH__JWT_SECRET"]
    )


def test_a_world_readable_passwords_file_from_an_older_version_is_tightened(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    settings.passwords_file.parent.mkdir(parents=True)
    settings.passwords_file.write_text(json.dumps({LOCAL_ADMIN_USER: "kept-as-it-was"}))
    settings.passwords_file.chmod(0o644)

    assert local_admin_password(settings) == "kept-as-it-was"
    assert _mode(settings.passwords_file) == 0o600


def test_a_second_person_approves_switches_with_a_password_of_their_own(tmp_path: Path) -> None:
    """The approver is never the requester, so the local stack has two users; a passwords file of an
    older version (admin only) gets the approver's added, the admin's kept."""
    settings = _settings(tmp_path)
    settings.passwords_file.parent.mkdir(parents=True)
    settings.passwords_file.write_text(json.dumps({LOCAL_ADMIN_USER: "kept-as-it-was"}))

    approver = local_password(settings, LOCAL_APPROVER_USER)
    assert len(approver) >= 32
    assert approver != "kept-as-it-was"
    assert json.loads(settings.passwords_file.read_text()) == {
        LOCAL_ADMIN_USER: "kept-as-it-was",
        LOCAL_APPROVER_USER: approver,
    }
    assert _mode(settings.passwords_file) == 0o600
    assert local_password(settings, LOCAL_APPROVER_USER) == approver, "generated once, then reused"
    users = airflow_environment(settings)["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"]
    assert users == f"{LOCAL_ADMIN_USER}:admin,{LOCAL_APPROVER_USER}:admin"
    # Only the second person is assigned the replays' approvals (the admin triggers them).
    assert airflow_environment(settings)["AIRFLOW__REVENUE_PLATFORM__APPROVERS"] == LOCAL_APPROVER_USER


def test_local_spark_drivers_bind_loopback_and_cluster_masters_are_left_alone() -> None:
    assert loopback_driver_conf("local[2]") == {
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }
    assert loopback_driver_conf("spark://cluster:7077") == {}
    # `make cluster-up`'s master is on this machine's loopback: so are its executors and the driver.
    assert loopback_driver_conf("spark://127.0.0.1:7077") == {
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }
    local = spark_submit_command("orders_streaming_app.py", [], master="local[*]")
    assert "spark.driver.bindAddress=127.0.0.1" in local
    assert "spark.driver.host=127.0.0.1" in local
    cluster = spark_submit_command("orders_streaming_app.py", [], master="yarn")
    assert not any(part.startswith("spark.driver.bindAddress") for part in cluster)


def test_standalone_runs_the_scheduler_and_triggerer_without_log_servers() -> None:
    from revenue_platform.airflow.standalone import component_command

    assert component_command("scheduler", ["scheduler"]) == ["scheduler", "--skip-serve-logs"]
    assert component_command("triggerer", ["triggerer"]) == ["triggerer", "--skip-serve-logs"]
    assert component_command("api-server", ["api-server"]) == ["api-server"]
    assert component_command("dag-processor", ["dag-processor"]) == ["dag-processor"]


def test_listening_sockets_are_read_from_proc_and_judged_by_address() -> None:
    import os

    from revenue_platform.processes import ListeningSocket, listening_sockets, proc_net_address

    assert proc_net_address("0100007F:1F90") == ("127.0.0.1", 8080)
    assert proc_net_address("00000000000000000000000001000000:0050") == ("::1", 80)
    assert ListeningSocket(1, "::ffff:127.0.0.1", 1).loopback_only
    assert not ListeningSocket(1, "0.0.0.0", 1).loopback_only
    assert not ListeningSocket(1, "::", 1).loopback_only
    with socket.socket() as loopback, socket.socket(socket.AF_INET6) as everywhere:
        loopback.bind(("127.0.0.1", 0))
        everywhere.bind(("::", 0))
        loopback.listen()
        everywhere.listen()
        found = {(s.port, s.loopback_only) for s in listening_sockets([os.getpid()])}
        assert (loopback.getsockname()[1], True) in found
        assert (everywhere.getsockname()[1], False) in found


def test_the_stack_keeps_its_state_to_its_owner(tmp_path: Path) -> None:
    """`make` targets run the stack's CLI: its state folder is created 0700, and what it and its
    children create is not readable by other local accounts (umask 077, inherited)."""
    import os
    import subprocess
    import sys

    state = tmp_path / "state"
    script = (
        "import os, subprocess, sys\n"
        "from revenue_platform.local_stack.__main__ import keep_state_private\n"
        "keep_state_private()\n"
        "subprocess.run(['sh', '-c', 'mkdir child-dir && touch child-file'], check=True)\n"
    )
    subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={**os.environ, "PLATFORM_STATE_DIR": str(state)},
        check=True,
    )
    assert _mode(state) == 0o700
    assert _mode(tmp_path / "child-dir") == 0o700
    assert _mode(tmp_path / "child-file") == 0o600


def test_standalone_starts_the_scheduler_once_the_api_server_answers() -> None:
    """A task the scheduler starts before the API server listens fails at once ("Connection refused" to
    the Execution API); so the scheduler and triggerer wait for an answer, with a bound."""
    from revenue_platform.airflow.standalone import wait_for_api_server

    port = free_loopback_port()  # nothing listens on it yet
    base_url = f"http://127.0.0.1:{port}"
    assert wait_for_api_server(base_url, timeout_s=0.3, poll_s=0.05) is False
    assert wait_for_api_server(None) is False

    class Unhealthy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # an error status still means it serves
            self.send_response(503)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    servers: list[http.server.HTTPServer] = []

    def listen_later() -> None:
        time.sleep(0.5)
        servers.append(http.server.HTTPServer(("127.0.0.1", port), Unhealthy))
        servers[0].serve_forever()

    threading.Thread(target=listen_later, daemon=True).start()
    try:
        assert wait_for_api_server(base_url, timeout_s=30, poll_s=0.05) is True
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
