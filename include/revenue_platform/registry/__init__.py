"""The deployment registry: what runs where, who holds the lease, which deployment is live, and which
app versions were released.

Stored as Delta tables under `<lake>/_registry/` (see `store`), so Airflow workers, the
Spark driver and `make down` on different machines all see the same truth.
"""

from __future__ import annotations

from revenue_platform.registry.models import (
    FINAL_RESTART_OUTCOMES,
    Colour,
    DeploymentRecord,
    DesiredState,
    ObservedState,
    RegistryEvent,
    ReleaseRecord,
    RestartOutcome,
    colour_for,
)
from revenue_platform.registry.store import (
    DeploymentNotFoundError,
    DeploymentRegistry,
    RegistryConflictError,
    RegistryError,
    ReleaseNotFoundError,
    registry_lake_root,
    resolve_live_deployment,
)

__all__ = [
    "FINAL_RESTART_OUTCOMES",
    "Colour",
    "DeploymentNotFoundError",
    "DeploymentRecord",
    "DeploymentRegistry",
    "DesiredState",
    "ObservedState",
    "RegistryConflictError",
    "RegistryError",
    "RegistryEvent",
    "ReleaseNotFoundError",
    "ReleaseRecord",
    "RestartOutcome",
    "colour_for",
    "registry_lake_root",
    "resolve_live_deployment",
]
