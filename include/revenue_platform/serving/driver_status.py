"""The streaming app's liveness as readers show it: the driver's heartbeat, not a query's progress.

The driver rewrites `DeploymentNames.driver_status_file` (`_driver.json`, see
`spark_apps.contract.fencing.write_driver_status`) every few seconds whether or not batches have data; a
query's progress file is rewritten only when a batch ran, so an idle, healthy app would look
minutes old there. `/v1/metadata/all` and the operations view read the heartbeat here.
"""

from __future__ import annotations

from revenue_platform.lake_storage import read_side_file
from spark_apps.contract.naming import DeploymentNames


def driver_heartbeat(names: DeploymentNames) -> str | None:
    """The driver's last heartbeat (ISO text, UTC) from its status file (on a local disk or the lake's
    object store); None if it wrote none."""
    status = read_side_file(names.driver_status_file)
    heartbeat = status.get("heartbeat_at") if status is not None else None
    return str(heartbeat) if heartbeat else None
