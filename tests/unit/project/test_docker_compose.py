"""Static checks for the repo's docker-compose.yaml.

No Docker engine is available where this project is built and tested, so the Compose stack is never
started here; these tests are what keeps the file honest instead. They parse it with
``yaml.safe_load`` (anchors and ``<<`` merge keys resolve as Compose resolves them) and check what
``docker compose up`` would otherwise only reveal on a user's machine: every service has an image,
every long-running service has a healthcheck, bind-mounted host paths exist in the repo, published
host ports do not clash, ``depends_on`` names real services, Kafka runs in KRaft mode, image tags
match the versions pinned in requirements.txt and in the embedded broker's pom, and the Airflow
connections, shared secrets and the shared lake volume line up with the services that actually exist,
and every Airflow service sends its StatsD metrics to the statsd-exporter that reads the repo's mapping.

One-shot services are exempt from the healthcheck rule. A service counts as one-shot only when its
``restart`` is ``"no"`` and some other service waits for it with ``service_completed_successfully``;
the test also pins the set of one-shot services, so the exemption cannot silently grow.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
COMPOSE_FILE = REPO_ROOT / "docker-compose.yaml"

AIRFLOW_IMAGE_REPO = "apache/airflow"
KAFKA_IMAGE_REPO = "apache/kafka"
SPARK_IMAGE_REPOS = {"apache/spark", "spark"}
LAKE_VOLUME = "lake"
LAKE_PATH = "/opt/lake"
EXPECTED_ONE_SHOT = {"airflow-init"}
EXPECTED_AIRFLOW_SERVICES = {
    "airflow-init",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
}

STATSD_EXPORTER = "statsd-exporter"
STATSD_EXPORTER_IMAGE_REPO = "prom/statsd-exporter"
STATSD_MAPPING = "./include/monitoring/statsd_mapping.yml"
# The mapping's rules all start with this prefix (include/monitoring/statsd_mapping.yml).
STATSD_PREFIX = "airflow"

Service = dict[str, Any]


# ----------------------------------------------------------------------------- helpers


def load_compose(path: Path = COMPOSE_FILE) -> dict[str, Any]:
    """Parse the Compose file safely; merge keys (``<<: *anchor``) are resolved by safe_load."""
    with path.open(encoding="utf-8") as handle:
        document = yaml.safe_load(handle)
    if not isinstance(document, dict):
        raise TypeError(f"{path.name} must be a mapping at the top level, got {type(document).__name__}")
    return document


def pinned_version(package: str, requirements: Path = REPO_ROOT / "requirements.txt") -> str:
    """Return X from a ``package==X`` line in requirements.txt (comments and other specifiers ignored)."""
    pattern = re.compile(rf"^{re.escape(package)}\s*==\s*([^\s;#]+)", re.IGNORECASE)
    for line in requirements.read_text(encoding="utf-8").splitlines():
        if match := pattern.match(line.strip()):
            return match.group(1)
    raise LookupError(f"{package}==<version> is not pinned in {requirements.name}")


def project_python_minor(pyproject: Path = REPO_ROOT / "pyproject.toml") -> str:
    """Return the lower bound of ``requires-python`` as ``major.minor`` (e.g. ``>=3.11,<3.12`` -> 3.11)."""
    spec = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["requires-python"]
    match = re.search(r">=\s*(\d+\.\d+)", spec)
    if match is None:
        raise LookupError(f"requires-python {spec!r} has no >= lower bound")
    return match.group(1)


def pom_property(pom: Path, name: str) -> str:
    """Return the value of ``<name>`` in a Maven pom's properties (read with a regex, no XML parser)."""
    match = re.search(
        rf"<{re.escape(name)}>\s*([^<\s]+)\s*</{re.escape(name)}>", pom.read_text(encoding="utf-8")
    )
    if match is None:
        raise LookupError(f"<{name}> not found in {pom}")
    return match.group(1)


