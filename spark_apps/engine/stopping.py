"""A driver asked to stop ends at the next batch boundary, even when its batches run back to back.

A graceful stop (SIGTERM, or a lease lost to another driver) used to wait for a moment with no
micro-batch running to call `query.stop()` in. A driver with a backlog (a green replaying history, an
app behind its input) starts each batch as the last one commits, so that moment rarely came and
the stop ended in the SIGKILL after its timeout (30 s by default). Now each batch checks the stop
first and, once it is asked for, refuses to start: it has read nothing and written nothing, so Spark
does not commit it, and the deployment's next driver runs the same offsets again. The query ends
with this refusal as its error, which the driver reads as the stop it asked for, not a failure
(Spark still logs it as one: an ERROR line with the traceback, followed by the driver's own line
saying the query stopped).
"""

from __future__ import annotations

import threading


class StoppedBeforeBatch(Exception):
    """A micro-batch refused to start because its driver is stopping (see the module docstring)."""


_REFUSAL = "not started: the driver is stopping"


def refuse_if_stopping(stop_requested: threading.Event, batch_id: int) -> None:
    """Raise `StoppedBeforeBatch` if the driver has been asked to stop; a batch calls this first."""
    if stop_requested.is_set():
        raise StoppedBeforeBatch(f"batch {batch_id} {_REFUSAL} (its next start runs it)")


def is_stop_refusal(query_error: object) -> bool:
    """Whether a query's error is a batch's `StoppedBeforeBatch`: the exception itself, or PySpark's
    exception for the query, whose text carries the foreachBatch function's error."""
    if isinstance(query_error, StoppedBeforeBatch):
        return True
    text = str(query_error)
    return StoppedBeforeBatch.__name__ in text and _REFUSAL in text
