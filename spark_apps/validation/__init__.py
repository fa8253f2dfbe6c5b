"""Raw Kafka order records in, typed orders or dead letters out: the Spark schemas of every record
shape, the order validation (`orders`) and where validated records go (`routing`). Pure DataFrame
functions.
"""