def split_image(image: str) -> tuple[str, str]:
    """Split ``repo[:tag]`` into (repo, tag); the tag is ``latest`` when absent, as Docker assumes."""
    repo, sep, tag = image.rpartition(":")
    if not sep or "/" in tag:  # no tag, or the colon belonged to a registry host:port
        return image, "latest"
    return repo, tag


def image_repo(service: Service) -> str:
    """Return the image repository of a service, or "" when it has no image."""
    image = service.get("image")
    return split_image(image)[0] if isinstance(image, str) else ""


def environment(service: Service) -> dict[str, str]:
    """Return a service's environment as a dict of strings, accepting both mapping and list syntax."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        pairs = (item.split("=", 1) for item in raw)
        return {key: value for key, value in pairs}
    return {key: "" if value is None else str(value) for key, value in raw.items()}


def depends_on(service: Service) -> dict[str, str]:
    """Return ``{dependency: condition}`` for both list and mapping syntax (list means service_started)."""
    raw = service.get("depends_on") or {}
    if isinstance(raw, list):
        return dict.fromkeys(raw, "service_started")
    return {name: (spec or {}).get("condition", "service_started") for name, spec in raw.items()}


def is_one_shot(name: str, services: dict[str, Service]) -> bool:
    """A one-shot service has ``restart: "no"`` and another service waits for it to complete."""
    if str(services[name].get("restart", "no")) != "no":
        return False
    return any(depends_on(other).get(name) == "service_completed_successfully" for other in services.values())


def volume_mounts(service: Service) -> list[tuple[str, str, str]]:
    """Return (kind, source, target) per mount; kind is "bind", "volume" or "anonymous".

    Short syntax ``source:target[:mode]`` is a bind mount when the source is a path (starts with
    ``.``, ``/`` or ``~``) and a named volume otherwise; long syntax states its ``type``.
    """
    mounts: list[tuple[str, str, str]] = []
    for entry in service.get("volumes") or []:
        if isinstance(entry, dict):
            mounts.append((entry.get("type", "volume"), str(entry.get("source", "")), entry["target"]))
            continue
        parts = entry.split(":")
        if len(parts) == 1:
            mounts.append(("anonymous", "", parts[0]))
            continue
        source, target = parts[0], parts[1]
        kind = "bind" if source.startswith((".", "/", "~")) else "volume"
        mounts.append((kind, source, target))
    return mounts


def published_host_ports(service: Service) -> list[str]:
    """Return ``port/protocol`` for every host port a service publishes (ranges expanded).

    The host IP is left out on purpose: ``127.0.0.1:8080`` and ``8080`` still collide on one host.
    """
    published: list[str] = []
    for entry in service.get("ports") or []:
        if isinstance(entry, dict):
            if entry.get("published") is None:
                continue
            host_ports = str(entry["published"])
            protocol = entry.get("protocol", "tcp")
        else:
            if not isinstance(entry, str):
                raise TypeError(
                    f"port {entry!r} must be a quoted string (YAML may read 1:1 style as a number)"
                )
            spec, _, protocol = entry.partition("/")
            protocol = protocol or "tcp"
            parts = spec.rsplit(":", 2)
            if len(parts) == 1:  # container port only: Docker picks a free host port
                continue
            host_ports = parts[-2]
        low, _, high = host_ports.partition("-")
        for port in range(int(low), int(high or low) + 1):
            published.append(f"{port}/{protocol}")
    return published


def command_args(service: Service) -> list[str]:
    """Return a service's command as a list of strings (a string command is split on whitespace)."""
    command = service.get("command") or []
    return command.split() if isinstance(command, str) else [str(arg) for arg in command]


def flag_value(args: list[str], flag: str) -> str:
    """Return the value following ``flag`` in an argument list."""
    if flag not in args or args.index(flag) + 1 >= len(args):
        raise LookupError(f"{flag} <value> not found in {args}")
    return args[args.index(flag) + 1]


def healthcheck_test(service: Service) -> list[str] | str | None:
    """Return the healthcheck ``test``, or None when absent, disabled or ``NONE``."""
    check = service.get("healthcheck")
    if not isinstance(check, dict) or check.get("disable"):
        return None
    test = check.get("test")
    if not test or (isinstance(test, list) and test[0] == "NONE"):
        return None
    return test


