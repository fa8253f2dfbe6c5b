"""The platform's Airflow face: everything that speaks Airflow, and nothing below it does.

Task bodies, trigger-form Params, operators, notifiers, the replay's approval and catch-up, the DAGs'
defaults and assets, the Airflow auth of the plugin apps, and Airflow's connection lookup. The
library below (`revenue_platform.streaming`, `.bluegreen`, `.quality`, ...) takes typed requests and
imports no Airflow (tests/unit/revenue_platform/test_control_plane_floors.py says so). Importing this
package installs Airflow's connection lookup for the library (`connections.read_connection`).
"""

from __future__ import annotations

from revenue_platform.airflow.connections import airflow_connection
from revenue_platform.connections import use_connection_reader

# Here, not in a module a caller must remember: any import of the face installs it.
use_connection_reader(airflow_connection)  # ruff: ignore[non-empty-init-module]
