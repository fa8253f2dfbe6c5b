"""The driver's side files: where a location goes, how the store's client is made, and the local store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_apps.contract import side_files
from spark_apps.contract.naming import DeploymentNames
from spark_apps.contract.object_store import LakeObjectStore


def store_options(endpoint: str = "http://127.0.0.1:9400", path_style: bool = True) -> dict[str, str]:
    return LakeObjectStore.model_validate(
        {
            "endpoint_url": endpoint,
            "region": "eu-west-1",
            "path_style": path_style,
            "access_key_id": "access-id",
            "secret_access_key": "very-secret",
        }
    ).delta_rs_storage_options()


def test_a_lake_location_on_the_store_is_named_bucket_then_key() -> None:
    names = DeploymentNames("s3a://lake/revenue-lake/", "blue")
    assert side_files.object_key(names.driver_status_file) == "lake/revenue-lake/progress/blue/_driver.json"
    assert side_files.object_key("s3://lake/progress/blue/") == "lake/progress/blue"


def test_the_client_reaches_the_store_the_delta_options_describe() -> None:
    settings = side_files.s3_client_settings(store_options())
    assert settings == {
        "endpoint_override": "127.0.0.1:9400",
        "scheme": "http",
        "region": "eu-west-1",
        "access_key": "access-id",
        "secret_key": "very-secret",
        "force_virtual_addressing": False,
        "background_writes": False,
    }
    hosted = side_files.s3_client_settings(
        store_options("https://s3.eu-west-1.amazonaws.com/", path_style=False)
    )
    assert (hosted["scheme"], hosted["endpoint_override"], hosted["force_virtual_addressing"]) == (
        "https",
        "s3.eu-west-1.amazonaws.com",
        True,
    )


def test_options_without_credentials_are_refused_naming_what_is_missing_and_no_value() -> None:
    options = store_options()
    del options["AWS_SECRET_ACCESS_KEY"]
    with pytest.raises(ValueError, match="AWS_SECRET_ACCESS_KEY") as refused:
        side_files.write_json("s3a://lake/progress/blue/_driver.json", {}, options)
    assert "access-id" not in str(refused.value)
    with pytest.raises(ValueError, match="AWS_ENDPOINT_URL"):
        side_files.read_json("s3a://lake/progress/blue/_driver.json", {})


def test_one_client_per_store_for_the_life_of_the_process() -> None:
    first = side_files.object_store_filesystem(store_options())
    assert side_files.object_store_filesystem(dict(reversed(list(store_options().items())))) is first
    assert side_files.object_store_filesystem(store_options("http://127.0.0.1:9401")) is not first


@pytest.mark.parametrize("as_uri", [False, True], ids=["plain path", "file URI"])
def test_a_local_lake_keeps_its_files_on_the_local_disk(tmp_path: Path, as_uri: bool) -> None:
    names = DeploymentNames(f"file://{tmp_path}" if as_uri else str(tmp_path), "blue")
    side_files.write_json(names.driver_status_file, {"heartbeat_at": "2026-11-26T20:00:00+00:00"})
    side_files.write_json(names.progress_file("revenue"), {"batch_id": 1})
    side_files.write_json(names.progress_file("revenue"), {"batch_id": 2})

    on_disk = tmp_path / "progress" / "blue"
    assert json.loads((on_disk / "_driver.json").read_text()) == {"heartbeat_at": "2026-11-26T20:00:00+00:00"}
    assert side_files.read_json(names.progress_file("revenue")) == {"batch_id": 2}
    assert side_files.list_json(names.progress_dir) == [
        names.driver_status_file,
        names.progress_file("revenue"),
    ]
    assert sorted(path.name for path in on_disk.iterdir()) == ["_driver.json", "blue__revenue.json"]


def test_a_missing_unreadable_or_non_object_file_reads_as_none(tmp_path: Path) -> None:
    assert side_files.read_json(str(tmp_path / "absent.json")) is None
    assert side_files.list_json(str(tmp_path / "no-folder")) == []
    (tmp_path / "half.json").write_text('{"batch_id": ')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "notes.txt").write_text("{}")
    assert side_files.read_json(str(tmp_path / "half.json")) is None
    assert side_files.read_json(str(tmp_path / "list.json")) is None
    assert side_files.list_json(str(tmp_path)) == [f"{tmp_path}/half.json", f"{tmp_path}/list.json"]
