"""Revenue from valid orders: the dedupe rule in Spark (`dedupe`), event-time windows (`windows`),
the driver-side revenue state of the stream (`state`), store enrichment (`stores`) and the batch
job's reconciliation against gold (`reconciliation`).
"""
