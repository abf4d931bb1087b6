"""``actorlog rollup``: the thin I/O shell around the transforms.

It reads the snapshot Parquet files, calls the pure functions of ``transforms`` once per window
size, writes every table to ``OUT/tables/<name>/`` (Parquet, overwritten, partitioned by
``window`` where windowed), then reads the small aggregated tables back to print the summary and
write the report (``OUT/report/index.html`` and PNGs). One progress line per stage, with the
elapsed time.

Tables:

=====================  ===================================================================
counter_windows        per counter series and window: increase, rate, PromQL increase, validity
histogram_windows      per histogram (family, broker, labels) and window: count, sum, mean, p50, p99
gauge_windows          per broker-level gauge series and window: time-weighted mean, min, max, last
partition_windows      per partition and window: ISR min/max and changes, seconds under-replicated /
                       under min ISR
broker_windows         per broker and window: ISR churn, propagation outcomes, pending changes,
                       offline partitions, elections, latency quantiles, bytes
cluster_windows        per window: the broker numbers summed, histograms pooled across brokers
flap_cycles            one row per ISR shrink undone within --flap-span (from the ISR intervals
                       when there are state-change events, else from the ISR size gauges)
flapping_partitions    partitions ranked by flap cycles
isr_intervals          per partition state held over time (state-change events): ISR, leader,
                       epoch, replicas, under-replicated / under min ISR, cause, removed, added
partition_isr_totals   per partition: observed / under-replicated / under min ISR seconds,
                       shrinks, expands, elections, flap cycles, longest under-replicated run
topic_isr_totals       per topic: the partition totals summed, and the number of partitions
incidents              stretches with any partition under-replicated: partitions, replicas out,
                       reasons, duration to full ISR
propagation_delays     per leader ISR change: the ISR change notification that carried it, delay
state_change_totals    events per recording broker and kind (exact duplicates dropped)
=====================  ===================================================================

The event tables come from the ``*.state-changes.parquet`` files beside the snapshots
(``isr_history``); a snapshot directory without any is rolled up as before and those tables are
written empty (with their columns). Their horizon is the latest snapshot or event (or ``--as-of``).

Exit codes: 0 done; 2 no input (no snapshot files, or none holding a metric the rollup reads) or
bad arguments; 1 Spark failed (one line with Spark's message; the stage is the last progress line).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ops.rollup import isr_history, report, transforms
from ops.rollup import metrics as M
from ops.rollup.schema import (
    SNAPSHOT_GLOB,
    STATE_CHANGES_GLOB,
    snapshot_struct_type,
    state_change_struct_type,
)
from ops.rollup.session import build_session, plan_session
from ops.rollup.transforms import RollupParameters, TumblingWindow
from ops.snapshots import parse_duration_ms, snapshot_files, state_change_files

__all__ = ["HISTORY_TABLES", "TABLES", "RollupOptions", "RollupResult", "main", "rollup", "run_rollup"]

PROG = "actorlog rollup"
# The tables built from the state-change events (``isr_history``).
HISTORY_TABLES = (
    "isr_intervals",
    "partition_isr_totals",
    "topic_isr_totals",
    "incidents",
    "propagation_delays",
    "state_change_totals",
)
TABLES = (
    "counter_windows",
    "histogram_windows",
    "gauge_windows",
    "partition_windows",
    "broker_windows",
    "cluster_windows",
    "flap_cycles",
    "flapping_partitions",
    *HISTORY_TABLES,
)
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class RollupOptions:
    snapshots: Path
    out: Path
    windows: tuple[TumblingWindow, ...]
    min_samples: int = 3
    flap_span_ms: int = 300_000
    scrape_interval_ms: int = 10_000
    as_of_ms: int | None = None
    top: int = 10


@dataclass(frozen=True, slots=True)
class RollupResult:
    """What a run produced for the terminal: the report's summary and the ISR history's lines."""

    summary: report.Summary
    history_lines: tuple[str, ...]

    def lines(self) -> list[str]:
        """The summary's lines, then the ISR history's (printed by ``actorlog rollup``)."""
        return [*report.summary_lines(self.summary), *self.history_lines]


class NoInputError(Exception):
    """Nothing to roll up; the message says why."""


class Progress:
    """One line per stage: ``[  12.3s] stage: detail``."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        # Elapsed time for humans; not domain time, so the Clock port is not involved.
        self._clock = clock
        self._start = clock()

    def stage(self, name: str, detail: str = "") -> None:
        elapsed = self._clock() - self._start
        print(f"[{elapsed:7.1f}s] {name}" + (f": {detail}" if detail else ""), flush=True)

    def timed(self, name: str, action: Callable[[], _T], detail: Callable[[_T], str] | None = None) -> _T:
        result = action()
        self.stage(name, detail(result) if detail else "")
        return result


