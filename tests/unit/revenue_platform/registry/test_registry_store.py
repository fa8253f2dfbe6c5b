"""The deployment registry on real Delta tables: rows, compare-and-swap leases, live pointer, audit."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from revenue_platform.registry import (
    DeploymentNotFoundError,
    DeploymentRecord,
    DeploymentRegistry,
    RegistryConflictError,
    RegistryEvent,
    ReleaseNotFoundError,
    ReleaseRecord,
    colour_for,
    registry_lake_root,
    resolve_live_deployment,
)
from revenue_platform.streaming.deploy import config_document
from spark_apps.contract.config import load_config
from spark_apps.contract.fencing import LeaseRejectedError, current_lease_token, verify_lease


@pytest.fixture
def registry(tmp_path: Path) -> DeploymentRegistry:
    return DeploymentRegistry(str(tmp_path / "lake"))


def test_reading_an_empty_lake_creates_nothing(registry: DeploymentRegistry, tmp_path: Path) -> None:
    assert registry.deployments() == []
    assert registry.events() == []
    assert resolve_live_deployment(registry.lake_root) is None
    assert not (tmp_path / "lake").exists()


def test_register_then_a_second_register_conflicts(registry: DeploymentRegistry) -> None:
    registry.register(DeploymentRecord("blue", colour="blue", desired_state="running"), "tester")

    with pytest.raises(RegistryConflictError):
        registry.register(DeploymentRecord("blue"), "tester")
    record = registry.get("blue")
    assert (record.desired_state, record.row_version, record.updated_by) == ("running", 1, "tester")
    assert [e.kind for e in registry.events("blue")] == ["registered"]


def test_a_config_registered_with_the_engines_former_name_still_loads_unchanged(
    registry: DeploymentRegistry,
) -> None:
    # Earlier releases registered `engine: one_query`, the micro-batch engine's former name.
    registered = load_config(overrides={"deployment_id": "blue", "engine": "one_query"})
    document, digest = config_document(registered)
    assert '"engine": "one_query"' in document
    registry.register(DeploymentRecord("blue", config_json=document, config_hash=digest), "tester")

    loaded = registry.get("blue").app_config()

    assert (loaded.deployment_id, loaded.engine) == ("blue", "one_query")
    # Read back as written: a deploy of the same request registers the same document and hash, so a
    # running deployment is not taken for one asked to change its config.
    assert config_document(loaded) == (document, digest)


def test_get_of_an_unknown_deployment_names_it(registry: DeploymentRegistry) -> None:
    registry.register(DeploymentRecord("blue"), "tester")
    with pytest.raises(DeploymentNotFoundError, match="'green'"):
        registry.get("green")


def test_lease_is_a_compare_and_swap_with_an_increasing_epoch(registry: DeploymentRegistry) -> None:
    registry.register(DeploymentRecord("blue"), "tester")
    read = registry.get("blue")

    first = registry.acquire_lease(
        "blue", read.row_version, "deploy-1", {"observed_state": "starting"}, "deploy"
    )

    # A second launcher that read the same row loses: it must never start a second driver.
    with pytest.raises(RegistryConflictError):
        registry.acquire_lease("blue", read.row_version, "deploy-2", {}, "deploy")
    second = registry.acquire_lease("blue", first.row_version, "supervisor", {}, "restart")
    assert (first.lease_epoch, second.lease_epoch) == (1, 2)
    assert first.lease_token != second.lease_token
    assert registry.get("blue").lease_token == second.lease_token
    leases = [e for e in registry.events("blue") if e.kind == "lease_acquired"]
    assert [(e.from_value, e.to_value, e.actor) for e in leases] == [
        (None, first.lease_token, "deploy-1"),
        (first.lease_token, second.lease_token, "supervisor"),
    ]


def test_update_fenced_by_lease_refuses_a_superseded_holder(registry: DeploymentRegistry) -> None:
    registry.register(DeploymentRecord("blue"), "tester")
    old = registry.acquire_lease("blue", 1, "a", {}, "deploy")
    registry.acquire_lease("blue", old.row_version, "b", {}, "restart")

    with pytest.raises(RegistryConflictError, match="held by lease"):
        registry.update("blue", {"observed_state": "running"}, "a", expected_lease=old.lease_token)
    assert registry.get("blue").observed_state != "running"


def test_a_write_against_a_stale_snapshot_fails_instead_of_overwriting(registry: DeploymentRegistry) -> None:
    registry.register(DeploymentRecord("blue"), "tester")
    stale_table = registry._deployments()
    stale_rows = registry._rows(stale_table)
    registry.update("blue", {"app_version": "2"}, "winner")

    stale_rows[0].app_version = "loser"
    with pytest.raises(RegistryConflictError):
        registry._merge(stale_table, stale_rows, ["app_version"], False, {"blue": stale_rows[0].row_version})
    assert registry.get("blue").app_version == "2"


def test_live_switch_is_one_delta_commit_with_an_audit_event(registry: DeploymentRegistry) -> None:
    for deployment_id in ("blue", "green"):
        registry.register(DeploymentRecord(deployment_id), "tester")
    assert registry.switch_live("blue", "operator", "first release") is None
    version_before = DeltaTable(registry.names.deployments_table).version()

    previous = registry.switch_live("green", "operator", "release 2")

    assert previous == "blue"
    assert DeltaTable(registry.names.deployments_table).version() == version_before + 1
    assert resolve_live_deployment(registry.lake_root) == "green"
    assert [r.is_live for r in registry.deployments()] == [False, True]
    switch = registry.events("green")[-1]
    assert (switch.kind, switch.from_value, switch.to_value, switch.actor, switch.reason) == (
        "live_switched",
        "blue",
        "green",
        "operator",
        "release 2",
    )
    with pytest.raises(DeploymentNotFoundError):
        registry.switch_live("purple", "operator", "typo")
    assert resolve_live_deployment(registry.lake_root) == "green"


def test_events_keep_details_and_order(registry: DeploymentRegistry) -> None:
    registry.append_events(
        [
            RegistryEvent("blue", "restart", "supervisor", "1-a", None, "driver gone", {"n": 1}),
            RegistryEvent("blue", "stopped", "operator", "running", "stopped", "maintenance"),
        ]
    )
    events = registry.events("blue")
    assert [e.kind for e in events] == ["restart", "stopped"]
    assert events[0].details == {"n": 1}


def test_events_involving_some_deployments_skip_the_files_of_others(registry: DeploymentRegistry) -> None:
    """A reader of the running deployments (the metrics, at every scrape) reads only their events: the
    Delta scan skips, by its column statistics, the files that hold only other deployments' events."""
    registry.append_events([RegistryEvent("old", "restart", "supervisor") for _ in range(3)])
    registry.append_events([RegistryEvent("blue", "live_switched", "replay", "green", "blue")])
    registry.append_events([RegistryEvent("green", "desired_state", "op", "running", "stopped")])
    registry.append_events([RegistryEvent("green", "live_switched", "replay", "blue", "green")])
    involving_blue = registry.events(involving=["blue"])
    # blue's own event and the switch away from blue (from_value), none of old's or green's others.
    assert [(e.deployment_id, e.kind) for e in involving_blue] == [
        ("blue", "live_switched"),
        ("green", "live_switched"),
    ]
    # Proof that old's file is not read at all: break it, and the filtered read still works.
    table = DeltaTable(registry.names.events_table)
    (old_file,) = [f for f in table.file_uris() if "old" in pq_values(f, "deployment_id")]
    Path(old_file.removeprefix("file://")).write_bytes(b"not parquet")
    assert registry.events(involving=["blue"]) == involving_blue
    with pytest.raises(Exception, match=r"Parquet error.*events/part-"):  # delta-rs raises a bare Exception
        registry.events()


