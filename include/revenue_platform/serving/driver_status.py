"""The streaming app's liveness as readers show it: the driver's heartbeat, not a query's progress.

The driver rewrites `DeploymentNames.driver_status_file` (`_driver.json`, see
`spark_apps.contract.fencing.write_driver_status`) every few seconds whether or not batches have data; a
query's progress file is rewritten only when a batch ran, so an idle, healthy app would look
minutes old there. `/v1/metadata/all` and the operations view read the heartbeat here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spark_apps.contract.naming import DeploymentNames, local_path


def driver_status_path(names: DeploymentNames) -> Path:
    return local_path(names.driver_status_file)


def driver_heartbeat(names: DeploymentNames) -> str | None:
    """The driver's last heartbeat (ISO text, UTC) from its status file; None if it wrote none."""
    try:
        status: dict[str, Any] = json.loads(driver_status_path(names).read_text())
    except (OSError, ValueError):
        return None
    heartbeat = status.get("heartbeat_at") if isinstance(status, dict) else None
    return str(heartbeat) if heartbeat else None