def _read_snapshots(spark: SparkSession, directory: Path) -> DataFrame:
    # pathGlobFilter keeps *.parquet.tmp (a write in progress, or one a crash interrupted) out.
    return (
        spark.read.schema(snapshot_struct_type())
        .option("pathGlobFilter", SNAPSHOT_GLOB)
        .parquet(str(directory))
    )


def _read_state_changes(spark: SparkSession, directory: Path) -> DataFrame:
    """The state-change files beside the snapshots (an empty frame with their columns when none)."""
    if not state_change_files(directory):
        return spark.createDataFrame([], state_change_struct_type())
    # The same rule as the snapshots: only complete ``*.state-changes.parquet`` names are read.
    return (
        spark.read.schema(state_change_struct_type())
        .option("pathGlobFilter", STATE_CHANGES_GLOB)
        .parquet(str(directory))
    )


# Beside each table's part files: its schema, so that a table with no rows (a run shorter than a
# window writes no partition directory at all) reads back as empty instead of failing to infer one.
# Spark's readers skip names starting with "_".
_SCHEMA_FILE = "_schema.json"


def _write_table(frame: DataFrame, out: Path, name: str, partition_by_window: bool) -> None:
    writer = frame.write.mode("overwrite")
    if partition_by_window:
        writer = writer.partitionBy("window")
    directory = out / "tables" / name
    writer.parquet(str(directory))
    (directory / _SCHEMA_FILE).write_text(frame.schema.json(), encoding="utf-8")


def _read_table(spark: SparkSession, out: Path, name: str) -> DataFrame:
    directory = out / "tables" / name
    schema = StructType.fromJson(json.loads((directory / _SCHEMA_FILE).read_text(encoding="utf-8")))
    return spark.read.schema(schema).parquet(str(directory))


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in frame.collect()]


def run_rollup(spark: SparkSession, options: RollupOptions, progress: Progress) -> report.Summary:
    """Read, transform, write; returns the summary (raises ``NoInputError`` when there is no input)."""
    return rollup(spark, options, progress).summary


