"""Session-wide test infrastructure: one real Kafka broker, one Airflow metadata DB, one SparkSession.

The test stack is separate from the demo stack (own ports and state under
.local/test/), so `make test` works whether or not `make up` is running. Whatever
this file starts, it stops at the end of the session, also when tests fail.

Airflow reads its configuration when first imported, so the environment is set here,
at import time, before any test module imports airflow.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pytest

from revenue_platform.connections import LAKE_OBJECT_STORE_CONN_ID, connection_env_var
from revenue_platform.local_object_store import ObjectStoreSettings, local_store_connection_json
from revenue_platform.local_stack.airflow_local import (
    LOCAL_ADMIN_USER,
    LOCAL_APPROVER_USER,
    AirflowLocalSettings,
    airflow_environment,
    local_password,
    migrate_db,
)
from revenue_platform.local_stack.kafka_broker import KafkaBrokerSettings, LocalKafkaBroker
from revenue_platform.local_stack.object_store import LocalObjectStore
from revenue_platform.local_stack.service_jit import SERVICES_JIT_ENV
from revenue_platform.paths import REPO_ROOT
from spark_apps.engine.session import DRIVER_JIT_ENV
from tests.stall_watchdog import StallWatchdog, run_stalls_dir

if TYPE_CHECKING:
    from fastapi.testclient import TestClient
    from pyspark.sql import SparkSession

# `make test` runs the suite on two pytest-xdist workers, each a test session of its own with its own
# broker, object store, Airflow DB and SparkSession: worker N (gwN) moves these ports up by N * 1000 and
# keeps its state in .local/test/gwN; worker 0, and a run without workers, keep the defaults
# (docs/testing.md, "Two workers"). Ports a single module starts a service on stay fixed: one module
# runs on one worker (--dist loadfile).
TEST_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
TEST_WORKER_PORT_STEP = 1000


def _test_port(variable: str, default: int) -> int:
    return int(os.environ.get(variable, str(default))) + TEST_WORKER * TEST_WORKER_PORT_STEP


_TEST_STATE_ROOT = Path(os.environ.get("TEST_STATE_DIR", REPO_ROOT / ".local" / "test"))
TEST_STATE_DIR = _TEST_STATE_ROOT / f"gw{TEST_WORKER}" if TEST_WORKER else _TEST_STATE_ROOT
TEST_KAFKA = KafkaBrokerSettings(
    port=_test_port("TEST_KAFKA_PORT", 19092),
    controller_port=_test_port("TEST_KAFKA_CONTROLLER_PORT", 19093),
    data_dir=TEST_STATE_DIR / "kafka",
    heap="768m",
    # Fixtures carry fixed dates as Kafka timestamps: keep them whatever the calendar says
    # (docs/testing.md, "Dates in test data").
    retention_ms=-1,
)
TEST_OBJECT_STORE = ObjectStoreSettings(
    port=_test_port("TEST_OBJECT_STORE_PORT", 19400), data_dir=TEST_STATE_DIR / "object-store"
)
TEST_AIRFLOW = AirflowLocalSettings(
    home=TEST_STATE_DIR / "airflow",
    port=_test_port("TEST_AIRFLOW_PORT", 18080),
    kafka_bootstrap_servers=TEST_KAFKA.bootstrap_servers,
    spark_master="local[2]",
    # No StatsD from the test stack: it would land in the exporter of a `make up` on 8125. Tests of
    # the metrics give their own port (tests/integration/test_airflow_statsd_metrics.py).
    statsd_port=None,
)
os.environ.update(airflow_environment(TEST_AIRFLOW))
# PySpark converts naive Python datetimes with the process time zone; pin it to UTC so
# expected values written as naive datetimes mean UTC on any host.
os.environ["TZ"] = "UTC"
time.tzset()
# py4j logs its own shutdown at interpreter exit, after pytest closed the capture streams.
logging.getLogger("py4j").setLevel(logging.WARNING)
os.environ["PLATFORM_STATE_DIR"] = str(TEST_STATE_DIR)
# Every driver a test starts on this machine (the session's, the tests' spark-submits, those the DAGs
# launch) lives for a minute or two: the JIT's first tier only, so C2's compiler threads do not compete
# with it for the 2 cores (spark_apps.engine.session.DRIVER_JIT_ENV; docs/testing.md). The e2e demo's
# stack gets a user's environment and keeps the default.
os.environ.setdefault(DRIVER_JIT_ENV, "c1")
# The same for the services the tests start (the session's broker and object store, the SASL broker,
# the cluster suite's brokers, store, master, workers and executors, the Kafka tools' runs): they live
# for minutes (revenue_platform.local_stack.service_jit; docs/testing.md). The e2e stack keeps a user's
# default.
os.environ.setdefault(SERVICES_JIT_ENV, "c1")


# What `make test-fast` leaves out: a test that asks for one of these fixtures starts a JVM (Spark,
# the broker, the object store) or needs the migrated Airflow DB. The selection follows what a test
# uses, so a new test that takes `spark` is left out of the fast loop without a marker.
STACK_FIXTURES = frozenset(
    {
        "spark",
        "kafka_df",
        "kafka_bootstrap",
        "kafka_broker_pid",
        "object_store",
        "lake_connection",
        "airflow_db",
        "airflow_api",
        "auth",
    }
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="only tests that start no JVM, broker or Airflow DB (make test-fast)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # A test past the per-test limit (pyproject.toml `timeout`) is reported with the JVM's threads and
    # its worker replaced, instead of holding the run until CI's limit (tests/stall_watchdog.py).
    if config.pluginmanager.hasplugin("timeout"):
        config.pluginmanager.register(StallWatchdog(run_stalls_dir(_TEST_STATE_ROOT)), "stall_watchdog")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--fast"):
        return
    kept, left_out = [], []
    for item in items:
        needs_stack = STACK_FIXTURES.intersection(getattr(item, "fixturenames", ())) or any(
            item.get_closest_marker(name) for name in ("integration", "e2e", "cluster", "jvm")
        )
        (left_out if needs_stack else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


class _LocalService(Protocol):
    def pid(self) -> int | None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...


@contextlib.contextmanager
def _fresh_for_the_session(service: _LocalService, data_dir: Path) -> Generator[bool, None, None]:
    """Run `service` for the session on a fresh data dir (tests never see an earlier run's topics,
    offsets or objects) and stop it afterwards; one already running (another session's) is reused.
    Yields whether this session started it."""
    started_here = service.pid() is None
    if started_here:
        shutil.rmtree(data_dir, ignore_errors=True)
    service.start()
    try:
        yield started_here
    finally:
        if started_here:
            service.stop()


@pytest.fixture(scope="session")
def _kafka_broker_started_here() -> Iterator[bool]:
    with _fresh_for_the_session(LocalKafkaBroker(TEST_KAFKA), TEST_KAFKA.data_dir) as started_here:
        try:
            yield started_here
        finally:
            _close_spark_kafka_producers()


def _close_spark_kafka_producers(session: SparkSession | None = None) -> None:
    """Close the Kafka producers that Spark's Kafka sink keeps cached in the JVM (`session`'s, or the
    active session's if there is one), while the broker still answers: once it is gone they log a
    connection warning every second until the JVM exits. Called by whichever of the broker and the
    SparkSession the test session stops first."""
    if session is None:
        if "pyspark.sql" not in sys.modules:
            return
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        if session is None:
            return
    jvm = session.sparkContext._jvm
    assert jvm is not None
    producer_pool = getattr(jvm.org.apache.spark.sql.kafka010.producer, "InternalKafkaProducerPool$")
    getattr(producer_pool, "MODULE$").reset()


@pytest.fixture(scope="session")
def kafka_bootstrap(_kafka_broker_started_here: bool) -> str:
    """Bootstrap servers of a real single-node KRaft broker, fresh for this session."""
    return TEST_KAFKA.bootstrap_servers


@pytest.fixture
def kafka_broker_pid(_kafka_broker_started_here: bool) -> int:
    """PID of the session's broker, for a test that pauses it (SIGSTOP, then SIGCONT). Only a broker
    this session started: pausing another session's would stall that session's tests."""
    if not _kafka_broker_started_here:
        pytest.skip("the test broker belongs to another test session")
    pid = LocalKafkaBroker(TEST_KAFKA).pid()
    assert pid is not None, "the session's broker runs"
    return pid


@pytest.fixture(scope="session")
def object_store() -> Iterator[ObjectStoreSettings]:
    """A real S3-compatible server (S3Proxy) on loopback, with its bucket and credentials, fresh for this
    session; started only by the tests that ask for it."""
    with _fresh_for_the_session(LocalObjectStore(TEST_OBJECT_STORE), TEST_OBJECT_STORE.data_dir):
        yield TEST_OBJECT_STORE


@pytest.fixture
def lake_connection(object_store: ObjectStoreSettings, monkeypatch: pytest.MonkeyPatch) -> str:
    """The Airflow connection to the session's store, as a deployment defines it (here in its
    environment variable); returns the lake root in its bucket."""
    connection = local_store_connection_json(object_store)
    monkeypatch.setenv(connection_env_var(LAKE_OBJECT_STORE_CONN_ID), connection)
    return object_store.lake_root


@pytest.fixture(scope="session")
def airflow_db() -> AirflowLocalSettings:
    """A migrated SQLite metadata DB, so `dag.test()` runs real task instances."""
    shutil.rmtree(TEST_AIRFLOW.home, ignore_errors=True)
    migrate_db(TEST_AIRFLOW)
    return TEST_AIRFLOW


@pytest.fixture(scope="module")
def airflow_api(airflow_db: AirflowLocalSettings) -> Iterator[TestClient]:
    """The Airflow API server app in-process, with every plugin from plugins/ mounted as Airflow does."""
    from airflow.api_fastapi.app import create_app, purge_cached_app
    from fastapi.testclient import TestClient

    purge_cached_app()
    app = create_app()
    try:
        with TestClient(app) as client:
            yield client
    finally:
        purge_cached_app()


def _bearer(api: TestClient, user: str) -> dict[str, str]:
    """Headers with a real token of a local stack user from the simple auth manager's `POST /auth/token`."""
    response = api.post(
        "/auth/token", json={"username": user, "password": local_password(TEST_AIRFLOW, user)}
    )
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