def uid_of(service: Service) -> str:
    """Return the uid part of a service's ``user`` ("" when the image default is used)."""
    return str(service.get("user", "")).split(":", 1)[0]


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The parsed Compose document."""
    return load_compose()


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Service]:
    """The ``services`` mapping of the Compose document."""
    return compose["services"]


@pytest.fixture(scope="module")
def airflow_services(services: dict[str, Service]) -> dict[str, Service]:
    """Services running the Airflow image."""
    return {name: svc for name, svc in services.items() if image_repo(svc) == AIRFLOW_IMAGE_REPO}


@pytest.fixture(scope="module")
def spark_services(services: dict[str, Service]) -> dict[str, Service]:
    """Services running the Spark image."""
    return {name: svc for name, svc in services.items() if image_repo(svc) in SPARK_IMAGE_REPOS}


@pytest.fixture(scope="module")
def kafka_services(services: dict[str, Service]) -> dict[str, Service]:
    """Services running the Kafka image."""
    return {name: svc for name, svc in services.items() if image_repo(svc) == KAFKA_IMAGE_REPO}


# ----------------------------------------------------------------------------- structure


def test_compose_file_defines_the_platform_services(services: dict[str, Service]) -> None:
    expected = EXPECTED_AIRFLOW_SERVICES | {
        "postgres",
        "kafka",
        "spark-master",
        "spark-worker",
        STATSD_EXPORTER,
    }
    assert expected <= set(services), f"missing services: {sorted(expected - set(services))}"


def test_every_service_has_an_image(services: dict[str, Service]) -> None:
    without = [name for name, svc in services.items() if not isinstance(svc.get("image"), str)]
    assert not without, f"services without an image: {without}"


def test_one_shot_services_are_exactly_the_expected_ones(services: dict[str, Service]) -> None:
    one_shot = {name for name in services if is_one_shot(name, services)}
    assert one_shot == EXPECTED_ONE_SHOT


def test_every_long_running_service_has_a_healthcheck(services: dict[str, Service]) -> None:
    unchecked = [
        name
        for name, svc in services.items()
        if not is_one_shot(name, services) and healthcheck_test(svc) is None
    ]
    assert not unchecked, f"long-running services without a healthcheck test: {unchecked}"


def test_depends_on_references_defined_services(services: dict[str, Service]) -> None:
    dangling = [
        f"{name} -> {dep}" for name, svc in services.items() for dep in depends_on(svc) if dep not in services
    ]
    assert not dangling, f"depends_on names undefined services: {dangling}"


def test_service_healthy_dependencies_have_healthchecks(services: dict[str, Service]) -> None:
    broken = [
        f"{name} -> {dep}"
        for name, svc in services.items()
        for dep, condition in depends_on(svc).items()
        if condition == "service_healthy" and dep in services and healthcheck_test(services[dep]) is None
    ]
    assert not broken, f"waiting for health of services that have no healthcheck: {broken}"


def test_bind_mount_sources_exist_in_the_repo(services: dict[str, Service]) -> None:
    problems: list[str] = []
    for name, svc in services.items():
        for kind, source, _target in volume_mounts(svc):
            if kind != "bind":
                continue
            if not source.startswith("."):
                problems.append(f"{name}: {source} is not relative to the repo")
            elif not (REPO_ROOT / source).resolve().is_relative_to(REPO_ROOT):
                problems.append(f"{name}: {source} points outside the repo")
            elif not (REPO_ROOT / source).exists():
                problems.append(f"{name}: {source} does not exist")
    assert not problems, "\n".join(problems)


def test_named_volumes_are_declared(compose: dict[str, Any], services: dict[str, Service]) -> None:
    declared = set(compose.get("volumes") or {})
    used = {source for svc in services.values() for kind, source, _ in volume_mounts(svc) if kind == "volume"}
    assert used <= declared, f"named volumes used but not declared: {sorted(used - declared)}"


def test_published_host_ports_are_unique(services: dict[str, Service]) -> None:
    owners: dict[str, list[str]] = {}
    for name, svc in services.items():
        for port in published_host_ports(svc):
            owners.setdefault(port, []).append(name)
    clashes = {port: names for port, names in owners.items() if len(names) > 1}
    assert not clashes, f"host ports published more than once: {clashes}"
    assert owners, "no host ports published at all: the UI would be unreachable"


# ----------------------------------------------------------------------------- Kafka


def test_kafka_runs_in_kraft_mode_without_zookeeper(
    services: dict[str, Service], kafka_services: dict[str, Service]
) -> None:
    assert kafka_services, "no service runs the apache/kafka image"
    roles = [
        set(environment(svc).get("KAFKA_PROCESS_ROLES", "").split(",")) for svc in kafka_services.values()
    ]
    assert all(r <= {"broker", "controller"} for r in roles), f"KAFKA_PROCESS_ROLES unset or invalid: {roles}"
    assert any("broker" in r for r in roles), f"no Kafka node is a broker: {roles}"
    assert any("controller" in r for r in roles), f"no Kafka node is a KRaft controller: {roles}"
    for name, svc in services.items():
        text = " ".join([name, str(svc.get("image", "")), *environment(svc)]).lower()
        assert "zookeeper" not in text, f"{name} refers to ZooKeeper"


def test_kafka_image_matches_the_embedded_broker_and_has_a_healthcheck(
    kafka_services: dict[str, Service],
) -> None:
    # The embedded stack's broker version lives in this pom; both stacks must run the same Kafka.
    embedded = pom_property(REPO_ROOT / "include/jvm/kafka-broker/pom.xml", "kafka.version")
    for name, svc in kafka_services.items():
        assert split_image(svc["image"])[1] == embedded, f"{name}: image is not Kafka {embedded}"
        assert "/opt/kafka/bin/kafka-broker-api-versions.sh" in str(healthcheck_test(svc)), name


def test_airflow_kafka_connection_uses_an_advertised_internal_listener(
    airflow_services: dict[str, Service], kafka_services: dict[str, Service]
) -> None:
    advertised = {
        listener.split("://", 1)[1]
        for svc in kafka_services.values()
        for listener in environment(svc)["KAFKA_ADVERTISED_LISTENERS"].split(",")
    }
    for name, svc in airflow_services.items():
        conn = json.loads(environment(svc)["AIRFLOW_CONN_KAFKA_DEFAULT"])
        assert conn["conn_type"] == "kafka"
        for server in conn["extra"]["bootstrap.servers"].split(","):
            assert server in advertised, f"{name}: {server} is not an advertised listener {advertised}"
            assert server.split(":")[0] in kafka_services, f"{name}: {server} is not a Kafka service host"


# ----------------------------------------------------------------------------- Spark


def test_spark_images_carry_the_pinned_pyspark_version(spark_services: dict[str, Service]) -> None:
    pyspark = pinned_version("pyspark")
    assert {"spark-master", "spark-worker"} <= set(spark_services)
    for name, svc in spark_services.items():
        tag = split_image(svc["image"])[1]
        assert tag.startswith(f"{pyspark}-") or tag == pyspark, f"{name}: {tag} is not Spark {pyspark}"


def test_spark_worker_and_airflow_connection_target_the_master(
    services: dict[str, Service], airflow_services: dict[str, Service]
) -> None:
    master_args = command_args(services["spark-master"])
    master_url = f"spark://{flag_value(master_args, '--host')}:{flag_value(master_args, '--port')}"
    assert master_url in command_args(services["spark-worker"])
    for name, svc in airflow_services.items():
        conn = json.loads(environment(svc)["AIRFLOW_CONN_SPARK_DEFAULT"])
        assert conn["conn_type"] == "spark"
        assert f"{conn['host']}:{conn['port']}" == master_url, f"{name}: spark_default != {master_url}"


# ----------------------------------------------------------------------------- Airflow


def test_airflow_services_share_the_pinned_image(airflow_services: dict[str, Service]) -> None:
    assert set(airflow_services) == EXPECTED_AIRFLOW_SERVICES
    expected = f"{AIRFLOW_IMAGE_REPO}:{pinned_version('apache-airflow')}-python{project_python_minor()}"
    images = {svc["image"] for svc in airflow_services.values()}
    assert images == {expected}


def test_airflow_services_share_core_settings_and_secrets(
    services: dict[str, Service], airflow_services: dict[str, Service]
) -> None:
    envs = {name: environment(svc) for name, svc in airflow_services.items()}
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY"):
        values = {env.get(key, "") for env in envs.values()}
        assert len(values) == 1, f"{key} differs between Airflow services: {values}"
        assert "" not in values, f"{key} must be set"
    for name, env in envs.items():
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor", name
        assert env["AIRFLOW__CORE__LOAD_EXAMPLES"].lower() == "false", name
        assert env["AIRFLOW__CORE__AUTH_MANAGER"].endswith("simple_auth_manager.SimpleAuthManager"), name
        db_host = urlsplit(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).hostname
        assert db_host in services, f"{name}: metadata DB host {db_host} is not a service"
        assert image_repo(services[db_host]) == "postgres", f"{name}: {db_host} does not run postgres"
        execution_api = urlsplit(env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
        assert (execution_api.hostname, execution_api.port) == ("airflow-apiserver", 8080), name
        assert execution_api.path == "/execution/", name
        assert {"/opt/airflow", "/opt/airflow/include"} <= set(env["PYTHONPATH"].split(":")), name


def test_airflow_apiserver_serves_the_ui_and_health_endpoint(services: dict[str, Service]) -> None:
    apiserver = services["airflow-apiserver"]
    assert command_args(apiserver) == ["api-server"]
    assert "8080/tcp" in published_host_ports(apiserver)
    assert "/api/v2/monitor/health" in str(healthcheck_test(apiserver))


def test_airflow_services_mount_repo_code_and_the_lake(airflow_services: dict[str, Service]) -> None:
    required = {
        ("bind", "./dags", "/opt/airflow/dags"),
        ("bind", "./plugins", "/opt/airflow/plugins"),
        ("bind", "./include", "/opt/airflow/include"),
        ("bind", "./spark_apps", "/opt/airflow/spark_apps"),
        ("volume", LAKE_VOLUME, LAKE_PATH),
    }
    for name, svc in airflow_services.items():
        missing = required - set(volume_mounts(svc))
        assert not missing, f"{name} lacks mounts {sorted(missing)}"


# ----------------------------------------------------------------------------- Airflow's metrics


def _exporter_flag(exporter: Service, flag: str) -> str:
    """The value of statsd_exporter's ``--flag=value`` argument."""
    values = [arg.split("=", 1)[1] for arg in command_args(exporter) if arg.startswith(f"{flag}=")]
    assert len(values) == 1, f"{STATSD_EXPORTER} needs exactly one {flag}=...: {command_args(exporter)}"
    return values[0]