def rollup(spark: SparkSession, options: RollupOptions, progress: Progress) -> RollupResult:
    """``run_rollup``, also returning the ISR history's summary lines."""
    files = snapshot_files(options.snapshots)
    if not files:
        raise NoInputError(f"no snapshot files (*.parquet) under {options.snapshots}")
    size = sum(path.stat().st_size for path in files)
    progress.stage(
        "input", f"{len(files):,} snapshot files, {size / 2**20:,.1f} MiB under {options.snapshots}"
    )

    snapshot = transforms.select_snapshot(_read_snapshots(spark, options.snapshots), M.rollup_sample_names())
    if options.as_of_ms is not None:
        # On the raw timestamp column, so that Parquet statistics can skip later files.
        snapshot = snapshot.where(F.col("ts") <= F.timestamp_millis(F.lit(options.as_of_ms)))
    samples = transforms.prepare_samples(snapshot)
    # Two cached subsets, each one scan of the (many, small) snapshot files; everything else is
    # computed from them. Per-partition gauges are most of the rows: only their non-zero values
    # are kept (see transforms.partition_samples).
    small = samples.where(F.col("metric").isin(_small_names())).cache()
    partition_rows = transforms.partition_samples(
        samples.where(F.col("metric").isin(_partition_names()))
    ).cache()
    counts = (small.count(), partition_rows.count())
    progress.stage("scan", f"{counts[0]:,} broker-level samples, {counts[1]:,} non-zero partition samples")
    if counts == (0, 0):
        before = "" if options.as_of_ms is None else f" at or before {_iso(options.as_of_ms)}"
        raise NoInputError(
            f"the snapshot files under {options.snapshots} hold no metric the rollup reads{before}"
        )

    metas = [
        frame.groupBy("metric").agg(F.min("ts_ms").alias("earliest"), F.max("ts_ms").alias("latest"))
        for frame in (small, partition_rows)
    ]
    seen = [row.asDict() for meta in metas for row in meta.collect()]
    earliest_ms = min(int(row["earliest"]) for row in seen)
    as_of_ms = options.as_of_ms if options.as_of_ms is not None else max(int(row["latest"]) for row in seen)
    present = frozenset(row["metric"] for row in seen) | _probe_all_zero_metrics(samples, seen)
    progress.stage(
        "metrics",
        f"{len(present)} of {len(M.rollup_sample_names())} rollup metrics present, "
        f"{_iso(earliest_ms)} .. {_iso(as_of_ms)} (as of)",
    )

    raw_events = _read_state_changes(spark, options.snapshots)
    if options.as_of_ms is not None:
        raw_events = raw_events.where(F.col("ts") <= F.timestamp_millis(F.lit(options.as_of_ms)))
    events = isr_history.prepare_events(raw_events).cache()
    event_meta = _single(events.agg(F.count(F.lit(1)).alias("events"), F.max("ts_ms").alias("latest")))
    event_count, latest_event = int(event_meta["events"]), event_meta["latest"]
    # The ISR history's horizon: the end of observation, by scrape or by event.
    horizon_ms = options.as_of_ms
    if horizon_ms is None:
        horizon_ms = as_of_ms if latest_event is None else max(as_of_ms, int(latest_event))
    event_files = len(state_change_files(options.snapshots))
    progress.stage(
        "events",
        f"{event_count:,} state-change events in {event_files:,} files (history to {_iso(horizon_ms)})"
        if event_count
        else "no state-change events: the ISR history tables stay empty",
    )

    interval = options.scrape_interval_ms
    instants = small.select("broker", "ts_ms").unionByName(partition_rows.select("broker", "ts_ms"))
    scrapes = transforms.broker_scrapes(
        instants, as_of_ms, max_hold_ms=2 * interval, last_hold_ms=interval
    ).cache()
    brokers = sorted(r["broker"] for r in scrapes.select("broker").distinct().collect())
    progress.stage("scrapes", f"{scrapes.count():,} scrapes of {len(brokers)} brokers ({', '.join(brokers)})")

    counter_names = [name for spec in (*M.COUNTERS, *M.HISTOGRAMS) for name in spec.sample_names]
    deltas = transforms.counter_deltas(small.where(F.col("metric").isin(counter_names))).cache()
    gauge_names = [spec.name for spec in M.SCALAR_GAUGES]
    gauges = transforms.dedupe_samples(small.where(F.col("metric").isin(gauge_names))).cache()
    timeline = transforms.isr_timeline(partition_rows).cache()
    progress.stage(
        "series",
        f"{deltas.count():,} counter samples, {gauges.count():,} gauge samples, "
        f"{timeline.count():,} partition ISR samples",
    )

    windowed: dict[str, list[DataFrame]] = {name: [] for name in TABLES[:6]}
    for window in options.windows:
        parameters = RollupParameters(window=window, as_of_ms=as_of_ms, min_samples=options.min_samples)
        series = transforms.counter_windows(deltas, parameters).cache()
        histograms = transforms.histogram_windows(
            series.where(F.col("metric").isin(_histogram_names())), parameters
        )
        gauge_rows = transforms.gauge_windows(gauges, scrapes, parameters).cache()
        seconds = transforms.partition_gauge_seconds(partition_rows, scrapes, parameters).cache()
        brokers_frame = transforms.broker_windows(
            scrapes, series, gauge_rows, histograms, seconds, parameters, present
        ).cache()
        windowed["counter_windows"].append(
            series.where(F.col("metric").isin([s.name for s in M.COUNTERS])).drop(
                "window_start_ms", "label_key", "base_label_key", "le"
            )
        )
        windowed["histogram_windows"].append(histograms.drop("window_start_ms", "base_label_key"))
        windowed["gauge_windows"].append(gauge_rows.drop("window_start_ms", "label_key"))
        windowed["partition_windows"].append(
            transforms.partition_windows(timeline, seconds, parameters, present).drop("window_start_ms")
        )
        windowed["broker_windows"].append(brokers_frame.drop("window_start_ms"))
        windowed["cluster_windows"].append(
            transforms.cluster_windows(brokers_frame, series, parameters).drop("window_start_ms")
        )
        # Each table is written once for all window sizes (below), so the per-window frames stay
        # cached until then.
        progress.stage(f"window {window.label}", f"{brokers_frame.count():,} broker windows")

    for name, frames in windowed.items():
        _write_table(transforms.union_all(frames), options.out, name, partition_by_window=True)
        progress.stage(f"wrote {name}", f"{_read_table(spark, options.out, name).count():,} rows")

    intervals_written = _write_history(spark, options, events, horizon_ms, progress)
    if intervals_written:
        # Events say exactly when each ISR changed: flapping comes from them, not from the gauges.
        cycles = isr_history.flap_cycles(
            _read_table(spark, options.out, "isr_intervals"), options.flap_span_ms
        )
    else:
        cycles = transforms.flap_cycles(timeline, options.flap_span_ms)
    _write_table(cycles, options.out, "flap_cycles", partition_by_window=False)
    _write_table(
        transforms.flapping_partitions(_read_table(spark, options.out, "flap_cycles")),
        options.out,
        "flapping_partitions",
        partition_by_window=False,
    )
    flapping = _read_table(spark, options.out, "flapping_partitions")
    progress.stage(
        "wrote flapping tables",
        f"{flapping.count():,} flapping partitions (from {'events' if intervals_written else 'gauges'})",
    )

    smallest = min(options.windows, key=lambda w: w.ms)
    # Times travel to the report as epoch milliseconds: collected timestamps would be naive datetimes
    # in this machine's time zone.
    window_start_ms = F.unix_millis("window_start").alias("window_start_ms")
    cluster = _rows(
        _read_table(spark, options.out, "cluster_windows")
        .where(F.col("window") == smallest.label)
        .select("*", window_start_ms)
        .orderBy("window_start_ms")
    )
    broker_rows = _rows(
        _read_table(spark, options.out, "broker_windows")
        .where(F.col("window") == smallest.label)
        .select(window_start_ms, "broker", "isr_shrinks", "isr_expands", "failed_isr_updates", "validity")
        .orderBy("window_start_ms", "broker")
    )
    top = _rows(
        flapping.select("*", F.unix_millis("last_cycle_at").alias("last_cycle_ms"))
        .orderBy("rank")
        .limit(max(options.top, 20))
    )
    window_counts = {
        r["window"]: int(r["count"])
        for r in _read_table(spark, options.out, "cluster_windows").groupBy("window").count().collect()
    }
    summary = report.summarise(
        cluster_rows=cluster,
        flapping_rows=top,
        brokers=brokers,
        earliest_ms=earliest_ms,
        as_of_ms=as_of_ms,
        windows=[(w.label, window_counts.get(w.label, 0)) for w in options.windows],
        smallest_window=smallest.label,
        missing_metrics=sorted(M.rollup_sample_names() - present),
        report_path=options.out / "report" / "index.html",
        top=options.top,
    )
    history_lines = _history_lines(spark, options, event_count, horizon_ms)
    # The event rows are per partition state and per change (thousands a day, not per sample).
    report.write_report(
        options.out / "report",
        summary,
        cluster,
        broker_rows,
        top,
        intervals=_rows(_read_table(spark, options.out, "isr_intervals")),
        incidents=_rows(_read_table(spark, options.out, "incidents").orderBy("incident")),
        propagation_delays=_rows(_read_table(spark, options.out, "propagation_delays")),
        state_changes=_rows(
            events.orderBy("ts_ms", "broker", "incarnation", "sequence").select(
                "ts_ms", "broker", "kind", "topic", "partition", "reason"
            )
        ),
    )
    progress.stage("report", str(options.out / "report" / "index.html"))
    return RollupResult(summary=summary, history_lines=tuple(history_lines))


