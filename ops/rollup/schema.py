"""The metric snapshot file schema, in pyarrow (writers) and Spark (the rollup), and the layout names.

One row per exposed sample of one scrape:

========  =====================================  ==============================================
column    type                                   meaning
========  =====================================  ==============================================
ts        timestamp, ms precision, UTC           the scrape time (one per broker per round)
broker    string                                 the broker id, e.g. ``"1"``
metric    string                                 the exposed sample name (``..._total``,
                                                 ``..._bucket``, ``..._sum``, ``..._count``)
labels    map<string, string>                    the sample's labels, ``le`` included for buckets
value     double                                 the sample value
type      string                                 the family type: counter, gauge, histogram,
                                                 summary or untyped
========  =====================================  ==============================================

Layout: ``DIR/date=YYYY-MM-DD/hour=HH/<broker>-<epoch_ms>.parquet`` (Hive-style partitions, UTC).
A file is written as ``<name>.tmp`` and renamed into place, so every reader only considers names
ending in ``.parquet``; the Spark reader does so with ``pathGlobFilter``.

Rules kept here:

* The two schemas describe the same columns in the same order; a test compares them field by field.
* This module must stay importable without pyspark: ``ops/snapshots.py`` (which a broker imports to
  write its own snapshots) uses the pyarrow schema, and importing pyspark there would be a layering
  break. The Spark types are therefore built by ``snapshot_struct_type()``, which imports pyspark
  when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = [
    "METRIC_TYPES",
    "PARTITION_COLUMNS",
    "SNAPSHOT_ARROW_SCHEMA",
    "SNAPSHOT_COLUMNS",
    "SNAPSHOT_GLOB",
    "SNAPSHOT_SUFFIX",
    "TMP_SUFFIX",
    "snapshot_struct_type",
]

SNAPSHOT_COLUMNS: Final = ("ts", "broker", "metric", "labels", "value", "type")
PARTITION_COLUMNS: Final = ("date", "hour")
METRIC_TYPES: Final = frozenset({"counter", "gauge", "histogram", "summary", "untyped"})

SNAPSHOT_SUFFIX: Final = ".parquet"
TMP_SUFFIX: Final = ".tmp"
SNAPSHOT_GLOB: Final = "*" + SNAPSHOT_SUFFIX

SNAPSHOT_ARROW_SCHEMA: Final = pa.schema(
    [
        pa.field("ts", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("broker", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field(
            "labels",
            pa.map_(
                pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string(), nullable=False)
            ),
            nullable=False,
        ),
        pa.field("value", pa.float64(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
    ]
)


def snapshot_struct_type() -> StructType:
    """The Spark schema of a snapshot file (the same columns as ``SNAPSHOT_ARROW_SCHEMA``).

    Spark reads Parquet ``timestamp(ms, UTC)`` as ``TimestampType`` (instants, microsecond
    precision, shown in the session time zone, which the rollup sets to UTC).
    """
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("ts", T.TimestampType(), nullable=False),
            T.StructField("broker", T.StringType(), nullable=False),
            T.StructField("metric", T.StringType(), nullable=False),
            T.StructField(
                "labels", T.MapType(T.StringType(), T.StringType(), valueContainsNull=False), False
            ),
            T.StructField("value", T.DoubleType(), nullable=False),
            T.StructField("type", T.StringType(), nullable=False),
        ]
    )