def test_the_statsd_exporter_reads_the_repos_mapping_and_is_scrapable(services: dict[str, Service]) -> None:
    exporter = services[STATSD_EXPORTER]
    assert image_repo(exporter) == STATSD_EXPORTER_IMAGE_REPO
    mapping_path = _exporter_flag(exporter, "--statsd.mapping-config")
    assert ("bind", STATSD_MAPPING, mapping_path) in volume_mounts(exporter)
    web_port = _exporter_flag(exporter, "--web.listen-address").rpartition(":")[2]
    assert f"{web_port}/tcp" in published_host_ports(exporter)
    assert f"localhost:{web_port}/metrics" in str(healthcheck_test(exporter))


def test_every_airflow_service_sends_statsd_metrics_to_the_exporter(
    services: dict[str, Service], airflow_services: dict[str, Service]
) -> None:
    udp_port = _exporter_flag(services[STATSD_EXPORTER], "--statsd.listen-udp").rpartition(":")[2]
    for name, svc in airflow_services.items():
        env = environment(svc)
        assert env["AIRFLOW__METRICS__STATSD_ON"].lower() == "true", name
        assert env["AIRFLOW__METRICS__STATSD_HOST"] == STATSD_EXPORTER, name
        assert env["AIRFLOW__METRICS__STATSD_PORT"] == udp_port, name
        assert env["AIRFLOW__METRICS__STATSD_PREFIX"] == STATSD_PREFIX, name
        # Airflow resolves the host once per process: the exporter's name must exist when it starts.
        assert STATSD_EXPORTER in depends_on(svc), name


