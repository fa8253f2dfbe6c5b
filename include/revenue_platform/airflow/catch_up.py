"""Waiting for green to catch up, without holding a worker slot: a deferrable operator and its trigger.

A replay from the earliest offsets can take hours on a real history. The operator defers to
`CatchUpTrigger`, which runs in the triggerer and polls green's published progress (the same
`progress_summary` the supervisor reads, judged by `judge_catch_up`), logging offsets behind,
rate and ETA on every poll. The worker slot is free meanwhile; the task resumes in
`execute_complete` to record the outcome in the registry's audit log.

A trigger that fires within seconds of its deferral meets a race in Airflow 3.3's scheduler: the
executor's "success" for the worker that exited on `defer()` can be drained after the trigger has
already put the task back to queued or running, and the scheduler then fails the task as "state
changed externally" (apache/airflow#66374, fixed for a task back in `scheduled` only; #71580 and
#72716, open). A replay whose green had caught up within two seconds failed that way, both tries
(the e2e replay, 2026-12-05: the stale event came 5-6 s after the deferral on a busy machine). So
a green that has caught up when the task starts is recorded without deferring, and the trigger
never fires earlier than `RESUME_SETTLE_S` after the deferral.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.triggers.base import BaseTrigger, TriggerEvent

from revenue_platform.airflow.dag_defaults import actor_from_context
from revenue_platform.bluegreen.logic import CatchUp, judge_catch_up

# The least time between a deferral and its trigger's event (see the module's docstring): three
# times the 5-6 s the scheduler took to drain the deferred worker's exit on a loaded 2-core box.
RESUME_SETTLE_S = 15.0


def observe_catch_up(lake_root: str, deployment_id: str, max_offsets_behind: int) -> CatchUp:
    """Green's catch-up state now, from the registry row and the progress files its driver publishes."""
    from revenue_platform.registry import DeploymentRegistry
    from revenue_platform.streaming.supervisor import progress_summary

    record = DeploymentRegistry(lake_root).get(deployment_id)
    return judge_catch_up(progress_summary(record), max_offsets_behind)


def catch_up_event(state: CatchUp, seconds: float) -> dict[str, Any]:
    """What `execute_complete` reads: the trigger's event payload, or the operator's own when green
    had caught up before any deferral."""
    return {
        "caught_up": state.caught_up,
        "offsets_behind": state.offsets_behind,
        "state": state.describe(),
        "seconds": round(seconds, 1),
    }


class CatchUpTrigger(BaseTrigger):
    """Fires once `deployment_id` is at most `max_offsets_behind` behind (and done with its history),
    or when `deadline` passes; logs progress on every poll."""

    def __init__(
        self,
        lake_root: str,
        deployment_id: str,
        max_offsets_behind: int,
        deadline: str,
        poll_interval_s: float,
        settle_s: float = RESUME_SETTLE_S,
    ) -> None:
        super().__init__()
        self.lake_root = lake_root
        self.deployment_id = deployment_id
        self.max_offsets_behind = max_offsets_behind
        self.deadline = deadline
        self.poll_interval_s = poll_interval_s
        self.settle_s = settle_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "lake_root": self.lake_root,
                "deployment_id": self.deployment_id,
                "max_offsets_behind": self.max_offsets_behind,
                "deadline": self.deadline,
                "poll_interval_s": self.poll_interval_s,
                "settle_s": self.settle_s,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = datetime.fromisoformat(self.deadline)
        started = time.monotonic()
        while True:
            # File and Delta reads block: keep them off the triggerer's event loop.
            state = await asyncio.to_thread(
                observe_catch_up, self.lake_root, self.deployment_id, self.max_offsets_behind
            )
            elapsed = time.monotonic() - started
            self.log.info(
                "[replay] %s: %s after %.0fs (threshold %d)",
                self.deployment_id,
                state.describe(),
                elapsed,
                self.max_offsets_behind,
            )
            remaining = (deadline - datetime.now(UTC)).total_seconds()
            if state.caught_up or remaining <= 0:
                # Hold the event until the scheduler has surely seen the deferred worker exit.
                await asyncio.sleep(max(0.0, self.settle_s - (time.monotonic() - started)))
                yield TriggerEvent(catch_up_event(state, elapsed))
                return
            await asyncio.sleep(min(self.poll_interval_s, max(remaining, 0.1)))


class WaitForCatchUpOperator(BaseOperator):
    """Defer until green has caught up; record it, or fail with ReplayGateFailed at the timeout.

    `request` is the validated replay request (an XCom of the DAG's validation task).
    """

    template_fields: Sequence[str] = ("request",)

    def __init__(self, *, request: Any, lake_root: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.request = request
        self.lake_root = lake_root

    def _lake_root(self) -> str:
        from revenue_platform.paths import lake_root

        return self.lake_root or lake_root()

    def execute(self, context: Any) -> dict[str, Any]:
        green, max_behind = str(self.request["green_deployment_id"]), int(self.request["max_offsets_behind"])
        lake_root = self._lake_root()
        # Caught up already (a short history): record it now; a deferral would only meet the
        # scheduler's race (module docstring) and cost the settle time.
        state = observe_catch_up(lake_root, green, max_behind)
        if state.caught_up:
            self.log.info("[replay] %s: %s (threshold %d), no wait", green, state.describe(), max_behind)
            return self.execute_complete(context, catch_up_event(state, 0.0))
        timeout_s = float(self.request["catch_up_timeout_s"])
        deadline = datetime.now(UTC) + timedelta(seconds=timeout_s)
        self.log.info(
            "[replay] waiting up to %.0fs for %s to be at most %s offsets behind (deferred to the triggerer)",
            timeout_s,
            self.request["green_deployment_id"],
            self.request["max_offsets_behind"],
        )
        self.defer(
            trigger=CatchUpTrigger(
                lake_root,
                green,
                max_behind,
                deadline.isoformat(),
                float(self.request["poll_interval_s"]),
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        from revenue_platform.bluegreen.replay import ReplayGateFailed, record
        from revenue_platform.registry import DeploymentRegistry

        green = str(self.request["green_deployment_id"])
        registry, actor = DeploymentRegistry(self._lake_root()), actor_from_context(context)
        if not event["caught_up"]:
            reason = (
                f"catch-up: green {green!r} did not catch up within "
                f"{float(self.request['catch_up_timeout_s']):.0f}s ({event['state']})"
            )
            record(registry, green, "replay_gate_failed", actor, reason)
            raise ReplayGateFailed(reason)
        details = {"offsets_behind": event["offsets_behind"], "seconds": event["seconds"]}
        record(registry, green, "replay_caught_up", actor, "caught up", details)
        return details
