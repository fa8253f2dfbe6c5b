"""Deterministic driver kills for fault tests: SIGKILL the driver at a named point of a micro-batch.

A kill at a `time.sleep`-chosen moment lands wherever the app happens to be; these points
put it exactly between two commits, where exactly-once is hardest to keep:
  * `ingest.after_bronze_commit` — bronze appended, dead letters and split topics not yet sent;
  * `revenue.before_revenue_topic_write` — the lease checked, the revenue topic not yet written:
    here the driver is paused (SIGSTOP of its Python process) rather than killed, the stalled old
    driver that must not write after its successor (spark_apps.storage.revenue_topic's
    transactional producer);
  * `revenue.after_revenue_topic_write` — the revenue topic written, gold not yet MERGEd: the topic
    is one batch ahead of gold;
  * `revenue.before_gold_commit` — the lease checked again, the gold MERGE not yet committed: a
    pause point too (`fencing.CommitStamp`);
  * `revenue.after_gold_commit` — the revenue topic written and gold MERGEd;
  * `revenue.before_checkpoint_commit` — gold and the revenue topic written, the query's
    checkpoint (its commit log) not yet: the restarted driver must redo this batch.
The app calls `reached(point, batch_id)` at each point. It does nothing unless the environment
names that point (`ORDERS_APP_FAULT_POINT`) and the batch is at or past `ORDERS_APP_FAULT_BATCH`
(0 if unset); then it records where it fired in `ORDERS_APP_FAULT_REPORT` (JSON, so the test
can say where the kill landed; an existing report disarms the point, so a driver restarted
with the same environment is not killed again) and kills the spark-submit JVM and its own Python process, the
way a lost machine or the OOM killer would. Never set in production; nothing in the control
plane sets it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FAULT_POINT_ENV = "ORDERS_APP_FAULT_POINT"
FAULT_BATCH_ENV = "ORDERS_APP_FAULT_BATCH"
FAULT_REPORT_ENV = "ORDERS_APP_FAULT_REPORT"
FAULT_POINTS = (
    "ingest.after_bronze_commit",
    "revenue.before_revenue_topic_write",
    "revenue.after_revenue_topic_write",
    "revenue.before_gold_commit",
    "revenue.after_gold_commit",
    "revenue.before_checkpoint_commit",
)
# Points where the driver stalls instead of dying: it stops its own Python process (SIGSTOP) right
# after its lease check, as a GC pause or a frozen VM would, until the test sends SIGCONT.
PAUSE_POINTS = ("revenue.before_gold_commit", "revenue.before_revenue_topic_write")
_SPARK_SUBMIT_CLASS = b"org.apache.spark.deploy.SparkSubmit"


class FaultPointError(RuntimeError):
    """The fault environment names an unknown point, or the driver is not a spark-submit child."""


def armed_point() -> str | None:
    """The point named by the environment (validated), or None when no fault is armed."""
    point = os.environ.get(FAULT_POINT_ENV)
    if not point:
        return None
    if point not in FAULT_POINTS:
        raise FaultPointError(f"{FAULT_POINT_ENV}={point!r} is not one of {', '.join(FAULT_POINTS)}")
    return point


def _spark_submit_parent() -> int:
    """The pid of the spark-submit JVM that runs this Python driver (its parent, in client mode)."""
    parent = os.getppid()
    try:
        cmdline = Path(f"/proc/{parent}/cmdline").read_bytes()
    except OSError as error:
        raise FaultPointError(f"cannot read the driver's parent process {parent}: {error}") from error
    if _SPARK_SUBMIT_CLASS not in cmdline:
        # In-process runs (tests with their own SparkSession) have no JVM of their own to kill.
        raise FaultPointError("fault points only fire in a driver started by spark-submit")
    return parent


def reached(point: str, batch_id: int, detail: dict[str, Any] | None = None) -> None:
    """Kill the driver here if the environment arms `point` for this batch; otherwise return."""
    if armed_point() != point or batch_id < int(os.environ.get(FAULT_BATCH_ENV) or 0):
        return
    report_path = os.environ.get(FAULT_REPORT_ENV)
    if report_path and os.path.exists(report_path):
        return  # fired once already: one kill per armed run
    jvm = _spark_submit_parent()
    report = {
        "point": point,
        "batch_id": batch_id,
        "at": datetime.now(UTC).isoformat(),
        "python_pid": os.getpid(),
        "jvm_pid": jvm,
        **(detail or {}),
    }
    if report_path:
        with open(report_path, "w", encoding="utf-8") as out:
            json.dump(report, out)
            out.flush()
            os.fsync(out.fileno())
    if point in PAUSE_POINTS:
        os.kill(os.getpid(), signal.SIGSTOP)
        # The stop reaches every thread of the process, this one not necessarily before kill()
        # returns: without the wait it could read on a little (a snapshot, say) before it stops.
        time.sleep(1.0)
        return  # resumed: carry on exactly where the stall began
    os.kill(jvm, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
