"""The rollup's computation: pure ``DataFrame -> DataFrame`` functions, no I/O, no UDFs.

Vocabulary:

* A **series** is one metric on one broker with one label set (``broker``, ``metric``,
  ``label_key``; ``label_key`` is the label map as canonical JSON, because Spark cannot group or
  join on a map column).
* A **window** is a tumbling interval ``[window_start, window_start + window)`` aligned to the Unix
  epoch (Cruise Control's ``timeMs / windowMs``). A sample exactly on a boundary belongs to the
  window it starts. Windows that end after ``as_of_ms`` (the still-open window) are dropped.
* **n_samples** is the number of samples whose timestamp lies in the window. Each (entity, window)
  gets Cruise Control's ``extrapolation`` and ``validity``: ``none``/valid with at least
  ``min_samples``; ``avg_available`` with at least half of them; ``avg_adjacent`` when both
  neighbouring windows are valid; ``forced_insufficient`` with at least one sample (all three
  "extrapolated"); ``no_valid_extrapolation``/invalid otherwise. Windows with no sample between a
  series' first and last window are kept (as rows with ``n_samples = 0``) so gaps are visible. The
  flag names the rule that would apply: no value is ever invented for a window.

Counters (and histogram ``_bucket``/``_sum``/``_count`` series) use the reset-aware delta between
consecutive samples: ``cur - prev`` if ``cur >= prev``, else ``cur`` (the counter restarted from 0).
The exact **increase** of a window is the sum of the deltas whose *later* sample lies in it (so a
delta spanning a gap lands in the window that ends the gap), and **rate** = increase / window
seconds. **extrapolated_increase** is PromQL's ``increase()`` over the window's own samples
(prometheus ``promql/functions.go`` ``extrapolatedRate``): the in-window increase extrapolated to
the window's edges when the first/last sample is within 1.1 average intervals of them (else by half
an interval), never back past the counter's zero point; null with fewer than two samples.

Gauges are time-weighted: a value holds from its scrape until the broker's next scrape, at most
``max_hold_ms`` (so a missed scrape is not counted as hours); a broker's last scrape holds for
``last_hold_ms``. Holding until the *broker's* next scrape (rather than the series' next sample)
means a series that disappears stops counting at the next scrape that lacked it.

Histogram quantiles follow PromQL's ``histogram_quantile``: per window, bucket increases per ``le``
(made monotonic), the rank ``q x total``, linear interpolation inside the bucket that reaches it,
the largest finite bound when the rank falls in the ``+Inf`` bucket, null when nothing was observed.

Flapping: a partition's ISR size comes from ``insyncreplicascount`` on its leader (followers report
0). A **cycle** is a shrink (the ISR size drops) that is undone (the size is back at or above the
pre-shrink size) within ``flap_span_ms``; every shrink counts once, so 3 -> 2 -> 1 -> 3 is two
cycles.

Snapshots without the ``partition`` label (brokers at ``metrics.partition.level=topic``, which fold
a topic's partitions into one series per broker: counts of partitions in a state, ISR sizes summed)
give rows with ``partition = TOPIC_PARTITION`` (-1), "the topic as a whole". Seconds under-replicated
/ under min ISR stay exact (partition-seconds, summed over the brokers). A topic's ISR timeline is
then one per reporting broker (the ISR summed over the partitions it leads: different brokers'
sums are not comparable), so flap cycles are a broker's own drops and recoveries (a leadership
moving away and back makes one too), and ``partition_windows`` leaves their ISR range null.
Brokers at ``none`` export no such series: the per-partition tables get no rows from them, and the
state-change events (``isr_history``) are exact at every level.

Every public function ends in a ``select`` of its output columns: that is the schema contract.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ops.rollup import metrics as M
from ops.rollup.schema import SNAPSHOT_COLUMNS

__all__ = [
    "QUANTILES",
    "TOPIC_PARTITION",
    "RollupParameters",
    "TumblingWindow",
    "broker_scrapes",
    "broker_windows",
    "cluster_windows",
    "counter_deltas",
    "counter_windows",
    "dedupe_samples",
    "flap_cycles",
    "flapping_partitions",
    "gauge_windows",
    "histogram_quantiles",
    "histogram_windows",
    "isr_timeline",
    "partition_gauge_seconds",
    "partition_samples",
    "partition_windows",
    "prepare_samples",
    "select_snapshot",
    "union_all",
]

SERIES = ("broker", "metric", "label_key")
# The ``partition`` of rows from samples without the label (metrics.partition.level=topic).
TOPIC_PARTITION = -1
QUANTILES: tuple[float, ...] = (0.5, 0.99)
_SECOND_MS = 1000


@dataclass(frozen=True, slots=True)
class TumblingWindow:
    """An epoch-aligned window size and its label (the label becomes the ``window`` column)."""

    label: str
    ms: int

    def __post_init__(self) -> None:
        if self.ms <= 0:
            raise ValueError(f"window {self.label!r} must be positive")


@dataclass(frozen=True, slots=True)
class RollupParameters:
    """Everything the windowed transforms need besides their input frames."""

    window: TumblingWindow
    as_of_ms: int
    min_samples: int = 3

    def __post_init__(self) -> None:
        if self.min_samples < 1:
            raise ValueError("min_samples must be at least 1")


# --- small named expressions ---------------------------------------------------------------------


def _window_start(ts_ms: Column, window_ms: int) -> Column:
    # pmod, not floor division: exact integer arithmetic, and correct for instants before 1970.
    return ts_ms - F.pmod(ts_ms, F.lit(window_ms).cast("long"))


def _complete(window_start_ms: Column, parameters: RollupParameters) -> Column:
    """The window has ended by ``as_of``: the still-open window is excluded (Cruise Control)."""
    return window_start_ms + F.lit(parameters.window.ms) <= F.lit(parameters.as_of_ms)


def _window_columns(parameters: RollupParameters) -> list[Column]:
    """The ``window``, ``window_start`` and ``window_end`` output columns."""
    start = F.col("window_start_ms")
    return [
        F.lit(parameters.window.label).alias("window"),
        F.timestamp_millis(start).alias("window_start"),
        F.timestamp_millis(start + F.lit(parameters.window.ms)).alias("window_end"),
    ]


def _label(name: str) -> Column:
    """A label's value, or null when the sample has no such label."""
    return F.col("labels").getItem(name)


