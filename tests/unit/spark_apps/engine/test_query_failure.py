"""A failed query's error as the driver logs it: the cause, not pages of plan and stack frames."""

from __future__ import annotations

from spark_apps.engine.observability import query_failure

SPARK_ERROR = (
    "java.lang.IllegalArgumentException: No offset matched from request of topic-partition orders-0 and "
    "timestamp 4102444800000.\n"
    "\tat org.apache.spark.sql.kafka010.KafkaOffsetReaderAdmin.readTimestampOffsets(Reader.scala:238)\n"
    "\tat scala.Option.getOrElse(Option.scala:201)\n"
    "Caused by: java.lang.RuntimeException: deeper\n"
    "\t... 42 more\n"
    "=== Streaming Query ===\n"
    "Identifier: blue__revenue [id = 1, runId = 2]\n"
    "Logical Plan:\n" + "   +- ~Project [key#350, value#351]\n" * 500
)


def test_the_cause_is_kept_and_the_plan_and_frames_dropped() -> None:
    assert query_failure(SPARK_ERROR) == (
        "java.lang.IllegalArgumentException: No offset matched from request of topic-partition orders-0 and "
        "timestamp 4102444800000.\nCaused by: java.lang.RuntimeException: deeper"
    )
    assert query_failure("plain message") == "plain message"
