"""Columns shaped like the app's records, for tests of how Spark carries them (the batch cache, the
dedupe operator's packing)."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def line_items(row_number: Column) -> Column:
    """Three line items per row (none for every fifth), as the app's `order_line_items`: an array of
    structs of a name, a decimal price (null for every eleventh row) and a quantity."""
    item = F.struct(
        F.concat(F.lit("item-"), (row_number % 13).cast("string")).alias("name"),
        F.when(row_number % 11 == 0, None)
        .otherwise((row_number % 500 / 100).cast("decimal(10,2)"))
        .alias("price"),
        (row_number % 4).cast("int").alias("quantity"),
    )
    return F.when(row_number % 5 == 0, F.array()).otherwise(F.array(item, item, item))
