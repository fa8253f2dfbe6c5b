"""The live deployment's gold table as an in-memory Arrow snapshot, cached per Delta version.

`read_live_gold()` is the one entry point: it asks the registry which deployment is live
(`revenue_platform.registry.resolve_live_deployment`, never anything else), names its gold table
with `spark_apps.contract.naming.DeploymentNames`, and returns a `GoldSnapshot` of the table's current
version. Opening a Delta table reads only its log; the data files are read once per
(table, version) and kept in a small LRU cache, so repeated requests cost a log read, and a new
micro-batch (a new version) or a live switch (another table) is picked up by the next request.

Used by the query API and the operations view; the public names below are kept stable.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from revenue_platform.errors import PlatformError
from revenue_platform.gold_table import gold_arrow_schema, open_gold
from revenue_platform.paths import lake_root as default_lake_root
from revenue_platform.registry import DeploymentRegistry, RegistryError, resolve_live_deployment
from spark_apps.contract.delta_reads import read_delta
from spark_apps.contract.naming import DeploymentNames
from spark_apps.contract.records import SERVED_GOLD_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa

LOG = logging.getLogger(__name__)
_CACHE_SIZE = 4  # blue + green around a switch, each at its current and previous version


class NoLiveDeploymentError(PlatformError):
    """The registry names no live deployment (or more than one): there is nothing to serve yet."""


@dataclass(frozen=True)
class GoldSnapshot:
    """One version of one deployment's gold table, fully read (derived aggregates are cached on it)."""

    deployment_id: str
    table_path: str
    table_version: int | None
    """None when the live deployment has not written its gold table yet (an empty snapshot)."""
    table: pa.Table = field(repr=False)

    @cached_property
    def totals(self) -> pa.Table:
        """Per (location, order type): order_count and revenue summed over every window, plus the store."""
        from revenue_platform.serving.queries import totals_per_store

        return totals_per_store(self.table)


def _read_snapshot(
    deployment_id: str, table_path: str, storage_options: dict[str, str] | None
) -> GoldSnapshot:
    schema = gold_arrow_schema()
    delta = open_gold(table_path, storage_options)
    if delta is None:
        return GoldSnapshot(deployment_id, table_path, None, schema.empty_table())
    version = delta.version()
    key = (table_path, version)
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            _CACHE.move_to_end(key)
            return cached
    # Read outside the lock: a slow read must not block answers from other cached versions.
    raw = read_delta(delta, SERVED_GOLD_COLUMNS)
    snapshot = GoldSnapshot(deployment_id, table_path, version, raw.cast(schema))
    with _CACHE_LOCK:
        _CACHE[key] = snapshot
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return snapshot


_CACHE: OrderedDict[tuple[str, int], GoldSnapshot] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def clear_gold_cache() -> None:
    """Forget every cached snapshot (tests; or to release memory)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def live_gold_table_path(lake_root: str | None = None) -> tuple[str, str]:
    """(live deployment id, its gold table path); NoLiveDeploymentError when nothing is live."""
    root = lake_root or default_lake_root()
    try:
        deployment_id = resolve_live_deployment(root)
        record = DeploymentRegistry(root).find(deployment_id) if deployment_id else None
    except RegistryError as error:
        # The answer goes to every authenticated user: the registry's location stays in the log.
        LOG.warning("the live pointer of the registry under %s is unusable: %s", root, error)
        raise NoLiveDeploymentError(
            "the live pointer of the deployment registry is unusable (the API server's log says why); "
            "an operator must repair the registry"
        ) from error
    if deployment_id is None:
        raise NoLiveDeploymentError(
            "no deployment is live in the registry: deploy the streaming app and make it "
            "live (trigger deploy_streaming_app, or run `make demo`), then ask again"
        )
    # The registered row names the table the deployment writes (its own lake root may differ).
    if record is not None and record.gold_table:
        return deployment_id, record.gold_table
    return deployment_id, DeploymentNames(root, deployment_id).gold_revenue_table


def read_live_gold(
    lake_root: str | None = None, storage_options: dict[str, str] | None = None
) -> GoldSnapshot:
    """The current snapshot of the live deployment's gold table (empty if it has no output yet).

    `lake_root` defaults to `revenue_platform.paths.lake_root()` at call time, so a process serves
    whatever lake its environment names. Raises NoLiveDeploymentError when nothing is live.
    """
    deployment_id, table_path = live_gold_table_path(lake_root)
    return _read_snapshot(deployment_id, table_path, storage_options)