def _seconds(milliseconds: Column) -> Column:
    return milliseconds / F.lit(float(_SECOND_MS))


def _dense_windows(
    aggregated: DataFrame, keys: Sequence[str], window_ms: int, carried: Sequence[str] = ()
) -> DataFrame:
    """Add the windows without samples between each key's first and last window.

    ``carried`` columns describe the key, not the window (a series' label map): they are taken from
    any of the key's rows, so the gap rows have them too.
    """
    spans = aggregated.groupBy(*keys).agg(
        F.min("window_start_ms").alias("first_window_ms"),
        F.max("window_start_ms").alias("last_window_ms"),
        *[F.any_value(column).alias(column) for column in carried],
    )
    step = F.lit(window_ms).cast("long")
    grid = spans.select(
        *keys,
        *carried,
        F.explode(F.sequence("first_window_ms", "last_window_ms", step)).alias("window_start_ms"),
    )
    per_window = aggregated.drop(*carried)
    return grid.join(per_window, on=[*keys, "window_start_ms"], how="left").withColumn(
        "n_samples", F.coalesce(F.col("n_samples"), F.lit(0))
    )


def _with_validity(frame: DataFrame, keys: Sequence[str], min_samples: int) -> DataFrame:
    """Cruise Control's extrapolation and validity per (key, window), from ``n_samples``."""
    ordered = Window.partitionBy(*keys).orderBy("window_start_ms")
    samples = F.col("n_samples")
    half = max(1, min_samples // 2)
    neighbours_valid = (F.lag(samples).over(ordered) >= min_samples) & (
        F.lead(samples).over(ordered) >= min_samples
    )
    extrapolation = (
        F.when(samples >= min_samples, "none")
        .when(samples >= half, "avg_available")
        .when(neighbours_valid, "avg_adjacent")
        .when(samples > 0, "forced_insufficient")
        .otherwise("no_valid_extrapolation")
    )
    validity = (
        F.when(F.col("extrapolation") == "none", "valid")
        .when(F.col("extrapolation") == "no_valid_extrapolation", "invalid")
        .otherwise("extrapolated")
    )
    return frame.withColumn("extrapolation", extrapolation).withColumn("validity", validity)


# --- input -------------------------------------------------------------------------------------


def select_snapshot(raw: DataFrame, metric_names: Collection[str]) -> DataFrame:
    """The snapshot columns (partition columns dropped), only for the given sample names."""
    return raw.select(*SNAPSHOT_COLUMNS).where(F.col("metric").isin(sorted(metric_names)))


def prepare_samples(snapshot: DataFrame) -> DataFrame:
    """Snapshot rows with epoch-ms time, canonical label keys and the parsed ``le`` bound.

    Output: ts_ms, broker, metric, labels, label_key, base_label_key (labels without ``le``, which
    groups a histogram's buckets with its _sum and _count), le (double, null if absent), value, type.
    """
    entries = F.array_sort(F.map_entries("labels"))
    without_le = F.filter(entries, lambda entry: entry["key"] != F.lit("le"))
    return snapshot.select(
        F.unix_millis("ts").alias("ts_ms"),
        "broker",
        "metric",
        "labels",
        F.to_json(entries).alias("label_key"),
        F.to_json(without_le).alias("base_label_key"),
        # "+Inf" casts to Infinity; try_cast keeps a malformed bound from failing the job (ANSI).
        _label("le").try_cast("double").alias("le"),
        "value",
        "type",
    )


def dedupe_samples(samples: DataFrame) -> DataFrame:
    """One sample per series and timestamp (the same scrape read twice, or a repeated sample).

    The largest value wins, so the choice does not depend on file order.
    """
    return (
        samples.groupBy(*SERIES, "ts_ms")
        .agg(
            F.any_value("labels").alias("labels"),
            F.any_value("base_label_key").alias("base_label_key"),
            F.any_value("le").alias("le"),
            F.max("value").alias("value"),
            F.max("type").alias("type"),
        )
        .select("ts_ms", "broker", "metric", "labels", "label_key", "base_label_key", "le", "value", "type")
    )


# --- counters ----------------------------------------------------------------------------------


def counter_deltas(samples: DataFrame) -> DataFrame:
    """Each counter sample with its predecessor and the reset-aware delta, duplicates removed.

    Input: prepared samples of counters (or histogram series). A series sampled twice at one
    instant keeps its largest value, as ``dedupe_samples`` would; doing it here, in the same
    partitioning and sort as the deltas, costs no extra shuffle over the biggest counter input.
    Adds prev_ts_ms, delta (null for a series' first sample) and is_reset.
    """
    by_instant = Window.partitionBy(*SERIES).orderBy("ts_ms", "value")
    following = F.lead("ts_ms").over(by_instant)
    unique = (
        samples.withColumn("last_at_instant", following.isNull() | (following != F.col("ts_ms")))
        .where(F.col("last_at_instant"))
        .drop("last_at_instant")
    )
    ordered = Window.partitionBy(*SERIES).orderBy("ts_ms")
    with_previous = unique.withColumn("prev_value", F.lag("value").over(ordered)).withColumn(
        "prev_ts_ms", F.lag("ts_ms").over(ordered)
    )
    value, prev_value = F.col("value"), F.col("prev_value")
    is_reset = value < prev_value
    # After a reset the counter restarted from zero, so everything it now shows is new.
    delta = F.when(prev_value.isNull(), F.lit(None)).when(is_reset, value).otherwise(value - prev_value)
    return with_previous.select(
        "ts_ms",
        "broker",
        "metric",
        "labels",
        "label_key",
        "base_label_key",
        "le",
        "value",
        "type",
        "prev_ts_ms",
        delta.cast("double").alias("delta"),
        F.coalesce(is_reset, F.lit(False)).alias("is_reset"),
    )


def _promql_extrapolated_increase(window_ms: int) -> Column:
    """PromQL ``increase()`` over the window's own samples (see the module docstring).

    Reads n_samples, first_ts_ms, last_ts_ms, first_value, increase_within and window_start_ms.
    Divisions use try_divide: a zero divisor yields null instead of an ANSI error.
    """
    n = F.col("n_samples")
    raw = F.col("increase_within")
    first_value = F.col("first_value")
    sampled = _seconds(F.col("last_ts_ms") - F.col("first_ts_ms"))
    average = F.try_divide(sampled, (n - 1).cast("double"))
    threshold = average * 1.1
    to_start = _seconds(F.col("first_ts_ms") - F.col("window_start_ms"))
    to_end = _seconds(F.col("window_start_ms") + F.lit(window_ms) - F.col("last_ts_ms"))
    to_start = F.when(to_start >= threshold, average / 2).otherwise(to_start)
    # A counter cannot be negative: do not extrapolate back past the moment it would have been 0.
    to_zero = sampled * F.try_divide(first_value, raw)
    can_hit_zero = (raw > 0) & (first_value >= 0)
    to_start = F.when(can_hit_zero & (to_zero < to_start), to_zero).otherwise(to_start)
    to_end = F.when(to_end >= threshold, average / 2).otherwise(to_end)
    factor = F.try_divide(sampled + to_start + to_end, sampled)
    return F.when((n >= 2) & (sampled > 0), raw * factor)


def counter_windows(deltas: DataFrame, parameters: RollupParameters) -> DataFrame:
    """Per series and complete window: increase, rate, PromQL-style increase, resets, validity.

    Input: ``counter_deltas`` output. Output: window, window_start, window_end, window_start_ms,
    metric, broker, label_key, base_label_key, le, labels, n_samples, increase, rate,
    extrapolated_increase, resets, extrapolation, validity.
    """
    window_ms = parameters.window.ms
    start = _window_start(F.col("ts_ms"), window_ms)
    placed = deltas.withColumn("window_start_ms", start).where(
        _complete(F.col("window_start_ms"), parameters)
    )
    # The delta from a sample in the previous window belongs to the exact increase of this window but
    # not to PromQL's, which only sees the samples inside its range.
    previous_inside = F.col("prev_ts_ms") >= F.col("window_start_ms")
    aggregated = placed.groupBy(*SERIES, "window_start_ms").agg(
        F.any_value("labels").alias("labels"),
        F.any_value("base_label_key").alias("base_label_key"),
        F.any_value("le").alias("le"),
        F.count(F.lit(1)).alias("n_samples"),
        F.sum("delta").alias("increase"),
        F.sum(F.when(previous_inside, F.col("delta"))).alias("increase_within"),
        F.min("ts_ms").alias("first_ts_ms"),
        F.max("ts_ms").alias("last_ts_ms"),
        F.min_by("value", "ts_ms").alias("first_value"),
        F.count(F.when(F.col("is_reset"), 1)).alias("resets"),
    )
    dense = _dense_windows(aggregated, SERIES, window_ms, carried=("labels", "base_label_key", "le"))
    rated = dense.withColumn("extrapolated_increase", _promql_extrapolated_increase(window_ms)).withColumn(
        "rate", F.col("increase") / F.lit(window_ms / _SECOND_MS)
    )
    return _with_validity(rated, SERIES, parameters.min_samples).select(
        *_window_columns(parameters),
        "window_start_ms",
        "metric",
        "broker",
        "label_key",
        "base_label_key",
        "le",
        "labels",
        "n_samples",
        "increase",
        "rate",
        "extrapolated_increase",
        F.coalesce(F.col("resets"), F.lit(0)).alias("resets"),
        "extrapolation",
        "validity",
    )


# --- histograms --------------------------------------------------------------------------------


def _quantile_column(quantile: float) -> str:
    return "p" + f"{quantile * 100:g}".replace(".", "")


def histogram_quantiles(
    buckets: DataFrame, keys: Sequence[str], quantiles: Sequence[float] = QUANTILES
) -> DataFrame:
    """PromQL ``histogram_quantile`` per group: keys + ``observations`` + one column per quantile.

    Input: keys + ``le`` (double, +Inf included) + ``increase`` (observations at or below ``le`` in
    the window). A group without a +Inf bucket or without observations gets null quantiles.
    """
    by_bound = Window.partitionBy(*keys).orderBy("le")
    running = by_bound.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    whole = Window.partitionBy(*keys).rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    infinite = F.col("le") == F.lit(float("inf"))
    # Buckets are cumulative; a running max repairs the non-monotonic counts that resets or
    # scrapes racing with observations can produce (PromQL does the same).
    cumulative = buckets.withColumn(
        "cumulative", F.max(F.coalesce(F.col("increase"), F.lit(0.0))).over(running)
    )
    framed = (
        cumulative.withColumn("previous_le", F.lag("le").over(by_bound))
        .withColumn("previous_cumulative", F.lag("cumulative").over(by_bound))
        .withColumn("observations", F.max(F.when(infinite, F.col("cumulative"))).over(whole))
    )
    aggregates = [F.max("observations").alias("observations")]
    largest_finite = F.max(F.when(~infinite, F.col("le")))
    for quantile in quantiles:
        rank = F.lit(quantile) * F.col("observations")
        first_bucket = F.when(F.col("le") <= 0, F.col("le")).otherwise(
            F.col("le") * F.try_divide(rank, F.col("cumulative"))
        )
        inside = F.col("previous_le") + (F.col("le") - F.col("previous_le")) * F.try_divide(
            rank - F.col("previous_cumulative"), F.col("cumulative") - F.col("previous_cumulative")
        )
        estimate = F.when(F.col("previous_le").isNull(), first_bucket).otherwise(inside)
        # The bucket that reaches the rank is the one with the smallest bound among those that do.
        reaches = ~infinite & (F.col("cumulative") >= rank)
        in_bucket = F.min_by(estimate, F.when(reaches, F.col("le")))
        nothing_observed = F.max("observations").isNull() | (F.max("observations") <= 0)
        value = F.when(nothing_observed, F.lit(None)).otherwise(F.coalesce(in_bucket, largest_finite))
        aggregates.append(value.cast("double").alias(_quantile_column(quantile)))
    return (
        framed.groupBy(*keys)
        .agg(*aggregates)
        .select(*keys, "observations", *[_quantile_column(q) for q in quantiles])
    )


def _histogram_family(metric: Column, suffix: str) -> Column:
    return F.regexp_replace(metric, suffix + "$", "")


def histogram_windows(series_windows: DataFrame, parameters: RollupParameters) -> DataFrame:
    """Per histogram family, broker, label set (without ``le``) and window: count, sum, mean, p50, p99.

    Input: ``counter_windows`` over histogram samples. Validity is the ``_count`` series'.
    """
    keys = ["metric", "broker", "base_label_key", "window_start_ms"]
    counts = series_windows.where(F.col("metric").endswith("_count")).select(
        *_window_columns(parameters),
        _histogram_family(F.col("metric"), "_count").alias("metric"),
        "broker",
        "base_label_key",
        "window_start_ms",
        "labels",
        F.col("increase").alias("count"),
        "n_samples",
        "extrapolation",
        "validity",
    )
    sums = series_windows.where(F.col("metric").endswith("_sum")).select(
        _histogram_family(F.col("metric"), "_sum").alias("metric"),
        "broker",
        "base_label_key",
        "window_start_ms",
        F.col("increase").alias("sum"),
    )
    buckets = series_windows.where(F.col("metric").endswith("_bucket")).select(
        _histogram_family(F.col("metric"), "_bucket").alias("metric"),
        "broker",
        "base_label_key",
        "window_start_ms",
        "le",
        "increase",
    )
    quantiles = histogram_quantiles(buckets, keys)
    joined = counts.join(sums, on=keys, how="left").join(quantiles, on=keys, how="left")
    return joined.select(
        "window",
        "window_start",
        "window_end",
        "window_start_ms",
        "metric",
        "broker",
        "base_label_key",
        "labels",
        "n_samples",
        "count",
        "sum",
        F.try_divide(F.col("sum"), F.col("count")).alias("mean"),
        *[_quantile_column(q) for q in QUANTILES],
        "extrapolation",
        "validity",
    )


def _cluster_histogram_quantiles(series_windows: DataFrame, family: str) -> DataFrame:
    """Quantiles of one label-less histogram with every broker's observations pooled per window."""
    pooled = (
        series_windows.where(F.col("metric") == F.lit(family + "_bucket"))
        .groupBy("window_start_ms", "le")
        .agg(F.sum("increase").alias("increase"))
    )
    return histogram_quantiles(pooled, ["window_start_ms"])


# --- gauges --------------------------------------------------------------------------------------


def broker_scrapes(samples: DataFrame, as_of_ms: int, max_hold_ms: int, last_hold_ms: int) -> DataFrame:
    """Each broker's scrape instants and how long each scrape's values hold.

    Output: broker, ts_ms, hold_ms = time to the broker's next scrape, capped at ``max_hold_ms``
    (a missed scrape must not stretch a value over hours); the last scrape holds ``last_hold_ms``,
    but never past ``as_of_ms``.
    """
    by_broker = Window.partitionBy("broker").orderBy("ts_ms")
    scrapes = samples.select("broker", "ts_ms").distinct()
    following = F.lead("ts_ms").over(by_broker)
    hold = F.when(
        following.isNull(), F.least(F.lit(last_hold_ms), F.lit(as_of_ms) - F.col("ts_ms"))
    ).otherwise(F.least(following - F.col("ts_ms"), F.lit(max_hold_ms)))
    return scrapes.select("broker", "ts_ms", F.greatest(hold, F.lit(0)).cast("long").alias("hold_ms"))


def _held_in_windows(samples: DataFrame, scrapes: DataFrame, window_ms: int) -> DataFrame:
    """Each sample's holding interval split over the windows it overlaps.

    Adds window_start_ms and overlap_ms (how long the value held inside that window).
    """
    # The scrape list is tiny (brokers x scrapes): broadcasting it keeps the big side unshuffled.
    held = samples.join(F.broadcast(scrapes), on=["broker", "ts_ms"], how="inner")
    start, end = F.col("ts_ms"), F.col("ts_ms") + F.col("hold_ms")
    last_instant = F.greatest(end - 1, start)
    windows = F.sequence(
        _window_start(start, window_ms), _window_start(last_instant, window_ms), F.lit(window_ms).cast("long")
    )
    split = held.withColumn("window_start_ms", F.explode(windows))
    window_end = F.col("window_start_ms") + F.lit(window_ms)
    overlap = F.least(end, window_end) - F.greatest(start, F.col("window_start_ms"))
    return split.withColumn("overlap_ms", F.greatest(overlap, F.lit(0)))


def gauge_windows(gauges: DataFrame, scrapes: DataFrame, parameters: RollupParameters) -> DataFrame:
    """Per gauge series and complete window: time-weighted mean, min, max, last value, coverage.

    Input: de-duplicated samples of gauges, and ``broker_scrapes``. ``min``/``max`` are over the
    values in force during the window (including one carried in from the previous window);
    ``covered_seconds`` is how much of the window a value was known for; ``value_seconds`` the
    integral (e.g. partition-seconds for a count of partitions).
    """
    window_ms = parameters.window.ms
    split = _held_in_windows(gauges, scrapes, window_ms).where(
        _complete(F.col("window_start_ms"), parameters)
    )
    sampled_here = F.col("ts_ms") >= F.col("window_start_ms")
    aggregated = split.groupBy(*SERIES, "window_start_ms").agg(
        F.any_value("labels").alias("labels"),
        F.count(F.when(sampled_here, 1)).alias("n_samples"),
        _seconds(F.sum(F.col("value") * F.col("overlap_ms"))).alias("value_seconds"),
        _seconds(F.sum("overlap_ms")).alias("covered_seconds"),
        F.min("value").alias("min"),
        F.max("value").alias("max"),
        F.max_by("value", "ts_ms").alias("last"),
    )
    dense = _dense_windows(aggregated, SERIES, window_ms, carried=("labels",))
    return _with_validity(dense, SERIES, parameters.min_samples).select(
        *_window_columns(parameters),
        "window_start_ms",
        "metric",
        "broker",
        "label_key",
        "labels",
        "n_samples",
        F.try_divide(F.col("value_seconds"), F.col("covered_seconds")).alias("mean"),
        "min",
        "max",
        "last",
        "value_seconds",
        "covered_seconds",
        "extrapolation",
        "validity",
    )


def partition_samples(samples: DataFrame) -> DataFrame:
    """The non-zero samples of per-partition gauges, slimmed to what the partition transforms read.

    Input: prepared samples of per-partition gauges. Zeros carry no information here: a 0/1 gauge
    integrates to nothing while 0, and ``insyncreplicascount`` is 0 on followers. Dropping them
    first shrinks the biggest part of a snapshot (a few series per partition per broker) to the
    few rows that matter. Output: ts_ms, broker, metric, topic, partition (``TOPIC_PARTITION`` for
    a sample without the label), value.
    """
    return samples.where(F.col("value") != 0).select(
        "ts_ms",
        "broker",
        "metric",
        _label("topic").alias("topic"),
        F.coalesce(_label("partition").try_cast("int"), F.lit(TOPIC_PARTITION)).alias("partition"),
        "value",
    )


def partition_gauge_seconds(
    partition_rows: DataFrame, scrapes: DataFrame, parameters: RollupParameters
) -> DataFrame:
    """Per-partition 0/1 gauges integrated per reporting broker and complete window.

    Input: ``partition_samples`` (any metrics; only ``underreplicated`` and ``underminisr`` are
    used) and ``broker_scrapes``. Duplicates of a series at one instant are removed first. Output:
    metric, broker, topic, partition, window_start_ms, value_seconds (partition-seconds).
    """
    names = [spec.name for spec in M.PARTITION_GAUGES]
    unique = (
        partition_rows.where(F.col("metric").isin(names))
        .groupBy("ts_ms", "broker", "metric", "topic", "partition")
        .agg(F.max("value").alias("value"))
    )
    split = _held_in_windows(unique, scrapes, parameters.window.ms).where(
        _complete(F.col("window_start_ms"), parameters)
    )
    return (
        split.groupBy("metric", "broker", "topic", "partition", "window_start_ms")
        .agg(_seconds(F.sum(F.col("value") * F.col("overlap_ms"))).alias("value_seconds"))
        .select("metric", "broker", "topic", "partition", "window_start_ms", "value_seconds")
    )


# --- partitions: ISR timeline, flapping ------------------------------------------------------------


def isr_timeline(partition_rows: DataFrame) -> DataFrame:
    """Each partition's ISR size over time, as reported by its leader, with the change it shows.

    Input: ``partition_samples`` (only ``insyncreplicascount`` is used; followers report 0, which
    ``partition_samples`` already dropped, so what remains is the leader's view). If two brokers
    report at the same instant (a leader change racing a scrape) the larger size wins, so a stale
    view cannot invent a shrink. A whole topic's rows (``TOPIC_PARTITION``) form one timeline per
    reporting broker (module docstring). Output: topic, partition, ts_ms, broker, isr,
    previous_isr, change (shrink | expand | null).
    """
    leaders = partition_rows.where(
        (F.col("metric") == F.lit(M.PARTITION_ISR_COUNT.name)) & (F.col("value") > 0)
    ).select("topic", "partition", "ts_ms", "broker", "value", _reporter().alias("reporter"))
    # Clustering by partition once serves both the de-duplication and the ordered window below.
    clustered = leaders.repartition("topic", "partition")
    unique = clustered.groupBy("topic", "partition", "reporter", "ts_ms").agg(
        F.max("value").alias("isr"), F.max_by("broker", "value").alias("broker")
    )
    ordered = Window.partitionBy("topic", "partition", "reporter").orderBy("ts_ms")
    previous = F.lag("isr").over(ordered)
    change = F.when(F.col("isr") < F.col("previous_isr"), "shrink").when(
        F.col("isr") > F.col("previous_isr"), "expand"
    )
    return (
        unique.withColumn("previous_isr", previous)
        .withColumn("change", change)
        .select("topic", "partition", "ts_ms", "broker", "isr", "previous_isr", "change")
    )


def _reporter() -> Column:
    """Which broker's series a row belongs to where that matters: a whole topic's rows are one
    series per broker; a partition's are one series whoever leads it (null)."""
    return F.when(F.col("partition") == F.lit(TOPIC_PARTITION), F.col("broker"))


def flap_cycles(timeline: DataFrame, flap_span_ms: int) -> DataFrame:
    """Shrinks undone within ``flap_span_ms``: one row per cycle.

    Output: topic, partition, broker (the leader that reported the shrink), shrink_at, recovered_at,
    isr_before, isr_after (the size the shrink left), recovery_seconds.
    """
    shrinks = timeline.where(F.col("change") == "shrink").select(
        "topic",
        "partition",
        "broker",
        F.col("ts_ms").alias("shrink_ms"),
        F.col("previous_isr").alias("isr_before"),
        F.col("isr").alias("isr_after"),
    )
    expands = timeline.where(F.col("change") == "expand").select(
        "topic",
        "partition",
        F.col("ts_ms").alias("expand_ms"),
        F.col("isr").alias("expanded_to"),
        _reporter().alias("expand_reporter"),
    )
    after_shrink = F.col("expand_ms") > F.col("shrink_ms")
    within_span = F.col("expand_ms") <= F.col("shrink_ms") + F.lit(flap_span_ms)
    restores = F.col("expanded_to") >= F.col("isr_before")
    # A whole topic's shrink is undone only by the same broker's series (null-safe: partitions).
    same_series = F.col("shrink_reporter").eqNullSafe(F.col("expand_reporter"))
    recoveries = (
        shrinks.withColumn("shrink_reporter", _reporter())
        .join(expands, on=["topic", "partition"], how="inner")
        .where(after_shrink & within_span & restores & same_series)
    )
    # The first expansion that restores the pre-shrink size is the recovery.
    cycles = recoveries.groupBy("topic", "partition", "broker", "shrink_ms", "isr_before", "isr_after").agg(
        F.min("expand_ms").alias("recovered_ms")
    )
    return cycles.select(
        "topic",
        "partition",
        "broker",
        F.timestamp_millis("shrink_ms").alias("shrink_at"),
        F.timestamp_millis("recovered_ms").alias("recovered_at"),
        "isr_before",
        "isr_after",
        _seconds(F.col("recovered_ms") - F.col("shrink_ms")).alias("recovery_seconds"),
    )


def flapping_partitions(cycles: DataFrame) -> DataFrame:
    """Partitions ranked by flap cycles (most first; ties: the most recent last cycle first).

    Output: rank, topic, partition, cycles, first_cycle_at, last_cycle_at, min_isr,
    mean_recovery_seconds, max_recovery_seconds.
    """
    per_partition = cycles.groupBy("topic", "partition").agg(
        F.count(F.lit(1)).alias("cycles"),
        F.min("shrink_at").alias("first_cycle_at"),
        F.max("shrink_at").alias("last_cycle_at"),
        F.min("isr_after").alias("min_isr"),
        F.avg("recovery_seconds").alias("mean_recovery_seconds"),
        F.max("recovery_seconds").alias("max_recovery_seconds"),
    )
    # One row per flapping partition: ranking them all in one Spark partition is cheap. The
    # constant key says so explicitly (and keeps Spark from warning about a missing partitioning).
    ranking = Window.partitionBy(F.lit(0)).orderBy(
        F.col("cycles").desc(), F.col("last_cycle_at").desc(), F.col("topic"), F.col("partition")
    )
    return per_partition.withColumn("rank", F.row_number().over(ranking)).select(
        "rank",
        "topic",
        "partition",
        "cycles",
        "first_cycle_at",
        "last_cycle_at",
        "min_isr",
        "mean_recovery_seconds",
        "max_recovery_seconds",
    )


_PARTITION_SECONDS = (
    ("seconds_under_replicated", M.PARTITION_UNDER_REPLICATED),
    ("seconds_under_min_isr", M.PARTITION_UNDER_MIN_ISR),
)


_PARTITION_SECONDS_COLUMNS = frozenset(column for column, _ in _PARTITION_SECONDS)
_PARTITION_SECONDS_SPECS = dict(_PARTITION_SECONDS)


def _zero_if_present(column: str, metric: str, present: Collection[str]) -> Column:
    fallback = F.lit(0.0) if metric in present else F.lit(None).cast("double")
    return F.coalesce(F.col(column), fallback).alias(column)


def partition_windows(
    timeline: DataFrame, gauge_seconds: DataFrame, parameters: RollupParameters, present: Collection[str]
) -> DataFrame:
    """Per partition and complete window: ISR range and changes, seconds under-replicated / min ISR.

    ``present`` names the sample names the snapshots contain: seconds for a metric that was
    scraped but never non-zero are 0, for a metric never scraped they are null (unknown).
    Output: window, window_start, window_end, window_start_ms, topic, partition, n_samples,
    isr_min, isr_max, isr_shrinks_observed, isr_expands_observed, seconds_under_replicated,
    seconds_under_min_isr, extrapolation, validity. "Observed" changes are those visible between
    scrapes; changes undone between two scrapes are only in the brokers' counters.
    """
    keys = ["topic", "partition"]
    window_ms = parameters.window.ms
    placed = timeline.withColumn("window_start_ms", _window_start(F.col("ts_ms"), window_ms)).where(
        _complete(F.col("window_start_ms"), parameters)
    )
    # A whole topic's ISR sums from different brokers are not one range (module docstring).
    partition_isr = F.when(F.col("partition") != F.lit(TOPIC_PARTITION), F.col("isr"))
    isr = placed.groupBy(*keys, "window_start_ms").agg(
        F.count(F.lit(1)).alias("n_samples"),
        F.min(partition_isr).alias("isr_min"),
        F.max(partition_isr).alias("isr_max"),
        F.count(F.when(F.col("change") == "shrink", 1)).alias("isr_shrinks_observed"),
        F.count(F.when(F.col("change") == "expand", 1)).alias("isr_expands_observed"),
    )
    seconds = gauge_seconds.groupBy(*keys, "window_start_ms").agg(
        *[
            F.sum(F.when(F.col("metric") == F.lit(spec.name), F.col("value_seconds"))).alias(column)
            for column, spec in _PARTITION_SECONDS
        ]
    )
    joined = _dense_windows(isr.join(seconds, on=[*keys, "window_start_ms"], how="full"), keys, window_ms)
    return _with_validity(joined, keys, parameters.min_samples).select(
        *_window_columns(parameters),
        "window_start_ms",
        "topic",
        "partition",
        "n_samples",
        "isr_min",
        "isr_max",
        F.coalesce(F.col("isr_shrinks_observed"), F.lit(0)).alias("isr_shrinks_observed"),
        F.coalesce(F.col("isr_expands_observed"), F.lit(0)).alias("isr_expands_observed"),
        *[_zero_if_present(column, spec.name, present) for column, spec in _PARTITION_SECONDS],
        "extrapolation",
        "validity",
    )


# --- brokers and the cluster --------------------------------------------------------------------


def _counter_sum(metric: str, label: tuple[str, str] | None = None) -> Column:
    """Sum of a counter's window increases over its label sets (optionally one label value)."""
    selected = F.col("metric") == F.lit(metric)
    if label is not None:
        selected = selected & (_label(label[0]) == F.lit(label[1]))
    return F.sum(F.when(selected, F.col("increase")))


_BROKER_COUNTERS: tuple[tuple[str, str, tuple[str, str] | None], ...] = (
    ("isr_shrinks", M.ISR_SHRINKS.name, None),
    ("isr_expands", M.ISR_EXPANDS.name, None),
    ("failed_isr_updates", M.FAILED_ISR_UPDATES.name, None),
    *[(f"propagations_{o}", M.PROPAGATION_CHECKS.name, ("outcome", o)) for o in M.PROPAGATION_OUTCOMES],
    ("leader_elections", M.LEADER_ELECTION.name + "_count", None),
    ("bytes_in", M.BYTES_IN.name, None),
    ("bytes_out", M.BYTES_OUT.name, None),
    ("replication_bytes_in", M.REPLICATION_BYTES_IN.name, None),
    ("replication_bytes_out", M.REPLICATION_BYTES_OUT.name, None),
)
# (output column, gauge, statistic of gauge_windows)
_BROKER_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("pending_isr_changes_max", M.PENDING_ISR_CHANGES.name, "max"),
    ("pending_isr_changes_mean", M.PENDING_ISR_CHANGES.name, "mean"),
    ("under_replicated_partitions_max", M.UNDER_REPLICATED_PARTITIONS.name, "max"),
    ("under_replicated_partitions_mean", M.UNDER_REPLICATED_PARTITIONS.name, "mean"),
    ("offline_partitions_max", M.OFFLINE_PARTITIONS.name, "max"),
    ("offline_partitions_mean", M.OFFLINE_PARTITIONS.name, "mean"),
)
_BROKER_HISTOGRAMS = (
    ("propagation_delay", M.PROPAGATION_DELAY.name),
    ("leader_election", M.LEADER_ELECTION.name),
)

