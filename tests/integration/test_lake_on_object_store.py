"""The lake on a real S3-compatible store: Spark (S3A) and delta-rs write and read the same Delta table.

The store is the local stack's S3Proxy; the platform reaches it the way a deployment would, through
the Airflow connection `lake_object_store` (here from its environment variable).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from revenue_platform.lake_storage import delta_storage_options, spark_object_store_access
from revenue_platform.local_object_store import ObjectStoreSettings
from revenue_platform.local_stack.object_store import LocalObjectStore
from revenue_platform.paths import REPO_ROOT
from revenue_platform.spark_submit import spark_submit_env
from tests.object_store_helpers import local_paths_naming

pytestmark = pytest.mark.integration

SPARK_JOB = Path(__file__).with_name("object_store_spark_job.py")


def _spark(action: str, table_uri: str, cwd: Path) -> list[dict[str, object]]:
    """Run the Spark job as its own process, credentials in its environment only."""
    access = spark_object_store_access(table_uri)
    settings = json.dumps({"jars": list(access.jars), "conf": access.conf})
    completed = subprocess.run(
        [sys.executable, str(SPARK_JOB), action, table_uri, settings],
        cwd=cwd,
        env=spark_submit_env(object_store=access),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    rows: list[dict[str, object]] = json.loads(completed.stdout.strip().splitlines()[-1])
    return rows


def test_spark_and_delta_rs_share_a_delta_table_on_the_object_store(
    lake_connection: str, object_store: ObjectStoreSettings, tmp_path: Path
) -> None:
    marker = f"orders-{uuid.uuid4().hex[:12]}"
    table_uri = f"{lake_connection}/{marker}"

    written_by_spark = _spark("write", table_uri, cwd=tmp_path)
    options = delta_storage_options(table_uri)
    table = DeltaTable(table_uri, storage_options=options)
    # Through delta-rs's own query engine: a pyarrow dataset over its Python filesystem handler
    # (`to_pandas`, `to_pyarrow_table`) reads the same rows but can abort the process at exit on S3
    # (half of 12 runs here; docs/object-store.md).
    query = QueryBuilder().register("t", table).execute("select id, writer from t order by id")
    read_by_delta_rs = pa.table(query.read_all()).to_pylist()  # arro3 -> pyarrow (Arrow C data)
    write_deltalake(
        table, pd.DataFrame({"id": [3], "writer": ["delta-rs"]}).astype({"id": "int32"}), mode="append"
    )
    read_by_spark = _spark("read", table_uri, cwd=tmp_path)

    assert written_by_spark == [{"id": 1, "writer": "spark"}, {"id": 2, "writer": "spark"}]
    assert read_by_delta_rs == written_by_spark
    assert read_by_spark == [*written_by_spark, {"id": 3, "writer": "delta-rs"}]
    assert DeltaTable(table_uri, storage_options=options).version() == 1
    # The table lives in the store: its log and data are objects in the bucket's folder, and nothing of
    # it was written to a local disk elsewhere (the repo, the state dir, the job's working directory).
    table_folder = object_store.blobs_dir / object_store.bucket / "lake" / marker
    assert sorted(path.name for path in (table_folder / "_delta_log").glob("*.json")) == [
        "00000000000000000000.json",
        "00000000000000000001.json",
    ]
    assert local_paths_naming(marker, [REPO_ROOT, tmp_path], object_store.data_dir) == []


def test_the_object_store_refuses_unsigned_requests_and_a_second_start_on_its_port(
    object_store: ObjectStoreSettings, tmp_path: Path
) -> None:
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{object_store.endpoint_url}/{object_store.bucket}/", timeout=5)
    assert refused.value.code == 403

    from revenue_platform.errors import PrerequisiteError

    other = LocalObjectStore(ObjectStoreSettings(port=object_store.port, data_dir=tmp_path / "other"))
    with pytest.raises(PrerequisiteError, match=r"Port \d+ is already in use.*OBJECT_STORE_PORT"):
        other.start(progress=lambda _: None)
    assert other.pid() is None


def test_maintenance_removes_the_checksums_of_expired_commits_on_the_object_store(
    lake_connection: str, object_store: ObjectStoreSettings
) -> None:
    from pyarrow import fs

    from revenue_platform.lake_maintenance import remove_orphan_checksums
    from spark_apps.contract.side_files import object_key, object_store_filesystem

    table_uri = f"{lake_connection}/checksums-{uuid.uuid4().hex[:12]}"
    options = delta_storage_options(table_uri)
    for value in range(4):
        write_deltalake(table_uri, pa.table({"a": [value]}), mode="append", storage_options=options)
    store = object_store_filesystem(options)
    log = f"{object_key(table_uri)}/_delta_log"
    for version in range(4):  # what Spark leaves beside each of its commits
        with store.open_output_stream(f"{log}/{version:020d}.crc") as sink:
            sink.write(b"{}")
    # As the log cleanup leaves it: a checkpoint, the commits before it gone, their checksums not.
    DeltaTable(table_uri, storage_options=options).create_checkpoint()
    for version in range(3):
        store.delete_file(f"{log}/{version:020d}.json")

    assert remove_orphan_checksums(table_uri, options) == 3

    left = sorted(info.base_name for info in store.get_file_info(fs.FileSelector(log)))
    assert [name for name in left if name.endswith(".crc")] == [f"{3:020d}.crc"]
    assert DeltaTable(table_uri, storage_options=options).version() == 3


def test_maintenance_s_compaction_gets_its_checksum_on_the_object_store(
    lake_connection: str, object_store: ObjectStoreSettings
) -> None:
    from revenue_platform.lake_checksums import checksum_location, write_checksums_since
    from revenue_platform.lake_storage import snapshot_size
    from spark_apps.contract.side_files import object_key, object_store_filesystem

    table_uri = f"{lake_connection}/compacted-{uuid.uuid4().hex[:12]}"
    options = delta_storage_options(table_uri)
    for value in range(3):
        write_deltalake(table_uri, pa.table({"a": [value]}), mode="append", storage_options=options)
    table = DeltaTable(table_uri, storage_options=options)
    files, size = snapshot_size(table)
    store = object_store_filesystem(options)
    spark_checksum = {
        "txnId": "t",
        "numFiles": files,
        "tableSizeBytes": size,
        "numMetadata": 1,
        "numProtocol": 1,
    }
    with store.open_output_stream(object_key(checksum_location(table_uri, table.version()))) as sink:
        sink.write(json.dumps(spark_checksum).encode() + b"\n")
    before = table.version()
    table.optimize.compact()

    assert write_checksums_since(table_uri, before, options).written == 1
    with store.open_input_stream(object_key(checksum_location(table_uri, before + 1))) as source:
        derived = json.loads(source.read().decode())
    assert (derived["numFiles"], derived["tableSizeBytes"]) == snapshot_size(
        DeltaTable(table_uri, storage_options=options)
    )
    assert write_checksums_since(table_uri, before, options).written == 0  # there already
