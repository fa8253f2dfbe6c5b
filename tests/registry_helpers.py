"""Register a deployment the way deploy_streaming_app does, without launching it.

Reprocess and quality read a deployment's config from its registry row (the one source of truth),
so a test that streams with `run(config)` registers that same config first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from revenue_platform.paths import APP_CONFIG_PATH
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry
from revenue_platform.streaming.deploy import registration_fields
from spark_apps.contract.config import StreamingAppConfig, load_config


def register_deployment(
    lake_root: str | Path, config: StreamingAppConfig | None = None, **overrides: Any
) -> StreamingAppConfig:
    """Register `config` (default: the shipped YAML with `overrides`) in the lake's registry."""
    if config is None:
        config = load_config(APP_CONFIG_PATH, {"lake_root": str(lake_root), **overrides})
    record = DeploymentRecord(deployment_id=config.deployment_id, **registration_fields(config, None))
    DeploymentRegistry(str(lake_root)).register(record, actor="test")
    return config
