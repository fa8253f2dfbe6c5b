"""The streaming app under spark-submit, with every progress event recorded for the benchmark.

The app's own listener keeps only the latest progress per query; the benchmark needs all of them
(end offsets and durations of each micro-batch) to compute replay throughput without JVM start-up
and per-record latency. This entry point builds the app's session, adds a recorder, then runs the
unchanged app (`run(config)` reuses the session and installs its graceful SIGTERM handler).

Run: spark-submit bench/spark_driver.py --events out.jsonl --timings out.json --config ... --set ...
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any


def progress_recorder(path: Path) -> Any:
    """A StreamingQueryListener appending each StreamingQueryProgress (Spark's JSON) as one line. Its
    progress crosses from the JVM as JSON (`JsonProgressListener`), as the app's own listener's does:
    the recorder adds one py4j call per batch to the driver it measures."""
    from spark_apps.engine.observability import JsonProgressListener

    class ProgressRecorder(JsonProgressListener):
        def __init__(self) -> None:
            self._lock = threading.Lock()
            self._out = path.open("a", buffering=1)

        def on_progress(self, progress: dict[str, Any]) -> None:
            with self._lock:
                self._out.write(json.dumps(progress) + "\n")

        def onQueryIdle(self, event: Any) -> None:
            pass

    return ProgressRecorder()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--events", required=True, help="JSON lines of every progress event")
    parser.add_argument("--timings", required=True, help="JSON with process/session/run times (epoch s)")
    args = parser.parse_args()
    # The app's own log lines (per-batch steps of the engine) go to the run's driver.log.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    import psutil

    from spark_apps.contract.config import load_config
    from spark_apps.orders_streaming_app import build_session, run

    config = load_config(args.config, args.overrides)
    timings: dict[str, Any] = {"python_started": psutil.Process().create_time()}
    session = build_session(config)
    timings["session_ready"] = time.time()
    session.streams.addListener(progress_recorder(Path(args.events)))
    try:
        run(config)
    finally:
        timings["run_finished"] = time.time()
        Path(args.timings).write_text(json.dumps(timings))


if __name__ == "__main__":
    main()