# ----------------------------------------------------------------------------- shared lake


def test_spark_services_see_the_lake_and_code_where_airflow_does(spark_services: dict[str, Service]) -> None:
    for name, svc in spark_services.items():
        mounts = volume_mounts(svc)
        assert ("volume", LAKE_VOLUME, LAKE_PATH) in mounts, f"{name}: lake must be at {LAKE_PATH}"
        assert any(kind == "bind" and source == "./spark_apps" for kind, source, _ in mounts), name


def test_lake_writers_share_one_uid_that_init_chowns_to(services: dict[str, Service]) -> None:
    writers = {
        name: uid_of(svc)
        for name, svc in services.items()
        if not is_one_shot(name, services) and ("volume", LAKE_VOLUME, LAKE_PATH) in volume_mounts(svc)
    }
    uids = set(writers.values())
    assert len(uids) == 1, f"services writing the lake must run as one uid: {writers}"
    assert "" not in uids, f"lake writers must set an explicit user: {writers}"
    (uid,) = uids
    init_script = " ".join(command_args(services["airflow-init"]))
    assert re.search(rf"chown -R {uid}:0 [^\n]*{LAKE_PATH}", init_script), "init must chown the lake"


# ----------------------------------------------------------------------------- exposure and secrets

ENV_EXAMPLE = REPO_ROOT / ".env.example"
# Compose interpolation: $$ is a literal $, ${NAME}, ${NAME:-default}, ${NAME:?error} (compose-spec).
_INTERPOLATION = re.compile(r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:[-?])(?P<arg>[^}]*))?\}")
# Values that sign tokens, encrypt connections or log in: never written in the file.
SECRET_SETTINGS = (
    "AIRFLOW__API_AUTH__JWT_SECRET",
    "AIRFLOW__API__SECRET_KEY",
    "AIRFLOW__CORE__FERNET_KEY",
)


