"""The data plane: the Spark apps spark-submit runs (shipped alone, as a zip, with --py-files).

Two entry points, submitted by path: `orders_streaming_app.py` (the streaming app) and
`reprocess_revenue_job.py` (the batch repair). Their code reads down these sub-packages:

    contract/    what the control plane and the data plane agree on; imports without pyspark
    validation/  raw Kafka records -> typed orders or dead letters (Spark schemas, routing)
    revenue/     dedupe, event-time windows, the driver's revenue state, stores, reconciliation
    storage/     every read and write: Kafka, bronze, gold (Spark and driver MERGE), stores
    engine/      the streaming engine: session, queries, each micro-batch from Kafka to gold, progress

`jvm/order-validator/` is no Python package: the Java these apps call inside Spark (validation fast
path, dedupe operator, batch cache), compiled by `make jvm` into a jar on Spark's classpath; the
zip takes only `.py` files.
"""
