"""Fixtures of the control plane's unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from revenue_platform.local_object_store import ObjectStoreSettings, local_credentials


@pytest.fixture
def local_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ObjectStoreSettings:
    """The local stack's store as `make objectstore-up` leaves it: credentials generated, no Airflow
    (nothing listens on its port: what reads settings only needs the files)."""
    monkeypatch.delenv("AIRFLOW_CONN_LAKE_OBJECT_STORE", raising=False)
    monkeypatch.delenv("AIRFLOW_HOME", raising=False)
    monkeypatch.setenv("OBJECT_STORE_DATA_DIR", str(tmp_path / "object-store"))
    monkeypatch.setenv("OBJECT_STORE_PORT", "19499")
    settings = ObjectStoreSettings.from_env()
    local_credentials(settings)
    return settings
