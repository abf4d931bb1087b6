"""Fixtures for the ops tests: one local SparkSession for the whole session (``-m spark`` tests).

The session is ``local[2]`` with two shuffle partitions (the default 200 makes every tiny shuffle
slow), no UI, the driver bound to and advertised on 127.0.0.1, and UTC as the SQL time zone, so
windows and partitions come out the same on every machine. Spark starts once (a few seconds) and is
stopped at the end of the test session.

When Java is missing the Spark tests are skipped with the reason, unless ``ACTORLOG_REQUIRE_SPARK``
is set (CI sets it), in which case they fail: a CI run without Java must not pass by skipping.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession


def _java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return True
    return shutil.which("java") is not None


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    if not _java_available():
        if os.environ.get("ACTORLOG_REQUIRE_SPARK"):
            pytest.fail("ACTORLOG_REQUIRE_SPARK is set but no java is installed")
        pytest.skip("needs a Java runtime for PySpark (set ACTORLOG_REQUIRE_SPARK to make this an error)")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("actorlog-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
