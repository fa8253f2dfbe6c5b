"""The streaming driver's writes to the revenue topic: from the driver, in Kafka transactions.

The revenue topic is compacted: its consumers keep the latest value per window. A driver that
stalled after its gold commit and woke after its successor had written newer totals would, with
Spark's (non-transactional) Kafka sink, land its stale totals last, and they would stay. So each
batch's window rows are produced in one transaction of a producer whose `transactional.id` belongs
to the deployment (`DeploymentNames.revenue_producer_id`). Every driver initialises it when it
starts; Kafka then fences every older producer with that id: a stalled driver's next send or commit
fails (`ProducerFencedError`, reported as a lost lease), and what it had sent in its open
transaction is aborted. Consumers that read with `isolation.level=read_committed` (librdkafka's
default, not the Java client's) never see it.

The rows are the ones the driver already holds for its gold MERGE: no Spark job, and the records are
the same ones Spark's sink wrote (`revenue.windows.to_revenue_kafka_records`; a test compares them).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Context, Decimal
from json.encoder import encode_basestring as _json_string  # json.dumps' own, without its overhead
from typing import Any

from spark_apps.contract.config import StreamingAppConfig
from spark_apps.contract.fencing import LeaseRejectedError
from spark_apps.contract.records import GOLD_COLUMNS, MONEY_SCALE
from spark_apps.storage.kafka import kafka_admin_config

LOG = logging.getLogger(__name__)
TRANSACTION_TIMEOUT_S = 60.0
# Records produced and not yet acknowledged that the producer holds (librdkafka's
# `queue.buffering.max.messages`, its default): ~20-40 MB of window records.
QUEUE_FULL_MESSAGES = 100_000
# How long a batch waits for room in a full queue, counted from its transaction's start: inside the
# transaction's timeout, which librdkafka also gives each queued record (`message.timeout.ms`), so
# the batch fails with the reason before its records expire.
QUEUE_WAIT_S = TRANSACTION_TIMEOUT_S - 5.0
_QUEUE_FULL_POLL_S = 0.1
# Aborting after a stall waits on the same broker: a short wait, since the next driver's
# `init_transactions` aborts a transaction left open anyway.
_ABORT_AFTER_STALL_S = 5.0
_CENT = Decimal(1).scaleb(-MONEY_SCALE)
_WIDE = Context(prec=60)  # gold's DECIMAL(38,2) has more digits than Python's default 28


def revenue_record(row: Sequence[Any]) -> tuple[bytes, bytes]:
    """(key, value) of one gold row (GOLD_COLUMNS order) as the revenue topic carries it: the key
    `location|type|window_start` (`...T09:00:15Z`) and the row as JSON, timestamps with milliseconds
    and Z, money as an exact number, nulls written out (`validation.schemas.JSON_WRITE_OPTIONS`).

    A batch's windows are written one record each, so this is per-window work: 65 us a row when it
    was built with `json.dumps` per field and `strftime` (6.5 s for a window-heavy batch's 99,000
    windows), 9 us with the field names' JSON made once, json's C string encoder, and each window
    bound formatted once (bench/results/history.md, "per-window work in the gold step")."""
    if len(row) != len(GOLD_COLUMNS):
        raise ValueError(f"a gold row has {len(GOLD_COLUMNS)} fields, got {len(row)}")
    value = ",".join([name + _json_value(field) for name, field in zip(_JSON_NAMES, row, strict=True)])
    key = f"{row[_LOCATION]}|{row[_ORDER_TYPE]}|{_timestamp_texts(row[_WINDOW_START])[0]}"
    return key.encode(), ("{" + value + "}").encode()


# Each field's name as JSON with its colon, made once.
_JSON_NAMES = tuple(json.dumps(name) + ":" for name in GOLD_COLUMNS)
_LOCATION = GOLD_COLUMNS.index("location_id")
_ORDER_TYPE = GOLD_COLUMNS.index("order_type")
_WINDOW_START = GOLD_COLUMNS.index("window_start")


def _json_value(value: Any) -> str:
    """One field as JSON: what `json.dumps(value, ensure_ascii=False)` writes for text, numbers and
    null; a timestamp as `yyyy-MM-ddTHH:mm:ss.SSSZ` (UTC, the fraction truncated to milliseconds);
    money as its exact decimal at scale 2, never through float."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return _json_string(value)
    if type(value) is int:  # not bool, which json writes as true/false
        return str(value)
    if isinstance(value, datetime):
        return _timestamp_texts(value)[1]
    if isinstance(value, Decimal):
        return format(value.quantize(_CENT, context=_WIDE), "f")
    return json.dumps(value)


