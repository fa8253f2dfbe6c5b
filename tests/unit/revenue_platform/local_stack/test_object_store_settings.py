"""The local object store's settings and S3Proxy configuration (no server started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from revenue_platform.errors import ConfigError
from revenue_platform.local_stack.object_store import (
    ObjectStoreSettings,
    local_credentials,
    s3proxy_properties,
)


def test_defaults_and_overrides_from_the_environment(tmp_path: Path) -> None:
    settings = ObjectStoreSettings.from_env(
        {
            "OBJECT_STORE_PORT": "19401",
            "OBJECT_STORE_DATA_DIR": str(tmp_path),
            "OBJECT_STORE_BUCKET": "team-lake",
        }
    )

    assert settings.endpoint_url == "http://127.0.0.1:19401"
    assert settings.blobs_dir == tmp_path / "blobs"
    assert settings.lake_root == "s3a://team-lake/lake"
    assert ObjectStoreSettings.from_env({}).port == 9400


@pytest.mark.parametrize(
    ("name", "value"),
    [("OBJECT_STORE_PORT", "70000"), ("OBJECT_STORE_PORT", "x"), ("OBJECT_STORE_BUCKET", "A_b")],
)
def test_a_malformed_setting_names_its_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        ObjectStoreSettings.from_env({name: value})


def test_credentials_are_generated_once_into_a_private_file(tmp_path: Path) -> None:
    settings = ObjectStoreSettings(data_dir=tmp_path / "store")

    first = local_credentials(settings)

    assert local_credentials(settings) == first
    assert settings.secrets_path.stat().st_mode & 0o777 == 0o600
    assert len(first["secret_access_key"]) >= 30


def test_s3proxy_listens_on_loopback_requires_signatures_and_serves_the_blobs_folder(tmp_path: Path) -> None:
    settings = ObjectStoreSettings(port=19402, data_dir=tmp_path)

    properties = dict(
        line.split("=", 1)
        for line in s3proxy_properties(
            settings, {"access_key_id": "id", "secret_access_key": "key"}
        ).splitlines()
    )

    assert properties["s3proxy.endpoint"] == "http://127.0.0.1:19402"
    assert properties["s3proxy.authorization"] == "aws-v2-or-v4"
    assert properties["jclouds.provider"] == "filesystem-nio2"
    assert properties["jclouds.filesystem.basedir"] == str(tmp_path / "blobs")