BROKER_WINDOW_COLUMNS: tuple[str, ...] = (
    "window",
    "window_start",
    "window_end",
    "window_start_ms",
    "broker",
    "n_samples",
    *[column for column, _, _ in _BROKER_COUNTERS],
    *[column for column, _, _ in _BROKER_GAUGES],
    *[f"{name}_{_quantile_column(q)}" for name, _ in _BROKER_HISTOGRAMS for q in QUANTILES],
    *[column for column, _ in _PARTITION_SECONDS],
    "extrapolation",
    "validity",
)


def _histogram_quantile_columns(histograms: DataFrame, keys: Sequence[str]) -> DataFrame:
    """The label-less histograms' quantiles as columns (propagation_delay_p50, ...) per key."""
    pivoted = histograms.groupBy(*keys).agg(
        *[
            F.max(F.when(F.col("metric") == F.lit(family), F.col(_quantile_column(q)))).alias(
                f"{name}_{_quantile_column(q)}"
            )
            for name, family in _BROKER_HISTOGRAMS
            for q in QUANTILES
        ]
    )
    return pivoted


def broker_windows(
    scrapes: DataFrame,
    counters: DataFrame,
    gauges: DataFrame,
    histograms: DataFrame,
    gauge_seconds: DataFrame,
    parameters: RollupParameters,
    present: Collection[str],
) -> DataFrame:
    """Per broker and complete window: the replication health numbers of issue 8.

    Inputs: ``broker_scrapes``, ``counter_windows`` (counters and histogram series),
    ``gauge_windows``, ``histogram_windows``, ``partition_gauge_seconds``; all for the same window.
    ``n_samples`` counts the broker's scrapes, so validity says how well the broker was observed.
    A column is null when its metric is absent from the broker's snapshots.
    """
    keys = ["broker", "window_start_ms"]
    window_ms = parameters.window.ms
    scraped = (
        scrapes.withColumn("window_start_ms", _window_start(F.col("ts_ms"), window_ms))
        .where(_complete(F.col("window_start_ms"), parameters))
        .groupBy(*keys)
        .agg(F.count(F.lit(1)).alias("n_samples"))
    )
    grid = _with_validity(_dense_windows(scraped, ["broker"], window_ms), ["broker"], parameters.min_samples)
    counted = counters.groupBy(*keys).agg(
        *[_counter_sum(metric, label).alias(column) for column, metric, label in _BROKER_COUNTERS]
    )
    gauged = gauges.groupBy(*keys).agg(
        *[
            F.max(F.when(F.col("metric") == F.lit(metric), F.col(statistic))).alias(column)
            for column, metric, statistic in _BROKER_GAUGES
        ]
    )
    quantiles = _histogram_quantile_columns(histograms, keys)
    seconds = gauge_seconds.groupBy(*keys).agg(
        *[
            F.sum(F.when(F.col("metric") == F.lit(spec.name), F.col("value_seconds"))).alias(column)
            for column, spec in _PARTITION_SECONDS
        ]
    )
    joined = (
        grid.join(counted, on=keys, how="left")
        .join(gauged, on=keys, how="left")
        .join(quantiles, on=keys, how="left")
        .join(seconds, on=keys, how="left")
    )
    return _finish_broker_windows(joined, parameters, present)


