"""The one-query driver's writes to the revenue topic: from the driver, in Kafka transactions.

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

import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Context, Decimal
from typing import Any

from spark_apps.contract.config import StreamingAppConfig
from spark_apps.contract.fencing import LeaseRejectedError
from spark_apps.contract.records import GOLD_COLUMNS, MONEY_SCALE
from spark_apps.storage.kafka import kafka_admin_config

LOG = logging.getLogger(__name__)
TRANSACTION_TIMEOUT_S = 60.0
_CENT = Decimal(1).scaleb(-MONEY_SCALE)
_WIDE = Context(prec=60)  # gold's DECIMAL(38,2) has more digits than Python's default 28


def revenue_record(row: Sequence[Any]) -> tuple[bytes, bytes]:
    """(key, value) of one gold row (GOLD_COLUMNS order) as the revenue topic carries it: the key
    `location|type|window_start` (`...T09:00:15Z`) and the row as JSON, timestamps with milliseconds
    and Z, money as an exact number, nulls written out (`validation.schemas.JSON_WRITE_OPTIONS`)."""
    fields = dict(zip(GOLD_COLUMNS, row, strict=True))
    key = f"{fields['location_id']}|{fields['order_type']}|{_utc(fields['window_start']):%Y-%m-%dT%H:%M:%SZ}"
    rendered: dict[str, Any] = {}
    for name, value in fields.items():
        if isinstance(value, datetime):
            rendered[name] = _utc(value).strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
        elif isinstance(value, Decimal):
            rendered[name] = _Number(format(value.quantize(_CENT, context=_WIDE), "f"))
        else:
            rendered[name] = value
    return key.encode(), _dumps(rendered).encode()


class _Number(str):
    """A JSON number written from its exact text (json would go through float)."""


def _dumps(fields: dict[str, Any]) -> str:
    parts = []
    for name, value in fields.items():
        text = str(value) if isinstance(value, _Number) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{json.dumps(name)}:{text}")
    return "{" + ",".join(parts) + "}"


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class ProducerFencedError(LeaseRejectedError):
    """A newer driver of this deployment initialised the revenue topic's producer: this one is stale."""


def fenced_error(
    error: BaseException, transactional_id: str, what: str, fatal_cause: Any = None
) -> ProducerFencedError | None:
    """The platform's error for `error` when it says a newer producer of `transactional_id` fenced
    this one, whichever call reports it: a send's delivery, a commit, a new transaction, or a later
    send that only says "fatal error" (`fatal_cause`: the fatal error the producer reported then)."""
    from confluent_kafka import KafkaError, KafkaException

    kafka_error = error.args[0] if isinstance(error, KafkaException) and error.args else None
    if isinstance(kafka_error, KafkaError) and kafka_error.code() == KafkaError._FATAL:
        kafka_error = fatal_cause
    fencing_codes = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    if not isinstance(kafka_error, KafkaError) or kafka_error.code() not in fencing_codes:
        return None
    return ProducerFencedError(
        f"the revenue topic's producer {transactional_id} was fenced by a newer driver of this deployment "
        f"while trying to {what}: nothing this driver sent is committed"
    )


class RevenueTopicWriter:
    """A transactional producer of one deployment's revenue topic (see the module docstring)."""

    def __init__(self, config: StreamingAppConfig) -> None:
        from confluent_kafka import Producer

        self.topic = config.kafka.revenue_topic
        self._fatal: Any = None
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
        try:
            producer.begin_transaction()
            for row in rows:
                key, value = revenue_record(row)
                producer.produce(self.topic, value=value, key=key)
                producer.poll(0)  # delivery reports; a fenced producer's first failed send raises here
            producer.commit_transaction(TRANSACTION_TIMEOUT_S)
        except BaseException as error:
            fenced = self._fenced(error, "write a transaction")
            if fenced is not None:
                raise fenced from error
            self._abort()
            raise

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

    def _abort(self) -> None:
        try:
            self._producer.abort_transaction(TRANSACTION_TIMEOUT_S)
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
