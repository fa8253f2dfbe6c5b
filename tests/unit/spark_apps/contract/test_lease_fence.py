"""LeaseFence against a real registry (Delta via deltalake, no Spark): every check sees a takeover."""

from __future__ import annotations

from pathlib import Path

import pytest

from revenue_platform.registry import DeploymentRecord, DeploymentRegistry
from spark_apps.contract.fencing import CommitStamp, LeaseFence, LeaseRejectedError, lease_epoch


def _lease(registry: DeploymentRegistry, deployment_id: str) -> str:
    record = registry.acquire_lease(deployment_id, registry.get(deployment_id).row_version, "test", {}, "t")
    assert record.lease_token is not None
    return record.lease_token


def test_the_holder_passes_every_check_and_a_takeover_fails_the_next_one(tmp_path: Path) -> None:
    registry = DeploymentRegistry(str(tmp_path))
    registry.register(DeploymentRecord("blue", lake_root=str(tmp_path)), "test")
    fence = LeaseFence(str(tmp_path), "blue", _lease(registry, "blue"))
    fence.check("the gold MERGE")
    fence.check("the gold MERGE")  # unchanged registry: still ours
    # Another deployment's change moves the registry too; the token of ours is re-read, still ours.
    registry.register(DeploymentRecord("green", lake_root=str(tmp_path)), "test")
    fence.check("the revenue topic write")
    assert fence.rejected is None

    _lease(registry, "blue")  # a successor takes blue over
    with pytest.raises(LeaseRejectedError, match="checked before the gold MERGE"):
        fence.check("the gold MERGE")
    with pytest.raises(LeaseRejectedError):
        fence.check("the bronze append")  # and keeps refusing
    assert fence.rejected is not None
    assert "the gold MERGE" in str(fence.rejected)
    assert fence.checks == 5


def test_a_fence_without_a_token_never_refuses(tmp_path: Path) -> None:
    fence = LeaseFence(str(tmp_path), "adhoc", None)
    fence.check("the gold MERGE")
    assert fence.checks == 0


def test_an_unregistered_deployment_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LeaseRejectedError, match="not the registry's current token"):
        LeaseFence(str(tmp_path), "ghost", "1-abc").check("the bronze append")


def test_each_gold_commit_is_stamped_with_the_registrys_epoch_and_the_batch(tmp_path: Path) -> None:
    registry = DeploymentRegistry(str(tmp_path))
    registry.register(DeploymentRecord("blue", lake_root=str(tmp_path)), "test")
    first, second = _lease(registry, "blue"), _lease(registry, "blue")
    assert (lease_epoch(first), lease_epoch(second)) == (1, 2)
    old, new = (
        LeaseFence(str(tmp_path), "blue", first).stamp(7),
        LeaseFence(str(tmp_path), "blue", second).stamp(3),
    )
    assert old == CommitStamp(1, 7)
    assert new == CommitStamp(2, 3)
    # A newer epoch outranks every batch of an older one; within an epoch the version grows with the batch.
    assert new.version > old.version
    assert CommitStamp(2, 4).version > new.version
    assert old.refusal(new.version) is not None
    assert new.refusal(old.version) is None
    assert new.refusal(CommitStamp(2, 9).version) is None, "the same epoch never refuses itself"
    assert new.refusal(None) is None
    assert LeaseFence(str(tmp_path), "blue", None).stamp(1) is None, "no lease, no stamp"


@pytest.mark.parametrize("token", [None, "", "abc", "1-xyz", "-1-0123456789ab", "1-0123456789ab\n"])
def test_a_token_not_issued_by_the_registry_has_no_epoch(token: str | None) -> None:
    assert lease_epoch(token) is None
