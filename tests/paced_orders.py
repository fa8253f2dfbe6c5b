"""For tests of a live app: orders paced as a real shop sends them (a burst every 100 ms), and the app
running in process on the session's SparkSession until the test stops its queries."""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from revenue_platform.orders_generator import GeneratedRecord, GeneratorSettings, generate_orders, order_json

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_apps.contract.config import StreamingAppConfig


class LiveApp(threading.Thread):
    """`spark_apps.orders_streaming_app.run(config, spark)` in a thread: it runs until the test stops the
    session's queries; whatever it raises is kept in `error`."""

    def __init__(self, config: StreamingAppConfig, spark: SparkSession) -> None:
        super().__init__(daemon=True)
        self.config, self.spark = config, spark
        self.error: BaseException | None = None

    def run(self) -> None:
        from spark_apps.orders_streaming_app import run

        try:
            run(self.config, self.spark)
        except BaseException as error:  # reported by the test, not lost in the thread
            self.error = error

    def stop(self) -> None:
        for query in self.spark.streams.active:
            query.stop()
        self.join(timeout=60)


def stamped_order(template: dict[str, Any], order_id: int, ordered_at: datetime) -> GeneratedRecord:
    """An order like `template` with its own id and event time, keyed by its store."""
    order = template | {"orderId": order_id, "orderedDateTime": ordered_at.isoformat(timespec="seconds")}
    return GeneratedRecord(key=str(order["locationId"]).encode(), value=order_json(order), order=order)


class PacedOrders(threading.Thread):
    """Sends honest orders at `rate_per_s` for `seconds`, each dated 0-3 s before it is sent, and keeps
    them (`honest`) for the oracle. A subclass adds records to a burst with `extra`. An error ends the
    thread and is kept in `error` for the test to report."""

    def __init__(
        self, bootstrap: str, topic: str, rate_per_s: int, seconds: int, first_order_id: int
    ) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.rate_per_s, self.seconds, self.first_order_id = rate_per_s, seconds, first_order_id
        self.templates = [
            r.order for r in generate_orders(GeneratorSettings(orders=500, stores=3, seed=11)) if r.order
        ]
        self.honest: list[GeneratedRecord] = []
        self.error: BaseException | None = None

    def extra(self, tick: int) -> list[tuple[GeneratedRecord, dict[str, int]]]:
        """Records to send in burst `tick` besides the honest orders, each with its produce() extras
        (e.g. a Kafka `timestamp`)."""
        return []

    def run(self) -> None:
        try:
            self._send()
        except BaseException as error:  # reported by the test, not lost in the thread
            self.error = error

    def _send(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "acks": "all"})
        rng = random.Random(3)
        started = time.monotonic()
        for tick in range(self.seconds * 10):
            burst = []
            for n in range(self.rate_per_s // 10):
                now = datetime.now(UTC).replace(tzinfo=None)
                order_id = self.first_order_id + tick * 1000 + n
                template = self.templates[order_id % len(self.templates)]
                burst.append(stamped_order(template, order_id, now - timedelta(seconds=rng.uniform(0, 3))))
            self.honest += burst
            for record, extras in [(record, {}) for record in burst] + self.extra(tick):
                producer.produce(self.topic, key=record.key, value=record.value, **extras)
            producer.poll(0)
            time.sleep(max(0.0, started + (tick + 1) / 10 - time.monotonic()))
        if producer.flush(30) != 0:
            raise RuntimeError("orders not delivered within 30 s")
