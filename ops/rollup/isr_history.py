"""The ISR history from the brokers' state-change events: pure ``DataFrame -> DataFrame`` functions.

What it owns: turning the ``*.state-changes.parquet`` rows (``ops/rollup/schema.py``) into the
rollup's event tables: ``isr_intervals`` (who was in the ISR of each partition, when, and why it
changed), ``partition_isr_totals`` and ``topic_isr_totals``, ``incidents`` (stretches with any
partition under-replicated), ``propagation_delays`` (from a leader's ISR change to the ISR change
notification that carried it) and ``state_change_totals``, plus the flap cycles of ``transforms``
computed from the intervals instead of from scraped gauges. No I/O, no UDFs; the house style of
``transforms`` (every public function ends in a ``select`` of its output columns: that is the
schema contract). Times are epoch milliseconds (``*_ms``, long) and seconds (double).

Rules:

* **Duplicates.** An event is identified by ``(broker, incarnation, sequence)``: rows repeating one
  (the exporter collected it twice) are dropped first (``prepare_events``). A **partition state** is
  identified by ``(topic, partition, leader_epoch, zk_version)``: the writer's own event and a
  controller's ``state_learned`` event for the same write are one state. Of its rows, the one kept
  is the earliest non-``state_learned`` row when there is one (its ``ts`` is exact), else the
  earliest ``state_learned`` row (its ``ts`` is when the controller read it, so later than the real
  change); ties go to the lowest ``(broker, incarnation, sequence)``. ``replicas`` and
  ``min_insync_replicas`` come from that row, else from any other row of the same state.
* **Intervals.** A partition's states are ordered by ``(start_ms, leader_epoch, zk_version)``; each
  holds from its ``ts`` until the next state's, the last one until the horizon ``as_of_ms`` (the
  end of observation) and is ``open``. Events after the horizon are ignored. ``replicas`` and
  ``min_insync_replicas`` are carried forward from the latest state that had them (a leader's ISR
  write may omit them). ``under_replicated`` is ``size(isr) < size(replicas)`` and
  ``under_min_isr`` ``size(isr) < min_insync_replicas``, both null when the right-hand side is
  unknown (and then counted as neither). ``removed``/``added`` compare the ISR with the previous
  interval's; for a partition's first interval, with the event's ``previous_isr`` (null when the
  event did not say). Time orders the states, as observed: a state known only from a
  ``state_learned`` row starts when the controller read it, so it can start after a later write's
  exact time (its writer died before its events were collected, and the next writer's event came
  through): the intervals then follow the timestamps, not the znode versions.
* **Counting.** A **shrink** is an interval whose ISR is smaller than the previous one (more
  replicas removed than added), an **expand** one whose ISR is larger; an **election** an interval
  recorded as a ``leader_election``, or one whose ``leader_epoch`` is larger than the previous
  interval's with another (real, >= 0) leader (a state only the controller's reads know). The
  controller also bumps the epoch when it removes a dead broker from an ISR
  (``controller_isr_shrink``, the leader unchanged or none): that is not an election. Shrinks
  include the controller's; a broker's ``isrshrinks_total`` counter only counts its own
  (``isr_shrink``), which ``state_change_totals`` counts per broker and kind.
* **Flapping.** The ISR sizes of the intervals form the same timeline as the gauges' (``transforms.
  isr_timeline``), so ``flap_cycles`` applies ``transforms.flap_cycles`` unchanged: a shrink undone
  (size back at or above the pre-shrink size) within ``flap_span_ms``; every shrink counts once.
  The ``broker`` column is the partition's leader after the shrink.
* **Incidents.** The under-replicated intervals of all partitions, merged when they overlap or touch
  (one starts where the other ends): each merged stretch is one incident, numbered 1..n by start.
  An incident lasts until every partition in it has its full ISR back (``duration_seconds``), or is
  ``open`` at the horizon. Its ``replicas_out`` and ``reasons`` are those of the changes that
  started its under-replicated intervals.
* **Propagation.** For each ``isr_shrink``/``isr_expand`` (a leader's own write), the first
  ``propagation`` event of the same broker and incarnation at or after it (ties: the broker's
  sequence) whose ``partitions`` name the partition (``topic-partition``); none before the horizon
  leaves ``propagated_ms``, ``delay_seconds`` and ``outcome`` null.

Every partition-scoped window is partitioned by ``(topic, partition)`` (the incidents' merge is one
window over the under-replicated intervals only, which are few).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from ops.rollup import transforms
from ops.rollup.schema import STATE_CHANGE_COLUMNS

__all__ = [
    "INCIDENT_COLUMNS",
    "INTERVAL_COLUMNS",
    "PARTITION_STATE_KINDS",
    "PARTITION_TOTAL_COLUMNS",
    "PROPAGATION_DELAY_COLUMNS",
    "incidents",
    "interval_timeline",
    "isr_intervals",
    "partition_isr_totals",
    "partition_states",
    "prepare_events",
    "propagation_delays",
    "state_change_totals",
    "topic_isr_totals",
]

# The kinds whose rows describe a partition state (propagation events do not).
PARTITION_STATE_KINDS: tuple[str, ...] = (
    "isr_shrink",
    "isr_expand",
    "controller_isr_shrink",
    "leader_election",
    "state_learned",
)
LEADER_CHANGE_KINDS: tuple[str, ...] = ("isr_shrink", "isr_expand")
_STATE_KEY = ("topic", "partition", "leader_epoch", "zk_version")
_PARTITION = ("topic", "partition")
_SECOND_MS = 1000

INTERVAL_COLUMNS: tuple[str, ...] = (
    "topic", "partition", "start_ms", "end_ms", "open", "isr", "leader", "leader_epoch", "zk_version",
    "replicas", "min_insync_replicas", "under_replicated", "under_min_isr", "cause_kind", "reason",
    "removed", "added", "recorded_by",
)  # fmt: skip
PARTITION_TOTAL_COLUMNS: tuple[str, ...] = (
    "observed_seconds", "under_replicated_seconds", "under_min_isr_seconds", "shrinks", "expands",
    "elections", "flap_cycles", "longest_under_replicated_seconds",
)  # fmt: skip
INCIDENT_COLUMNS: tuple[str, ...] = (
    "incident", "start_ms", "end_ms", "open", "duration_seconds", "partitions", "partition_count",
    "replicas_out", "reasons", "under_min_isr_seconds",
)  # fmt: skip
PROPAGATION_DELAY_COLUMNS: tuple[str, ...] = (
    "broker", "topic", "partition", "change_ms", "change_kind", "propagated_ms", "delay_seconds", "outcome",
)  # fmt: skip


def _seconds(milliseconds: Column) -> Column:
    return milliseconds / F.lit(float(_SECOND_MS))


def _duration_ms() -> Column:
    return F.col("end_ms") - F.col("start_ms")


def _partition_order() -> WindowSpec:
    return Window.partitionBy(*_PARTITION).orderBy("start_ms", "leader_epoch", "zk_version")


# --- events ----------------------------------------------------------------------------------------


def prepare_events(raw: DataFrame) -> DataFrame:
    """The state-change columns plus ``ts_ms`` (epoch ms), one row per ``(broker, incarnation,
    sequence)`` (partition columns such as ``date``/``hour`` are dropped).

    Output: ts_ms, then the schema's columns (``ts`` included).
    """
    return (
        raw.select(F.unix_millis("ts").alias("ts_ms"), *STATE_CHANGE_COLUMNS)
        .dropDuplicates(["broker", "incarnation", "sequence"])
        .select("ts_ms", *STATE_CHANGE_COLUMNS)
    )


def state_change_totals(events: DataFrame) -> DataFrame:
    """Events per recording broker and kind (``prepare_events`` output: exact duplicates gone).

    Output: broker, kind, events (long), ordered by broker and kind.
    """
    return (
        events.groupBy("broker", "kind")
        .agg(F.count(F.lit(1)).alias("events"))
        .orderBy("broker", "kind")
        .select("broker", "kind", "events")
    )


def partition_states(events: DataFrame, as_of_ms: int) -> DataFrame:
    """One row per partition state at or before ``as_of_ms`` (module docstring: which row is kept).

    Input: ``prepare_events`` output. Output: ts_ms, broker, kind, topic, partition, leader,
    leader_epoch, zk_version, isr, previous_isr, replicas, min_insync_replicas, reason.
    """
    states = events.where(
        F.col("kind").isin(list(PARTITION_STATE_KINDS))
        & F.col("topic").isNotNull()
        & F.col("partition").isNotNull()
        & F.col("leader_epoch").isNotNull()
        & F.col("zk_version").isNotNull()
        & F.col("isr").isNotNull()
        & (F.col("ts_ms") <= F.lit(as_of_ms))
    )
    learned = (F.col("kind") == F.lit("state_learned")).cast("int")
    preference = Window.partitionBy(*_STATE_KEY).orderBy(
        learned, "ts_ms", "broker", "incarnation", "sequence"
    )
    everything = preference.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    ranked = (
        states.withColumn("rank", F.row_number().over(preference))
        .withColumn("any_replicas", F.first("replicas", ignorenulls=True).over(everything))
        .withColumn("any_min_isr", F.first("min_insync_replicas", ignorenulls=True).over(everything))
    )
    return ranked.where(F.col("rank") == 1).select(
        "ts_ms",
        "broker",
        "kind",
        "topic",
        "partition",
        "leader",
        "leader_epoch",
        "zk_version",
        "isr",
        "previous_isr",
        F.col("any_replicas").alias("replicas"),
        F.col("any_min_isr").alias("min_insync_replicas"),
        "reason",
    )


# --- intervals -------------------------------------------------------------------------------------


def isr_intervals(events: DataFrame, as_of_ms: int) -> DataFrame:
    """One row per partition state held over time (module docstring: intervals).

    Input: ``prepare_events`` output. Output (``INTERVAL_COLUMNS``): topic, partition, start_ms,
    end_ms, open, isr, leader, leader_epoch, zk_version, replicas, min_insync_replicas,
    under_replicated, under_min_isr, cause_kind, reason, removed, added, recorded_by; ordered by
    (topic, partition, start_ms, leader_epoch, zk_version).
    """
    states = partition_states(events, as_of_ms).withColumnRenamed("ts_ms", "start_ms")
    ordered = _partition_order()
    so_far = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    following = F.lead("start_ms").over(ordered)
    previous_isr = F.coalesce(F.lag("isr").over(ordered), F.col("previous_isr"))
    framed = (
        states.withColumn("next_start_ms", following)
        .withColumn("before", previous_isr)
        .withColumn("replicas", F.last("replicas", ignorenulls=True).over(so_far))
        .withColumn("min_insync_replicas", F.last("min_insync_replicas", ignorenulls=True).over(so_far))
    )
    isr, replicas, min_isr = F.col("isr"), F.col("replicas"), F.col("min_insync_replicas")
    end = F.coalesce(F.col("next_start_ms"), F.greatest(F.lit(as_of_ms).cast("long"), F.col("start_ms")))
    return framed.orderBy(*_PARTITION, "start_ms", "leader_epoch", "zk_version").select(
        "topic",
        "partition",
        F.col("start_ms").cast("long").alias("start_ms"),
        end.cast("long").alias("end_ms"),
        F.col("next_start_ms").isNull().alias("open"),
        "isr",
        "leader",
        "leader_epoch",
        "zk_version",
        "replicas",
        "min_insync_replicas",
        F.when(replicas.isNotNull(), F.size(isr) < F.size(replicas)).alias("under_replicated"),
        F.when(min_isr.isNotNull(), F.size(isr) < min_isr).alias("under_min_isr"),
        F.col("kind").alias("cause_kind"),
        "reason",
        F.array_sort(F.array_except("before", "isr")).alias("removed"),
        F.array_sort(F.array_except("isr", "before")).alias("added"),
        F.col("broker").alias("recorded_by"),
    )


def _size_change() -> Column:
    """ISR size after minus before (null when the previous ISR is unknown)."""
    return F.when(F.col("removed").isNotNull(), F.size("added") - F.size("removed"))


def interval_timeline(intervals: DataFrame) -> DataFrame:
    """The intervals as ``transforms.isr_timeline`` rows, so the gauges' flap rule applies as is.

    Output: topic, partition, ts_ms (the interval's start), broker (its leader), isr (size, double),
    previous_isr (the size before, double; null when unknown), change (shrink | expand | null).
    """
    size = F.size("isr").cast("double")
    before = size - _size_change().cast("double")
    change = F.when(F.col("isr_size") < F.col("size_before"), "shrink").when(
        F.col("isr_size") > F.col("size_before"), "expand"
    )
    return (
        intervals.withColumn("isr_size", size)
        .withColumn("size_before", before)
        .select(
            "topic",
            "partition",
            F.col("start_ms").alias("ts_ms"),
            F.col("leader").cast("string").alias("broker"),
            F.col("isr_size").alias("isr"),
            F.col("size_before").alias("previous_isr"),
            change.alias("change"),
        )
    )


def flap_cycles(intervals: DataFrame, flap_span_ms: int) -> DataFrame:
    """``transforms.flap_cycles`` over the intervals (the same columns as the gauge-based table)."""
    return transforms.flap_cycles(interval_timeline(intervals), flap_span_ms)


# --- totals ----------------------------------------------------------------------------------------


def _longest_under_replicated(intervals: DataFrame) -> DataFrame:
    """Per partition, the longest run of consecutive under-replicated intervals, in seconds."""
    ordered = _partition_order()
    under = F.coalesce(F.col("under_replicated"), F.lit(False))
    starts = F.when(under & ~F.coalesce(F.lag(under).over(ordered), F.lit(False)), 1).otherwise(0)
    numbered = intervals.withColumn("under", under).withColumn("starts", starts)
    runs = numbered.withColumn(
        "run", F.sum("starts").over(ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    )
    return (
        runs.where(F.col("under"))
        .groupBy(*_PARTITION, "run")
        .agg(F.sum(_duration_ms()).alias("run_ms"))
        .groupBy(*_PARTITION)
        .agg(_seconds(F.max("run_ms")).alias("longest_under_replicated_seconds"))
    )


def partition_isr_totals(intervals: DataFrame, flap_span_ms: int) -> DataFrame:
    """Per partition: observed and under-replicated time, shrinks, expands, elections, flap cycles.

    Input: ``isr_intervals`` output. Output: topic, partition, then ``PARTITION_TOTAL_COLUMNS``
    (observed_seconds, under_replicated_seconds, under_min_isr_seconds, shrinks, expands,
    elections, flap_cycles, longest_under_replicated_seconds: 0 when never under-replicated);
    ordered by topic and partition.
    """
    ordered = _partition_order()
    leader = F.col("leader")
    new_leader = (
        (F.col("leader_epoch") > F.lag("leader_epoch").over(ordered))
        & (leader >= 0)
        & ~leader.eqNullSafe(F.lag("leader").over(ordered))
    )
    elected = (F.col("cause_kind") == F.lit("leader_election")) | F.coalesce(new_leader, F.lit(False))
    duration = _duration_ms()
    per_partition = (
        intervals.withColumn("elected", elected)
        .groupBy(*_PARTITION)
        .agg(
            _seconds(F.sum(duration)).alias("observed_seconds"),
            _seconds(F.coalesce(F.sum(F.when(F.col("under_replicated"), duration)), F.lit(0))).alias(
                "under_replicated_seconds"
            ),
            _seconds(F.coalesce(F.sum(F.when(F.col("under_min_isr"), duration)), F.lit(0))).alias(
                "under_min_isr_seconds"
            ),
            F.count(F.when(_size_change() < 0, 1)).alias("shrinks"),
            F.count(F.when(_size_change() > 0, 1)).alias("expands"),
            F.count(F.when(F.col("elected"), 1)).alias("elections"),
        )
    )
    cycles = flap_cycles(intervals, flap_span_ms).groupBy(*_PARTITION).agg(F.count(F.lit(1)).alias("cycles"))
    longest = _longest_under_replicated(intervals)
    joined = per_partition.join(cycles, on=list(_PARTITION), how="left").join(
        longest, on=list(_PARTITION), how="left"
    )
    return joined.orderBy(*_PARTITION).select(
        "topic",
        "partition",
        "observed_seconds",
        "under_replicated_seconds",
        "under_min_isr_seconds",
        "shrinks",
        "expands",
        "elections",
        F.coalesce(F.col("cycles"), F.lit(0)).cast("long").alias("flap_cycles"),
        F.coalesce(F.col("longest_under_replicated_seconds"), F.lit(0.0)).alias(
            "longest_under_replicated_seconds"
        ),
    )


def topic_isr_totals(partition_totals: DataFrame) -> DataFrame:
    """Per topic: the partitions' totals summed (the longest under-replicated run is the maximum).

    Input: ``partition_isr_totals`` output. Output: topic, partitions, then
    ``PARTITION_TOTAL_COLUMNS``; ordered by topic.
    """
    sums = [column for column in PARTITION_TOTAL_COLUMNS if column != "longest_under_replicated_seconds"]
    return (
        partition_totals.groupBy("topic")
        .agg(
            F.count(F.lit(1)).alias("partitions"),
            *[F.sum(column).alias(column) for column in sums],
            F.max("longest_under_replicated_seconds").alias("longest_under_replicated_seconds"),
        )
        .orderBy("topic")
        .select("topic", "partitions", *PARTITION_TOTAL_COLUMNS)
    )


# --- incidents -------------------------------------------------------------------------------------


def incidents(intervals: DataFrame) -> DataFrame:
    """Stretches of time with at least one partition under-replicated (module docstring).

    Input: ``isr_intervals`` output. Output (``INCIDENT_COLUMNS``): incident (1..n by start),
    start_ms, end_ms, open, duration_seconds, partitions (``topic-partition``, sorted by topic and
    partition), partition_count, replicas_out (every broker removed from an ISR by a change inside
    it, sorted), reasons (of those changes, sorted), under_min_isr_seconds (partition-seconds).
    """
    under = intervals.where(F.col("under_replicated")).select(
        "topic", "partition", "start_ms", "end_ms", "open", "removed", "reason", "under_min_isr"
    )
    # One ordering over every under-replicated interval; the constant key says so explicitly.
    by_start = Window.partitionBy(F.lit(0)).orderBy("start_ms", "end_ms", "topic", "partition")
    reach = F.max("end_ms").over(by_start.rowsBetween(Window.unboundedPreceding, -1))
    begins = F.when(F.col("reach").isNull() | (F.col("start_ms") > F.col("reach")), 1).otherwise(0)
    numbered = (
        under.withColumn("reach", reach)
        .withColumn("begins", begins)
        .withColumn(
            "incident",
            F.sum("begins").over(by_start.rowsBetween(Window.unboundedPreceding, Window.currentRow)),
        )
    )
    partition_names = F.transform(
        F.array_sort(F.collect_set(F.struct("topic", "partition"))),
        lambda tp: F.concat_ws("-", tp["topic"], tp["partition"].cast("string")),
    )
    under_min = F.sum(F.when(F.col("under_min_isr"), _duration_ms()))
    grouped = numbered.groupBy("incident").agg(
        F.min("start_ms").alias("start_ms"),
        F.max("end_ms").alias("end_ms"),
        F.bool_or("open").alias("open"),
        partition_names.alias("partitions"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("removed")))).alias("replicas_out"),
        F.array_sort(F.collect_set("reason")).alias("reasons"),
        _seconds(F.coalesce(under_min, F.lit(0))).alias("under_min_isr_seconds"),
    )
    return grouped.orderBy("incident").select(
        F.col("incident").cast("int").alias("incident"),
        "start_ms",
        "end_ms",
        "open",
        _seconds(_duration_ms()).alias("duration_seconds"),
        "partitions",
        F.size("partitions").alias("partition_count"),
        "replicas_out",
        "reasons",
        "under_min_isr_seconds",
    )


# --- propagation -----------------------------------------------------------------------------------


def propagation_delays(events: DataFrame, as_of_ms: int) -> DataFrame:
    """Each leader's ISR change and the ISR change notification that carried it (module docstring).

    Input: ``prepare_events`` output. Output (``PROPAGATION_DELAY_COLUMNS``): broker, topic,
    partition, change_ms, change_kind, propagated_ms, delay_seconds, outcome (the propagation's
    reason: written | forced); ordered by change_ms, broker, topic, partition.
    """
    name = F.concat_ws("-", F.col("topic"), F.col("partition").cast("string"))
    changes = events.where(
        F.col("kind").isin(list(LEADER_CHANGE_KINDS))
        & F.col("topic").isNotNull()
        & F.col("partition").isNotNull()
        & (F.col("ts_ms") <= F.lit(as_of_ms))
    ).select(
        "broker",
        "incarnation",
        "sequence",
        "ts_ms",
        F.lit(False).alias("is_propagation"),
        name.alias("name"),
        "topic",
        "partition",
        "kind",
        F.lit(None).cast("string").alias("reason"),
    )
    notifications = events.where(
        (F.col("kind") == F.lit("propagation")) & (F.col("ts_ms") <= F.lit(as_of_ms))
    ).select(
        "broker",
        "incarnation",
        "sequence",
        "ts_ms",
        F.lit(True).alias("is_propagation"),
        F.explode("partitions").alias("name"),
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        "kind",
        "reason",
    )
    # A change and a notification at the same instant: the change first ("at or after").
    later = (
        Window.partitionBy("broker", "incarnation", "name")
        .orderBy("ts_ms", "is_propagation", "sequence")
        .rowsBetween(Window.currentRow, Window.unboundedFollowing)
    )
    carried = F.struct(F.col("ts_ms").alias("at"), F.col("reason").alias("outcome"))
    first_notification = F.first(F.when(F.col("is_propagation"), carried), ignorenulls=True).over(later)
    matched = (
        changes.unionByName(notifications)
        .withColumn("notification", first_notification)
        .where(~F.col("is_propagation"))
    )
    propagated = F.col("notification.at")
    return matched.orderBy("ts_ms", "broker", "topic", "partition").select(
        "broker",
        "topic",
        "partition",
        F.col("ts_ms").alias("change_ms"),
        F.col("kind").alias("change_kind"),
        propagated.alias("propagated_ms"),
        _seconds(propagated - F.col("ts_ms")).alias("delay_seconds"),
        F.col("notification.outcome").alias("outcome"),
    )