@functools.lru_cache(maxsize=4096)
def _timestamp_texts(moment: datetime) -> tuple[str, str]:
    """A window bound as the key writes it (`...T09:00:15Z`) and as the value does (JSON, with
    milliseconds). A batch's windows share a few hundred bounds: each is formatted once."""
    iso = _utc(moment).isoformat(timespec="microseconds")[:-6]  # without "+00:00"
    return iso[:19] + "Z", '"' + iso[:23] + 'Z"'


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class RevenueTopicDeliveryError(RuntimeError):
    """The broker refused records of a batch (a missing topic, an ACL, a record over its limit): the
    batch fails, naming the topic and the broker's reason."""


class RevenueTopicStalledError(RuntimeError):
    """The broker did not acknowledge a batch's revenue records within the transaction's timeout."""


class ProducerFencedError(LeaseRejectedError):
    """A newer driver of this deployment initialised the revenue topic's producer: this one is stale."""


def kafka_error_of(error: BaseException) -> Any:
    """The KafkaError a KafkaException carries (its first argument), else None."""
    from confluent_kafka import KafkaException

    return error.args[0] if isinstance(error, KafkaException) and error.args else None


def fenced_error(
    error: BaseException, transactional_id: str, what: str, fatal_cause: Any = None
) -> ProducerFencedError | None:
    """The platform's error for `error` when it says a newer producer of `transactional_id` fenced
    this one, whichever call reports it: a send's delivery, a commit, a new transaction, or a later
    send that only says "fatal error" (`fatal_cause`: the fatal error the producer reported then)."""
    from confluent_kafka import KafkaError

    kafka_error = kafka_error_of(error)
    if isinstance(kafka_error, KafkaError) and kafka_error.code() == KafkaError._FATAL:
        kafka_error = fatal_cause
    fencing_codes = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    if not isinstance(kafka_error, KafkaError) or kafka_error.code() not in fencing_codes:
        return None
    return ProducerFencedError(
        f"the revenue topic's producer {transactional_id} was fenced by a newer driver of this deployment "
        f"while trying to {what}: nothing this driver sent is committed"
    )


# Records queued between two polls of the producer's events (each poll is a call into librdkafka, 1-2
# microseconds, and a window-heavy batch writes ~100,000 records). A fenced producer's error is
# served by the next poll, and the commit refuses a fenced transaction in any case; a full queue
# polls on its own (`_produce`).
_POLL_EVERY = 256


@functools.cache
def _not_refusal_codes() -> frozenset[int]:
    from confluent_kafka import KafkaError

    return frozenset({KafkaError._MSG_TIMED_OUT, KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})