@pytest.fixture(scope="module")
def auth(airflow_api: TestClient) -> dict[str, str]:
    """Headers with a real admin token."""
    return _bearer(airflow_api, LOCAL_ADMIN_USER)


@pytest.fixture(scope="module")
def approver_auth(airflow_api: TestClient) -> dict[str, str]:
    """Headers with a real token of the local stack's approver, the one user its approval tasks are
    assigned to (`AIRFLOW__REVENUE_PLATFORM__APPROVERS`)."""
    return _bearer(airflow_api, LOCAL_APPROVER_USER)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The session's only SparkSession: local[2], UTC, Kafka connector and Delta on the classpath, and
    the app's batch cache and local file system."""
    from spark_apps.engine.session import (
        BATCH_CACHE_CONF,
        LOCAL_FILES_CONF,
        build_spark_session,
        local_jar_paths,
    )

    session = build_spark_session(
        "revenue-platform-tests",
        master="local[2]",
        jars=local_jar_paths(),
        # The app's cache (its serializer is a static setting): every cache in the tests uses it.
        extra_conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            **BATCH_CACHE_CONF,
            **LOCAL_FILES_CONF,
        },
    )
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        _close_spark_kafka_producers(session)
        session.stop()


@pytest.fixture
def scratch_dir(tmp_path: Path) -> Path:
    """A per-test folder for Delta tables and checkpoints."""
    return tmp_path