def _strings(node: Any) -> list[str]:
    """Every string value of a parsed document (comments are gone: compose never reads them)."""
    if isinstance(node, dict):
        return [s for key, value in node.items() for s in (*_strings(key), *_strings(value))]
    if isinstance(node, list):
        return [s for item in node for s in _strings(item)]
    return [node] if isinstance(node, str) else []


def interpolate(node: Any, env: dict[str, str]) -> Any:
    """Resolve a parsed document's variables as `docker compose` does; ValueError carries the `:?`
    message of a required variable without a value."""

    def resolve(match: re.Match[str]) -> str:
        name = match.group("name")
        if name is None:
            return "$"
        value = env.get(name, "")
        if value:
            return value
        if match.group("op") == ":?":
            raise ValueError(f"required variable {name} is missing a value: {match.group('arg')}")
        return match.group("arg") or ""

    if isinstance(node, dict):
        return {interpolate(key, env): interpolate(value, env) for key, value in node.items()}
    if isinstance(node, list):
        return [interpolate(item, env) for item in node]
    return _INTERPOLATION.sub(resolve, node) if isinstance(node, str) else node


def required_variables(document: dict[str, Any]) -> dict[str, str]:
    """``{NAME: error message}`` of every ``${NAME:?message}`` in the document."""
    return {
        m.group("name"): m.group("arg")
        for text in _strings(document)
        for m in _INTERPOLATION.finditer(text)
        if m.group("name") and m.group("op") == ":?"
    }