def pq_values(uri: str, column: str) -> set[str]:
    import pyarrow.parquet as parquet

    return set(parquet.read_table(uri.removeprefix("file://"), columns=[column]).column(column).to_pylist())


def test_the_app_side_lease_check_reads_the_same_table(registry: DeploymentRegistry) -> None:
    assert current_lease_token(registry.lake_root, "blue") is None
    registry.register(DeploymentRecord("blue"), "tester")
    leased = registry.acquire_lease("blue", 1, "deploy", {}, "deploy")
    assert leased.lease_token is not None

    verify_lease(registry.lake_root, "blue", leased.lease_token)
    with pytest.raises(LeaseRejectedError, match="Refusing to run"):
        verify_lease(registry.lake_root, "blue", "1-forged")
    with pytest.raises(LeaseRejectedError):
        verify_lease(registry.lake_root, "green", leased.lease_token)


def test_colour_and_lake_root_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert [colour_for(d, None).value for d in ("blue", "green", "demo")] == ["blue", "green", "other"]
    assert colour_for("demo", "green").value == "green"
    monkeypatch.delenv("PLATFORM_LAKE_ROOT", raising=False)
    monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path))
    assert registry_lake_root() == str(tmp_path / "lake")
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", "s3a://bucket/lake")
    assert registry_lake_root() == "s3a://bucket/lake"


