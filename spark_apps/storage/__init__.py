"""Every read and write of the data plane, one module per place: Kafka (`kafka`, `kafka_ranges`, the
transactional `revenue_topic`), the bronze archive (`bronze`, a replay's `replay_history`), gold
(`gold`: Spark's MERGE and repair; `gold_from_driver`: the driver's delta-rs MERGE) and the stores
table (`stores`).
"""
