"""The stores table's cache: re-read only when the stores topic moved, and a broker that goes away
while its end offsets are checked never fails the batch (a cluster test killed a partition leader
and the app exited with "Failed to get watermark offsets")."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from spark_apps.contract.config import StreamingAppConfig
from spark_apps.storage import stores as stores_module
from spark_apps.storage.stores import StoresTable


class FakeStores(StoresTable):
    def __init__(self, answers: list[Any]) -> None:
        super().__init__(StreamingAppConfig())
        self.answers = answers
        self.closed = 0

    def _stores_end_offsets(self) -> dict[int, int]:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        self.closed += 1


def test_a_broker_gone_while_checking_keeps_the_table_and_a_first_read_goes_through_spark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[int] = []

    class Rows:
        def collect(self) -> list[tuple[str, ...]]:
            reads.append(1)
            return [("store_1",) * 7]

    monkeypatch.setattr(stores_module, "read_stores_table", lambda spark, config: Rows())
    monkeypatch.setattr(
        stores_module, "local_table", lambda spark, rows, schema: f"table after {len(reads)} reads"
    )
    gone = KafkaException(KafkaError(KafkaError._DESTROY_BROKER))
    stores = FakeStores([gone, {0: 5}, {0: 5}, gone, {0: 6}])
    assert stores.current(None) == "table after 1 reads"  # nothing cached yet: read anyway
    assert stores.closed == 1  # the broken client is dropped; the next check makes a new one
    assert stores.current(None) == "table after 2 reads"  # offsets unknown before: read again
    assert stores.current(None) == "table after 2 reads"  # unchanged: cached
    assert stores.current(None) == "table after 2 reads"  # broker gone: the cached table
    assert stores.current(None) == "table after 3 reads"  # the topic moved meanwhile
