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
ending in a digit and ``.parquet`` (``SNAPSHOT_GLOB``); the Spark reader does so with
``pathGlobFilter``.

State-change files sit beside them, ``DIR/date=YYYY-MM-DD/hour=HH/<broker>-<epoch_ms>.state-changes.parquet``
(``STATE_CHANGES_GLOB``; the snapshot glob never matches them), one row per ISR state change a
broker made or learned (docs/operations.md §5):

===================  ==========================  ==================================================
column               type                        meaning
===================  ==========================  ==================================================
ts                   timestamp, ms, UTC          when the change took effect (the recording broker's
                                                 wall clock: the ZooKeeper write completed)
broker               string                      the recording broker id
incarnation          int64                       the recording process's start time (epoch ms):
                                                 ``(broker, incarnation, sequence)`` is unique
sequence             int64                       1, 2, 3... within one incarnation
kind                 string                      ``STATE_CHANGE_KINDS``
topic, partition     string, int32 (nullable)    the partition (null for ``propagation``)
leader               int32 (nullable)            the leader after the change (-1: none)
leader_epoch         int32 (nullable)            the leader epoch after the change
zk_version           int32 (nullable)            the partition state znode's version after it
isr                  list<int32> (nullable)      the ISR after the change
previous_isr         list<int32> (nullable)      the ISR before it, when the recorder knew it
replicas             list<int32> (nullable)      the assigned replicas
min_insync_replicas  int32 (nullable)            the topic's ``min.insync.replicas``, when known
reason               string (nullable)           ``STATE_CHANGE_REASONS``
partitions           list<string> (nullable)     ``propagation``: the ``topic-partition`` names the
                                                 notification carried
===================  ==========================  ==================================================

A partition state is identified by ``(topic, partition, leader_epoch, zk_version)``: the writer's
own event and a controller's ``state_learned`` event for the same write are the same state.

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
    "STATE_CHANGES_GLOB",
    "STATE_CHANGES_SUFFIX",
    "STATE_CHANGE_ARROW_SCHEMA",
    "STATE_CHANGE_COLUMNS",
    "STATE_CHANGE_KINDS",
    "STATE_CHANGE_REASONS",
    "TMP_SUFFIX",
    "snapshot_struct_type",
    "state_change_struct_type",
]

SNAPSHOT_COLUMNS: Final = ("ts", "broker", "metric", "labels", "value", "type")
PARTITION_COLUMNS: Final = ("date", "hour")
METRIC_TYPES: Final = frozenset({"counter", "gauge", "histogram", "summary", "untyped"})

SNAPSHOT_SUFFIX: Final = ".parquet"
TMP_SUFFIX: Final = ".tmp"
# Snapshot names end in the scrape's epoch ms: ``[0-9]`` keeps state-change files out.
SNAPSHOT_GLOB: Final = "*[0-9]" + SNAPSHOT_SUFFIX
STATE_CHANGES_SUFFIX: Final = ".state-changes" + SNAPSHOT_SUFFIX
STATE_CHANGES_GLOB: Final = "*" + STATE_CHANGES_SUFFIX

STATE_CHANGE_COLUMNS: Final = (
    "ts", "broker", "incarnation", "sequence", "kind", "topic", "partition", "leader", "leader_epoch",
    "zk_version", "isr", "previous_isr", "replicas", "min_insync_replicas", "reason", "partitions",
)  # fmt: skip
# isr_shrink / isr_expand: a leader's own ISR write. controller_isr_shrink: the controller removed a
# dead or shutting-down broker. leader_election: the controller elected a leader. state_learned: the
# controller read a partition state it had not seen (how a change survives its writer's death).
# propagation: a broker wrote an ISR change notification (the 5 s / 60 s rule).
STATE_CHANGE_KINDS: Final = frozenset(
    {"isr_shrink", "isr_expand", "controller_isr_shrink", "leader_election", "state_learned", "propagation"}
)
# lag / fetch_stopped: why a follower left (it fetched but did not catch up in
# replica.lag.time.max.ms / it did not fetch at all); caught_up: why it came back; broker_down,
# controlled_shutdown, new_partition, preferred, unclean: why the controller acted; zookeeper:
# state_learned; written / forced: a propagation after 5 s of quiet / after 60 s without one.
STATE_CHANGE_REASONS: Final = frozenset(
    {
        "lag", "fetch_stopped", "caught_up", "broker_down", "controlled_shutdown", "new_partition",
        "preferred", "unclean", "zookeeper", "written", "forced",
    }
)  # fmt: skip

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

_INT_LIST: Final = pa.list_(pa.field("item", pa.int32(), nullable=False))

STATE_CHANGE_ARROW_SCHEMA: Final = pa.schema(
    [
        pa.field("ts", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("broker", pa.string(), nullable=False),
        pa.field("incarnation", pa.int64(), nullable=False),
        pa.field("sequence", pa.int64(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("leader", pa.int32()),
        pa.field("leader_epoch", pa.int32()),
        pa.field("zk_version", pa.int32()),
        pa.field("isr", _INT_LIST),
        pa.field("previous_isr", _INT_LIST),
        pa.field("replicas", _INT_LIST),
        pa.field("min_insync_replicas", pa.int32()),
        pa.field("reason", pa.string()),
        pa.field("partitions", pa.list_(pa.field("item", pa.string(), nullable=False))),
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


def state_change_struct_type() -> StructType:
    """The Spark schema of a state-change file (the same columns as ``STATE_CHANGE_ARROW_SCHEMA``)."""
    from pyspark.sql import types as T

    ints = T.ArrayType(T.IntegerType(), containsNull=False)
    return T.StructType(
        [
            T.StructField("ts", T.TimestampType(), nullable=False),
            T.StructField("broker", T.StringType(), nullable=False),
            T.StructField("incarnation", T.LongType(), nullable=False),
            T.StructField("sequence", T.LongType(), nullable=False),
            T.StructField("kind", T.StringType(), nullable=False),
            T.StructField("topic", T.StringType()),
            T.StructField("partition", T.IntegerType()),
            T.StructField("leader", T.IntegerType()),
            T.StructField("leader_epoch", T.IntegerType()),
            T.StructField("zk_version", T.IntegerType()),
            T.StructField("isr", ints),
            T.StructField("previous_isr", ints),
            T.StructField("replicas", ints),
            T.StructField("min_insync_replicas", T.IntegerType()),
            T.StructField("reason", T.StringType()),
            T.StructField("partitions", T.ArrayType(T.StringType(), containsNull=False)),
        ]
    )
