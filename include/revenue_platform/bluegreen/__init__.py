"""Blue-green replays of the streaming app: replay a new version, gate it, switch live, roll back.

`request` is the trigger form's typed model (defaults, bounds and checks; the DAG's Params are
built from it); `logic` holds the pure rules (green's config and history, catch-up, window diff,
promotion blockers); `triggers` how a run started and whether it may start; `replay` the steps
the `blue_green_replay` and `rollback_live_deployment` DAGs run against the registry, Kafka and
the lake; `window_diff` the diff gate over the windows both deployments made final. The Airflow
side (one function per task of `blue_green_replay`, the approval, the deferrable catch-up wait) is
the face's: `revenue_platform.airflow.replay_tasks`, `.approval`, `.catch_up`.
Importing this package is cheap (no Spark, pandas or Kafka client).
docs/blue-green.md describes the procedure and the contract for readers of the live output.
"""

from __future__ import annotations

from revenue_platform.bluegreen.logic import WindowDiff, diff_windows, promotion_blockers
from revenue_platform.bluegreen.replay import ReplayGateFailed
from revenue_platform.bluegreen.request import ReplayRequest

__all__ = ["ReplayGateFailed", "ReplayRequest", "WindowDiff", "diff_windows", "promotion_blockers"]