def _write_history(
    spark: SparkSession, options: RollupOptions, events: DataFrame, horizon_ms: int, progress: Progress
) -> int:
    """Write the ISR history tables (empty, with their columns, when there are no events).

    Each table is built from the ones already written (small Parquet reads), not recomputed from
    the events. Returns the number of ISR intervals.
    """
    out = options.out

    def write(name: str, frame: DataFrame) -> int:
        _write_table(frame, out, name, partition_by_window=False)
        rows = _read_table(spark, out, name).count()
        progress.stage(f"wrote {name}", f"{rows:,} rows")
        return rows

    write("state_change_totals", isr_history.state_change_totals(events))
    intervals = write("isr_intervals", isr_history.isr_intervals(events, horizon_ms))
    written = _read_table(spark, out, "isr_intervals")
    write("partition_isr_totals", isr_history.partition_isr_totals(written, options.flap_span_ms))
    write("topic_isr_totals", isr_history.topic_isr_totals(_read_table(spark, out, "partition_isr_totals")))
    write("incidents", isr_history.incidents(written))
    write("propagation_delays", isr_history.propagation_delays(events, horizon_ms))
    return intervals


def _history_lines(
    spark: SparkSession, options: RollupOptions, event_count: int, horizon_ms: int
) -> list[str]:
    """The ISR history's summary lines, from the tables ``_write_history`` wrote."""
    if event_count == 0:
        return [f"ISR history: no state-change events under {options.snapshots}"]
    out = options.out
    brokers = sorted(
        r["broker"]
        for r in _read_table(spark, out, "state_change_totals").select("broker").distinct().collect()
    )
    totals = _single(
        _read_table(spark, out, "partition_isr_totals").agg(
            *[
                F.sum(column).alias(column)
                for column in (
                    "shrinks",
                    "expands",
                    "elections",
                    "under_replicated_seconds",
                    "under_min_isr_seconds",
                )
            ]
        )
    )
    stretches = _single(
        _read_table(spark, out, "incidents").agg(
            F.count(F.lit(1)).alias("count"),
            F.max("duration_seconds").alias("longest"),
            F.count(F.when(F.col("open"), 1)).alias("open"),
        )
    )
    delays = _single(
        _read_table(spark, out, "propagation_delays").agg(
            F.count(F.lit(1)).alias("changes"),
            F.count("delay_seconds").alias("propagated"),
            F.median("delay_seconds").alias("median"),
            F.max("delay_seconds").alias("max"),
        )
    )
    incident_count = int(stretches["count"])
    longest = f", longest {_amount(stretches['longest'], ' s')}" if incident_count else ""
    still_open = f", {int(stretches['open'])} open at the end" if stretches["open"] else ""
    unpropagated = int(delays["changes"]) - int(delays["propagated"])
    return [
        f"ISR history from {event_count:,} state-change events of {len(brokers)} brokers "
        f"({', '.join(brokers)}) up to {_iso(horizon_ms)}: {_amount(totals['shrinks'])} shrinks, "
        f"{_amount(totals['expands'])} expands, {_amount(totals['elections'])} leader elections",
        f"ISR history: {_amount(totals['under_replicated_seconds'], ' s')} under-replicated and "
        f"{_amount(totals['under_min_isr_seconds'], ' s')} under min ISR (partition-seconds); "
        f"{incident_count:,} incident{'' if incident_count == 1 else 's'}{longest}{still_open}",
        f"ISR change propagation (events): median {_amount(delays['median'], ' s')}, "
        f"max {_amount(delays['max'], ' s')} over {int(delays['propagated']):,} leader ISR changes"
        + (f" ({unpropagated:,} not propagated by the end)" if unpropagated else ""),
    ]