def test_every_published_port_listens_on_loopback_only(services: dict[str, Service]) -> None:
    exposed = {}
    for name, svc in services.items():
        for entry in svc.get("ports") or []:
            host_ip = entry.get("host_ip") if isinstance(entry, dict) else str(entry).rpartition(":")[0]
            host_ip = host_ip.rpartition(":")[0] if host_ip.count(":") == 1 else host_ip
            if host_ip != "127.0.0.1":
                exposed[name] = entry
    assert exposed == {}, f"published on every interface (write 127.0.0.1:<host>:<container>): {exposed}"


def test_no_secret_is_written_in_the_file(
    airflow_services: dict[str, Service], services: dict[str, Service]
) -> None:
    reference = re.compile(r"^\$\{[A-Z][A-Z0-9_]*:\?[^}]+\}$")
    for name, svc in airflow_services.items():
        env = environment(svc)
        for key in SECRET_SETTINGS:
            assert reference.match(env.get(key, "")), (
                f"{name}: {key} must be ${{VAR:?message}}, is {env.get(key)!r}"
            )
        password = urlsplit(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).password
        assert password == "${POSTGRES_PASSWORD}", f"{name}: the metadata DB password is written in the file"
    # Required (with its message) where postgres sets it: compose resolves the whole file or nothing.
    assert reference.match(environment(services["postgres"])["POSTGRES_PASSWORD"])


def test_the_admin_password_comes_from_the_env_file_not_admin_admin(services: dict[str, Service]) -> None:
    init = services["airflow-init"]
    script = " ".join(command_args(init))
    assert '"admin": "admin"' not in script
    assert "admin/admin" not in script
    assert "AIRFLOW_ADMIN_PASSWORD" in script
    assert re.match(r"^\$\{AIRFLOW_ADMIN_PASSWORD:\?[^}]+\}$", environment(init)["AIRFLOW_ADMIN_PASSWORD"])
    # Only init needs it: it writes the simple auth manager's passwords file from it.
    others = [
        name
        for name, svc in services.items()
        if name != "airflow-init" and "AIRFLOW_ADMIN_PASSWORD" in environment(svc)
    ]
    assert others == []
    header = COMPOSE_FILE.read_text(encoding="utf-8").split("\n---", 1)[0]
    assert "admin / admin" not in header


def test_without_an_env_file_compose_stops_saying_what_to_do(compose: dict[str, Any]) -> None:
    required = required_variables(compose)
    assert set(required) >= {
        "AIRFLOW_JWT_SECRET",
        "AIRFLOW_API_SECRET_KEY",
        "AIRFLOW_FERNET_KEY",
        "AIRFLOW_ADMIN_PASSWORD",
        "POSTGRES_PASSWORD",
    }
    for name, message in required.items():
        assert ".env" in message, f"{name}: {message!r}"
        assert "docs/docker-compose.md" in message, f"{name}: {message!r}"
    with pytest.raises(ValueError, match=r"docs/docker-compose\.md"):
        interpolate(compose, {})


def test_env_example_lists_every_required_variable_and_env_is_git_ignored(compose: dict[str, Any]) -> None:
    example = dict(
        line.split("=", 1)
        for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert set(required_variables(compose)) == set(example)
    assert all(value == "" for value in example.values()), "the example must hold no usable secret"
    # With every variable set, the file resolves completely and the services get the values.
    values = {name: f"value-of-{name.lower()}" for name in example}
    resolved = interpolate(compose, values)
    apiserver = environment(resolved["services"]["airflow-apiserver"])
    assert apiserver["AIRFLOW__API_AUTH__JWT_SECRET"] == values["AIRFLOW_JWT_SECRET"]
    assert urlsplit(apiserver["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).password == values["POSTGRES_PASSWORD"]
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=REPO_ROOT, check=False)
    assert ignored.returncode == 0, ".env must be git-ignored: it holds the stack's secrets"
    assert (
        subprocess.run(["git", "check-ignore", "-q", ".env.example"], cwd=REPO_ROOT, check=False).returncode
        == 1
    )