def test_a_release_is_recorded_once_and_republishing_it_is_idempotent(registry: DeploymentRegistry) -> None:
    assert registry.releases() == []
    overrides = {"kafka.max_offsets_per_trigger": 150}
    first, new = registry.publish_release(ReleaseRecord.create("2.1.0", overrides, True, "faster", "alice"))
    assert new
    again, new_again = registry.publish_release(ReleaseRecord.create("2.1.0", overrides, False, "", "bob"))

    assert not new_again
    # The stored row wins: a re-publication cannot quietly change who released it or its approval rule.
    assert (again.published_by, again.require_approval, again.notes) == ("alice", True, "faster")
    stored = registry.get_release("2.1.0")
    assert stored.config_overrides == overrides
    assert stored.config_hash == first.config_hash
    assert [r.version for r in registry.releases()] == ["2.1.0"]


def test_a_released_version_cannot_change_its_config(registry: DeploymentRegistry) -> None:
    registry.publish_release(ReleaseRecord.create("2.1.0", {"shuffle_partitions": 2}, True, "", "alice"))
    with pytest.raises(RegistryConflictError, match="versions are immutable"):
        registry.publish_release(ReleaseRecord.create("2.1.0", {"shuffle_partitions": 4}, True, "", "bob"))
    assert registry.get_release("2.1.0").config_overrides == {"shuffle_partitions": 2}


def test_an_unpublished_version_is_named_with_what_to_do(registry: DeploymentRegistry) -> None:
    with pytest.raises(ReleaseNotFoundError, match=r"'9\.9\.9'.*publish_app_version"):
        registry.get_release("9.9.9")


def _race_next_merges(
    monkeypatch: pytest.MonkeyPatch, registry: DeploymentRegistry, rows: list[str]
) -> list[str]:
    """Before each of `registry`'s next MERGEs, another writer changes a row: the next one of `rows`
    (taken from the list, which a test may refill), so that MERGE's commit loses to it. Returns the
    rows changed so far, in order."""
    other_writer = DeploymentRegistry(registry.lake_root)
    merge = DeploymentRegistry._merge
    changed: list[str] = []

    def merge_after_a_concurrent_change(self: DeploymentRegistry, *args: object, **kwargs: object) -> object:
        if self is not other_writer and rows:
            changed.append(rows.pop(0))
            other_writer.update(changed[-1], {"observed_state": "running"}, "supervisor")
        return merge(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(DeploymentRegistry, "_merge", merge_after_a_concurrent_change)
    return changed


def test_a_lease_taken_while_another_deployment_changes_is_retried_not_refused(
    registry: DeploymentRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every row lives in one file, so Delta refuses a commit that overlaps any other: a deploy's lease
    (a compare-and-swap on its own row) used to fail when, say, the supervisor touched another
    deployment at the same moment (a blue-green replay's deploy_green, seen in a CI run)."""
    registry.register(DeploymentRecord("blue", colour="blue", desired_state="running"), "tester")
    registry.register(DeploymentRecord("green", colour="green", desired_state="running"), "tester")
    raced = _race_next_merges(monkeypatch, registry, ["blue"])
    leased = registry.acquire_lease("green", 1, "deploy", {}, "deploy")

    assert raced == ["blue"]
    assert leased.lease_token is not None
    assert registry.get("green").lease_token == leased.lease_token
    assert registry.get("blue").observed_state == "running"


def test_a_lease_on_a_row_that_moved_meanwhile_is_still_refused(
    registry: DeploymentRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry.register(DeploymentRecord("green", colour="green", desired_state="running"), "tester")
    raced = _race_next_merges(monkeypatch, registry, ["green"])  # the lease's own row moves
    with pytest.raises(RegistryConflictError, match="changed"):
        registry.acquire_lease("green", 1, "deploy", {}, "deploy")
    assert raced == ["green"]
    assert registry.get("green").lease_token is None


def test_a_register_and_a_live_switch_that_race_another_row_are_retried(
    registry: DeploymentRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry.register(DeploymentRecord("blue", colour="blue", desired_state="running"), "tester")
    pending = ["blue", "blue"]  # the register's first two tries lose
    raced = _race_next_merges(monkeypatch, registry, pending)
    registry.register(DeploymentRecord("green", colour="green", desired_state="running"), "deploy")
    assert raced == ["blue", "blue"]
    pending.append("blue")  # then the switch's first
    assert registry.switch_live("green", "replay", "promoted") is None
    assert raced == ["blue", "blue", "blue"]

    assert registry.get("green").is_live
    assert [r.deployment_id for r in registry.deployments()] == ["blue", "green"]
