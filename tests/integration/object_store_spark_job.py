"""A Spark job for test_lake_on_object_store: write or read a Delta table on s3a://, print its rows as JSON.

Run as its own process (the test session's Spark has no S3A on its classpath, and a JVM's jars are
fixed when it starts). Like spark-submit for the platform's apps, it gets S3A's jars and settings
(`lake_storage.spark_object_store_access`) as arguments and the credentials in its environment.
"""

from __future__ import annotations

import json
import sys

from spark_apps.engine.session import build_spark_session, local_jar_paths


def main(action: str, table_uri: str, object_store_access: str) -> None:
    access = json.loads(object_store_access)
    spark = build_spark_session(
        "object-store-test",
        master="local[1]",
        jars=[*local_jar_paths(), *access["jars"]],
        extra_conf=access["conf"],
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if action == "write":
            spark.createDataFrame([(1, "spark"), (2, "spark")], "id INT, writer STRING").write.format(
                "delta"
            ).save(table_uri)
        rows = spark.read.format("delta").load(table_uri).orderBy("id").collect()
        print(json.dumps([row.asDict() for row in rows]))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
