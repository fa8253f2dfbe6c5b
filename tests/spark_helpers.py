"""Helpers for tests that run on the session's shared SparkSession."""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager

from pyspark.sql import SparkSession


@contextmanager
def session_conf(spark: SparkSession, settings: dict[str, str]) -> Generator[None, None, None]:
    """`settings` on the shared session for the block, then each key as it was before (unset if it was
    unset): a test's setting must not leak into the tests that run after it on the same session."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
