"""The streaming engine: the Spark session (`session`), the checkpoints a deployment keeps
(`checkpoints`), the queries it runs (`queries`), each micro-batch (`micro_batch`) and the progress it
publishes for the control plane (`observability`).
"""
