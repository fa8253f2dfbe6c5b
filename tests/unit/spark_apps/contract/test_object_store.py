"""The object store model: one endpoint and login, translated for Spark's S3A and for delta-rs."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from spark_apps.contract.object_store import LakeObjectStore, delta_rs_uri, is_object_store_root

ACCESS_KEY = "AKIDEXAMPLE0001"
SECRET_KEY = "s3cr3t-value-that-must-not-leak"


def _store(**changes: object) -> LakeObjectStore:
    fields: dict[str, object] = {
        "endpoint_url": "http://127.0.0.1:9400",
        "access_key_id": ACCESS_KEY,
        "secret_access_key": SECRET_KEY,
        **changes,
    }
    return LakeObjectStore.model_validate(fields)


@pytest.mark.parametrize(
    ("root", "on_store"),
    [("s3a://lake/lake", True), ("s3://bucket/x", True), ("/home/me/.local/lake", False), ("lake", False)],
)
def test_only_s3_roots_are_on_an_object_store(root: str, on_store: bool) -> None:
    assert is_object_store_root(root) is on_store


def test_spark_settings_name_the_endpoint_and_read_credentials_from_the_environment() -> None:
    conf = _store().spark_hadoop_conf()

    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9400"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith(
        "EnvironmentVariableCredentialsProvider"
    )
    assert _store().credentials_environment() == {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    }


def test_no_credential_reaches_spark_settings_or_a_repr() -> None:
    store = _store()
    loggable = [*store.spark_hadoop_conf().items(), repr(store), str(store), store.model_dump_json()]

    assert not [item for item in map(str, loggable) if ACCESS_KEY in item or SECRET_KEY in item]


def test_delta_rs_options_commit_with_conditional_puts_never_unsafe_renames() -> None:
    options = _store().delta_rs_storage_options()

    assert options["AWS_CONDITIONAL_PUT"] == "etag"
    assert "AWS_S3_ALLOW_UNSAFE_RENAME" not in options
    assert options["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9400"
    assert options["AWS_ALLOW_HTTP"] == "true"
    assert options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "false"
    assert (options["AWS_ACCESS_KEY_ID"], options["AWS_SECRET_ACCESS_KEY"]) == (ACCESS_KEY, SECRET_KEY)


def test_an_https_endpoint_with_virtual_hosted_buckets() -> None:
    store = _store(endpoint_url="https://s3.eu-west-1.amazonaws.com", region="eu-west-1", path_style=False)

    assert store.spark_hadoop_conf()["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"
    assert store.spark_hadoop_conf()["spark.hadoop.fs.s3a.path.style.access"] == "false"
    assert store.delta_rs_storage_options()["AWS_ALLOW_HTTP"] == "false"
    assert store.delta_rs_storage_options()["AWS_REGION"] == "eu-west-1"


@pytest.mark.parametrize("endpoint", ["127.0.0.1:9400", "ftp://host", "http://host/path", ""])
def test_an_endpoint_that_is_not_a_url_is_refused(endpoint: str) -> None:
    with pytest.raises(ValidationError):
        _store(endpoint_url=endpoint)


@pytest.mark.parametrize(
    ("path", "for_delta_rs"),
    [
        ("s3a://lake/lake/gold/revenue_windows/blue", "s3://lake/lake/gold/revenue_windows/blue"),
        ("s3://bucket/x", "s3://bucket/x"),
        ("/home/me/.local/lake/s3a://", "/home/me/.local/lake/s3a://"),
        ("lake", "lake"),
    ],
)
def test_delta_rs_reads_the_lakes_s3a_urls_as_s3(path: str, for_delta_rs: str) -> None:
    assert delta_rs_uri(path) == for_delta_rs


def test_a_driver_finds_its_store_again_from_its_spark_settings_and_environment() -> None:
    store = _store(region="eu-west-1", path_style=False)
    environ = {**store.credentials_environment(), "HOME": "/home/me"}

    assert LakeObjectStore.from_spark_hadoop_conf(store.spark_hadoop_conf(), environ) == store
    with pytest.raises(ValueError, match=r"\(secret_access_key missing or invalid") as missing:
        LakeObjectStore.from_spark_hadoop_conf(store.spark_hadoop_conf(), {"AWS_ACCESS_KEY_ID": ACCESS_KEY})
    assert ACCESS_KEY not in str(missing.value)