def _finish_broker_windows(
    joined: DataFrame, parameters: RollupParameters, present: Collection[str]
) -> DataFrame:
    # Seconds under-replicated are 0 for a scraped broker that reported no under-replicated
    # partition, null when the broker was not scraped in the window at all.
    scraped_here = F.col("n_samples") > 0
    columns: list[Column] = [*_window_columns(parameters)]
    for column in BROKER_WINDOW_COLUMNS[3:]:
        spec = _PARTITION_SECONDS_SPECS.get(column)
        if spec is None:
            columns.append(F.col(column))
        else:
            columns.append(F.when(scraped_here, _zero_if_present(column, spec.name, present)).alias(column))
    return joined.select(*columns)


def cluster_windows(brokers: DataFrame, series_windows: DataFrame, parameters: RollupParameters) -> DataFrame:
    """Per complete window, the whole cluster: sums over brokers, pooled histogram quantiles.

    Inputs: ``broker_windows`` and the histogram rows of ``counter_windows`` for the same window.
    Offline partitions come from the active controller only (other brokers report 0): the max over
    brokers is the cluster's max, and the sum of the per-broker time-weighted means the cluster's
    mean even across a controller failover. ``validity`` is the worst of the brokers'.
    """
    sums = [column for column, _, _ in _BROKER_COUNTERS] + [
        "pending_isr_changes_mean",
        "under_replicated_partitions_mean",
        "offline_partitions_mean",
        *_PARTITION_SECONDS_COLUMNS,
    ]
    maxima = ["pending_isr_changes_max", "under_replicated_partitions_max", "offline_partitions_max"]
    validity_rank = (
        F.when(F.col("validity") == "valid", 2).when(F.col("validity") == "extrapolated", 1).otherwise(0)
    )
    aggregated = brokers.groupBy("window_start_ms").agg(
        F.count(F.when(F.col("n_samples") > 0, 1)).alias("brokers"),
        F.sum("n_samples").alias("n_samples"),
        F.min(validity_rank).alias("validity_rank"),
        *[F.sum(column).alias(column) for column in sorted(sums)],
        *[F.max(column).alias(column) for column in maxima],
    )
    pooled = aggregated
    for name, family in _BROKER_HISTOGRAMS:
        quantiles = _cluster_histogram_quantiles(series_windows, family).select(
            "window_start_ms",
            *[F.col(_quantile_column(q)).alias(f"{name}_{_quantile_column(q)}") for q in QUANTILES],
        )
        pooled = pooled.join(quantiles, on="window_start_ms", how="left")
    validity = (
        F.when(F.col("validity_rank") == 2, "valid")
        .when(F.col("validity_rank") == 1, "extrapolated")
        .otherwise("invalid")
    )
    return pooled.select(
        *_window_columns(parameters),
        "window_start_ms",
        "brokers",
        "n_samples",
        *[column for column, _, _ in _BROKER_COUNTERS],
        *maxima,
        "pending_isr_changes_mean",
        "under_replicated_partitions_mean",
        "offline_partitions_mean",
        *[f"{name}_{_quantile_column(q)}" for name, _ in _BROKER_HISTOGRAMS for q in QUANTILES],
        *[column for column, _ in _PARTITION_SECONDS],
        validity.alias("validity"),
    )


def union_all(frames: Iterable[DataFrame]) -> DataFrame:
    """Union by column name (the same table for several window sizes)."""
    frames = list(frames)
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result