class RevenueTopicWriter:
    """A transactional producer of one deployment's revenue topic (see the module docstring)."""

    def __init__(self, config: StreamingAppConfig) -> None:
        from confluent_kafka import Producer

        self.topic = config.kafka.revenue_topic
        self._fatal: Any = None
        self._undelivered: str | None = None
        self.transactional_id = config.names.revenue_producer_id
        self._producer = Producer(
            {
                **kafka_admin_config(config),
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": int(TRANSACTION_TIMEOUT_S * 1000),
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "compression.type": "lz4",
                "queue.buffering.max.messages": QUEUE_FULL_MESSAGES,
                "error_cb": self._on_error,
            }
        )
        # Fences every older producer of this id (a stalled or presumed-dead driver of the deployment).
        self._call(lambda: self._producer.init_transactions(TRANSACTION_TIMEOUT_S), "initialise")
        LOG.info("revenue topic %s: transactional producer %s ready", self.topic, self.transactional_id)

    def write(self, rows: Sequence[Sequence[Any]]) -> None:
        """Produce the window rows (GOLD_COLUMNS order) in one committed transaction."""
        if not rows:
            return
        producer = self._producer
        self._undelivered = None
        try:
            producer.begin_transaction()
            deadline = time.monotonic() + QUEUE_WAIT_S
            for index, row in enumerate(rows):
                key, value = revenue_record(row)
                self._produce(key, value, deadline)
                if index % _POLL_EVERY == 0:
                    # Delivery reports; a fenced producer's first failed send raises here.
                    producer.poll(0)
            producer.commit_transaction(TRANSACTION_TIMEOUT_S)
        except BaseException as error:
            # Before the abort: purging the queue reports every queued record as failed.
            undelivered = self._undelivered
            fenced = self._fenced(error, "write a transaction")
            if fenced is not None:
                raise fenced from error
            if isinstance(error, RevenueTopicStalledError):
                self._abort(_ABORT_AFTER_STALL_S)
            else:
                self._abort()
            refused = self._refused(error, undelivered)
            if refused is not None:
                raise refused from error
            raise

    def _produce(self, key: bytes, value: bytes, deadline: float) -> None:
        """Queue one record; while librdkafka's local queue is full (`QUEUE_FULL_MESSAGES` records not yet
        acknowledged: a broker that lags, pauses or moves a leader), serve delivery reports until there
        is room. A batch may change more windows than the queue holds (each order read adds to
        window.size / window.slide windows: one with tumbling windows), so a full queue is a wait, not
        the batch's failure. Bounded: past `deadline` (`QUEUE_WAIT_S` after the transaction began),
        the batch fails with the reason. A record that raised BufferError was never queued, so sending
        it again neither duplicates nor reorders anything."""
        while True:
            try:
                self._producer.produce(self.topic, value=value, key=key, on_delivery=self._on_delivery)
                return
            except BufferError:
                if time.monotonic() > deadline:
                    raise RevenueTopicStalledError(
                        f"the revenue topic {self.topic}: the broker did not take this batch's records "
                        f"within {QUEUE_WAIT_S:.0f} s ({QUEUE_FULL_MESSAGES:,} were waiting for its "
                        "acknowledgement); check the broker (kafka.bootstrap_servers) and its logs"
                    ) from None
                self._producer.poll(_QUEUE_FULL_POLL_S)

    def _refused(self, error: BaseException, undelivered: str | None) -> RevenueTopicDeliveryError | None:
        """The batch's error as a refusal naming the topic and the reason, if the client or the broker
        refused records (librdkafka's commit error only says "N message(s) failed delivery"); None
        for any other error (a stall, a lost broker, an interrupt), which is raised as it is."""
        from confluent_kafka import KafkaError

        if isinstance(error, RevenueTopicStalledError) or not isinstance(error, Exception):
            return None
        kafka_error = kafka_error_of(error)
        if isinstance(kafka_error, KafkaError) and kafka_error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            return self._refusal(f"a record over the producer's message.max.bytes: {kafka_error.str()}")
        if undelivered is not None:
            return self._refusal(undelivered)
        return None

    def _refusal(self, reason: str) -> RevenueTopicDeliveryError:
        return RevenueTopicDeliveryError(
            f"the revenue topic {self.topic}: this batch's records were refused ({reason}); check that "
            "the topic exists (the provision_topics DAG creates the platform's topics), that the "
            "deployment may write it"
        )

    def _on_delivery(self, error: Any, message: Any) -> None:
        # Keep the first refusal of the batch: the one that names the cause. A record that timed out
        # (a lost or stalled broker) or was purged by an abort was not refused, and says nothing new.
        if error is not None and self._undelivered is None and error.code() not in _not_refusal_codes():
            self._undelivered = f"partition {message.partition()}: {error.str()}"

    def _on_error(self, error: Any) -> None:
        # librdkafka reports a fatal error (a fenced producer) here once; later calls only say "fatal".
        if error.fatal():
            self._fatal = error
        LOG.warning("revenue topic producer %s: %s", self.transactional_id, error)

    def _fenced(self, error: BaseException, what: str) -> ProducerFencedError | None:
        from confluent_kafka import KafkaException

        try:
            self._producer.poll(0)  # serve a pending error report: the fatal error's cause
        except KafkaException as reported:  # poll raises the fatal error itself
            if self._fatal is None and reported.args:
                self._fatal = reported.args[0]
        return fenced_error(error, self.transactional_id, what, self._fatal)

    def _abort(self, timeout_s: float = TRANSACTION_TIMEOUT_S) -> None:
        try:
            self._producer.abort_transaction(timeout_s)
        except Exception as error:  # the batch's own error is the one to report
            LOG.warning("revenue topic: aborting the transaction failed: %s", error)

    def _call(self, action: Any, what: str) -> Any:
        try:
            return action()
        except BaseException as error:
            fenced = self._fenced(error, what)
            if fenced is not None:
                raise fenced from error
            raise

    def close(self) -> None:
        """Let go of the producer (its connections and threads): a run that ends, or a test's."""
        self._producer.flush(5)
        self._producer = None  # type: ignore[assignment]