def _single(aggregate: DataFrame) -> dict[str, Any]:
    """The one row of a global aggregate."""
    row = aggregate.first()
    if row is None:  # a global aggregate always has a row; this keeps the types honest
        raise RuntimeError("a global aggregate returned no row")
    return row.asDict()


def _amount(value: float | None, unit: str = "") -> str:
    """The ISR history lines' numbers: the report's format, one decimal."""
    return report.format_number(value, unit, decimals=1)


def _histogram_names() -> list[str]:
    return [name for spec in M.HISTOGRAMS for name in spec.sample_names]


def _small_names() -> list[str]:
    """Sample names with one or a few series per broker (not per partition)."""
    specs = (*M.COUNTERS, *M.HISTOGRAMS, *M.SCALAR_GAUGES)
    return sorted(name for spec in specs for name in spec.sample_names)


def _partition_names() -> list[str]:
    return sorted(spec.name for spec in (*M.PARTITION_GAUGES, M.PARTITION_ISR_COUNT))


def _probe_all_zero_metrics(samples: DataFrame, seen: Sequence[dict[str, Any]]) -> frozenset[str]:
    """Per-partition gauges that were scraped but never non-zero (a healthy cluster's URP gauges).

    Only non-zero partition samples are cached, so their presence is checked here with ``limit(1)``
    queries, which stop at the first matching file.
    """
    seen_names = {row["metric"] for row in seen}
    found = set()
    for name in _partition_names():
        if name not in seen_names and samples.where(F.col("metric") == name).limit(1).count() > 0:
            found.add(name)
    return frozenset(found)


