"""Publishing a version of the streaming app, which starts its blue-green replay.

`publish` validates the version label and its config (dotted app-config fields over the live
deployment's config), proves the config resolves to a valid app config, and records it in the
registry's releases table; the publish_app_version DAG then emits the `streaming_app_release` asset
event (extra: version and config hash) that blue_green_replay is scheduled on. The replay reads
version and config back from the registry row, never from the event's free text.

`python -m revenue_platform.bluegreen.release` is `make release VERSION=... [CONFIG=...]`: it
triggers publish_app_version on the local stack over Airflow's REST API and waits for it. The
values come from the environment (make exports its command-line variables), so no shell command is
ever built from them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from revenue_platform.bluegreen.triggers import (
    MAX_NOTES,
    RELEASE_EXTRA_CONFIG_HASH,
    RELEASE_EXTRA_VERSION,
    validate_release_overrides,
    validate_version,
)
from revenue_platform.errors import ConfigError, PlatformError
from revenue_platform.registry import DeploymentRegistry, ReleaseRecord

PUBLISH_DAG_ID = "publish_app_version"


def validate_notes(notes: Any) -> str:
    if not isinstance(notes, str) or len(notes) > MAX_NOTES or "\x00" in notes:
        raise ConfigError(f"notes: must be text of at most {MAX_NOTES} characters")
    return notes


def publish(
    registry: DeploymentRegistry,
    version: str,
    config_overrides: Mapping[str, Any],
    require_approval: bool,
    notes: str,
    actor: str,
    progress: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Record a release in the registry (idempotent for the same config); return it, JSON-safe."""
    from revenue_platform.streaming.deploy import resolve_config
    from revenue_platform.streaming.request import DeployRequest

    version = validate_version(version)
    overrides = validate_release_overrides(config_overrides)
    notes = validate_notes(notes)
    if not isinstance(require_approval, bool):
        raise ConfigError(f"require_approval: {require_approval!r} must be true or false")
    # An unknown field or a wrong type fails here, at publication, not hours later in the replay.
    resolve_config(
        DeployRequest(deployment_id="release-check", app_version=version, config_overrides=overrides),
        registry.lake_root,
    )
    release, new = registry.publish_release(
        ReleaseRecord.create(version, overrides, require_approval, notes, actor)
    )
    progress(
        f"[release] {version} {'recorded' if new else 'already recorded (same config)'} in "
        f"{registry.releases_table}: overrides {release.config_overrides}, approval "
        f"{'required' if release.require_approval else 'not required'}, config hash {release.config_hash}"
    )
    return {
        "version": release.version,
        "config_overrides": release.config_overrides,
        "config_hash": release.config_hash,
        "require_approval": release.require_approval,
        "published_by": release.published_by,
        "published_at": release.published_at.isoformat(),
        "new": new,
    }


def release_event_extra(release: Mapping[str, Any]) -> dict[str, Any]:
    """The `streaming_app_release` asset event's extra: which registry row to replay."""
    return {RELEASE_EXTRA_VERSION: release["version"], RELEASE_EXTRA_CONFIG_HASH: release["config_hash"]}


def conf_from_env(env: Mapping[str, str]) -> dict[str, Any]:
    """publish_app_version's trigger conf from VERSION, CONFIG (JSON object), NOTES, REQUIRE_APPROVAL."""
    version = validate_version(env.get("VERSION", "").strip())
    raw = env.get("CONFIG", "").strip() or "{}"
    try:
        overrides = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"CONFIG is not JSON ({error}); e.g. CONFIG='{{\"shuffle_partitions\": 4}}'"
        ) from error
    approval = env.get("REQUIRE_APPROVAL", "true").strip().lower()
    if approval not in ("true", "false"):
        raise ConfigError(f"REQUIRE_APPROVAL={approval!r} must be true or false")
    return {
        "version": version,
        "config_overrides": validate_release_overrides(overrides),
        "require_approval": approval == "true",
        "notes": validate_notes(env.get("NOTES", "")),
    }


def main() -> int:
    from revenue_platform.local_stack.airflow_api import AirflowApiClient
    from revenue_platform.local_stack.airflow_local import (
        LOCAL_ADMIN_USER,
        AirflowLocalSettings,
        local_admin_password,
    )
    from revenue_platform.local_stack.kafka_broker import KafkaBrokerSettings

    try:
        conf = conf_from_env(os.environ)
        airflow = AirflowLocalSettings.from_env(KafkaBrokerSettings.from_env().bootstrap_servers)
        client = AirflowApiClient(airflow.base_url, LOCAL_ADMIN_USER, local_admin_password(airflow))
        run_id = client.run_and_wait(PUBLISH_DAG_ID, conf, timeout_s=300)
    except PlatformError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    print(
        f"[release] {conf['version']} published ({PUBLISH_DAG_ID} run {run_id}); its "
        "streaming_app_release event starts blue_green_replay: follow it in the Airflow UI "
        f"({airflow.base_url}/dags/blue_green_replay)"
        + (
            ", where it waits before switching live for a second person's approval (not yours: on the "
            "local stack, log in as approver)"
            if conf["require_approval"]
            else ""
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