def _iso(ts_ms: int) -> str:
    return datetime.fromtimestamp(ts_ms / 1000, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# --- command line ---------------------------------------------------------------------------


class _ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _window_argument(text: str) -> TumblingWindow:
    try:
        return TumblingWindow(label=text.strip(), ms=parse_duration_ms(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _duration_argument(text: str) -> int:
    try:
        return parse_duration_ms(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _instant_argument(text: str) -> int:
    try:
        instant = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid time {text!r}: expected ISO 8601, e.g. 2026-01-31T12:00:00Z"
        ) from None
    if instant.tzinfo is None:
        raise argparse.ArgumentTypeError(f"time {text!r} needs a time zone, e.g. a trailing Z for UTC")
    return int(instant.timestamp() * 1000)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _config_argument(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog=PROG,
        description="Roll exported metric snapshots up into windowed Parquet tables, a summary and a report.",
    )
    parser.add_argument("--snapshots", type=Path, required=True, metavar="DIR", help="snapshot directory")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    parser.add_argument(
        "--window",
        type=_window_argument,
        action="append",
        help="tumbling window size, repeatable (default: 1m and 1h)",
    )
    parser.add_argument("--min-samples", type=_positive_int, default=3, help="samples for a valid window (3)")
    parser.add_argument("--flap-span", type=_duration_argument, default="5m", help="shrink->expand span (5m)")
    parser.add_argument(
        "--scrape-interval",
        type=_duration_argument,
        default="10s",
        help="the snapshots' interval (10s): a gauge value holds at most twice this long",
    )
    parser.add_argument("--as-of", type=_instant_argument, help="end of data (default: the latest scrape)")
    parser.add_argument(
        "--top", type=_positive_int, default=10, help="flapping partitions in the summary (10)"
    )
    parser.add_argument("--master", help="Spark master (default: the launcher's, else local[*])")
    parser.add_argument("--shuffle-partitions", type=_positive_int, help="spark.sql.shuffle.partitions")
    parser.add_argument(
        "--conf",
        type=_config_argument,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Spark setting",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    windows = tuple(arguments.window or [_window_argument("1m"), _window_argument("1h")])
    options = RollupOptions(
        snapshots=arguments.snapshots,
        out=arguments.out,
        windows=tuple({w.ms: w for w in windows}.values()),
        min_samples=arguments.min_samples,
        flap_span_ms=arguments.flap_span,
        scrape_interval_ms=arguments.scrape_interval,
        as_of_ms=arguments.as_of,
        top=arguments.top,
    )
    if not snapshot_files(options.snapshots):
        print(f"{PROG}: no snapshot files (*.parquet) under {options.snapshots}", file=sys.stderr)
        return 2
    progress = Progress()
    plan = plan_session(
        arguments.master,
        os.environ,
        shuffle_partitions=arguments.shuffle_partitions,
        extra_config=dict(arguments.conf),
    )
    # A session that already exists (a notebook, a test) belongs to its owner: use it, don't stop it.
    owned = SparkSession.getActiveSession() is None
    spark = build_session(plan)
    progress.stage("spark", f"master {spark.sparkContext.master}, Spark {spark.version}")
    try:
        result = rollup(spark, options, progress)
    except NoInputError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    except PySparkException as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"{PROG}: Spark failed: {first_line}", file=sys.stderr)
        return 1
    finally:
        spark.catalog.clearCache()
        if owned:
            spark.stop()
    for line in result.lines():
        print(line)
    return 0


if __name__ == "__main__":
    # spark-submit runs a file: `spark-submit [--master ...] ops/rollup/job.py --snapshots ... --out ...`.
    raise SystemExit(main())
