"""The rollup transforms on tiny hand-made frames (``-m spark``).

Fixtures cover what the issue lists: a counter reset, a gap (missed scrapes), a series that starts
mid-window, a single-sample window, duplicate timestamps, samples exactly on window edges, the
still-open window, and a flapping partition. Expected numbers are worked out by hand in the comments
and, where PromQL defines the result, also checked against pure-Python references written from
Prometheus' ``promql/functions.go`` (``extrapolatedRate``) and ``promql/quantile.go``
(``bucketQuantile``), so two independent implementations are compared.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from ops.rollup import metrics as M
from ops.rollup import transforms
from ops.rollup.schema import snapshot_struct_type
from ops.rollup.transforms import RollupParameters, TumblingWindow

pytestmark = pytest.mark.spark

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z: a multiple of every window size the tests use
SECOND = 1000

Sample = tuple[
    float, str, str, dict[str, str], float, str
]  # (seconds after T0, broker, metric, labels, value, type)


def at(seconds: float) -> int:
    return T0 + int(seconds * SECOND)


def snapshot_frame(spark: SparkSession, samples: Sequence[Sample]) -> DataFrame:
    rows = [
        (datetime.fromtimestamp(at(s) / 1000, tz=UTC), broker, metric, labels, float(value), type_)
        for s, broker, metric, labels, value, type_ in samples
    ]
    return spark.createDataFrame(rows, schema=snapshot_struct_type())


def prepared(spark: SparkSession, samples: Sequence[Sample]) -> DataFrame:
    frame = snapshot_frame(spark, samples)
    names = {sample[2] for sample in samples}
    return transforms.prepare_samples(transforms.select_snapshot(frame, names))


def by_key(rows: Sequence[Any], *keys: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    result: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        values = row.asDict()
        key = tuple(values[k] for k in keys)
        assert key not in result, f"duplicate row for {key}"
        result[key] = values
    return result


def offset_s(window_start_ms: int) -> int:
    return (window_start_ms - T0) // SECOND


def promql_increase(points: Sequence[tuple[int, float]], start_ms: int, end_ms: int) -> float | None:
    """PromQL ``increase()`` of the samples in one range (``extrapolatedRate``, isCounter)."""
    if len(points) < 2:
        return None
    first_t, first_v = points[0]
    last_t, last_v = points[-1]
    result = last_v - first_v
    for (_, previous), (_, current) in itertools.pairwise(points):
        if current < previous:
            result += previous
    to_start = (first_t - start_ms) / 1000
    to_end = (end_ms - last_t) / 1000
    sampled = (last_t - first_t) / 1000
    average = sampled / (len(points) - 1)
    threshold = average * 1.1
    if to_start >= threshold:
        to_start = average / 2
    if result > 0 and first_v >= 0:
        to_zero = sampled * (first_v / result)
        to_start = min(to_start, to_zero)
    if to_end >= threshold:
        to_end = average / 2
    return result * (sampled + to_start + to_end) / sampled


def promql_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """PromQL ``histogram_quantile`` over (upper bound, cumulative count) pairs (None for NaN)."""
    ordered = sorted(buckets)
    if not ordered or not math.isinf(ordered[-1][0]):
        return None
    counts: list[float] = []
    for _, count in ordered:
        counts.append(max(count, counts[-1]) if counts else count)  # ensure monotonic
    observations = counts[-1]
    if observations == 0:
        return None
    rank = q * observations
    b = next((i for i in range(len(ordered) - 1) if counts[i] >= rank), len(ordered) - 1)
    if b == len(ordered) - 1:
        return ordered[-2][0]
    if b == 0 and ordered[0][0] <= 0:
        return ordered[0][0]
    start, end, count = 0.0, ordered[b][0], counts[b]
    if b > 0:
        start = ordered[b - 1][0]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return start + (end - start) * (rank / count)


MINUTE = TumblingWindow("1m", 60_000)
SHRINKS = M.ISR_SHRINKS.name


def parameters(as_of_s: float, window: TumblingWindow = MINUTE, min_samples: int = 3) -> RollupParameters:
    return RollupParameters(window=window, as_of_ms=at(as_of_s), min_samples=min_samples)


# --- input ---------------------------------------------------------------------------------------


def test_prepared_samples_have_canonical_label_keys_and_parsed_bounds(spark: SparkSession) -> None:
    name = M.REQUEST_DURATION.name + "_bucket"
    frame = prepared(
        spark,
        [
            (0, "1", name, {"request": "Produce", "le": "0.5"}, 1, "histogram"),
            (0, "2", name, {"le": "+Inf", "request": "Produce"}, 2, "histogram"),
            (0, "3", SHRINKS, {}, 3, "counter"),
        ],
    )

    rows = by_key(frame.collect(), "broker")

    assert (
        rows[("1",)]["base_label_key"]
        == rows[("2",)]["base_label_key"]
        == '[{"key":"request","value":"Produce"}]'
    )
    assert rows[("1",)]["label_key"] == '[{"key":"le","value":"0.5"},{"key":"request","value":"Produce"}]'
    assert (rows[("1",)]["le"], rows[("2",)]["le"], rows[("3",)]["le"]) == (0.5, math.inf, None)
    assert rows[("3",)]["label_key"] == "[]"
    assert rows[("3",)]["ts_ms"] == T0


# --- counters ------------------------------------------------------------------------------------

# Series on three brokers, 1-minute windows, as of 330 s (so the window [300, 360) is still open).
COUNTER_SAMPLES: list[Sample] = [
    # Broker 1: samples on window edges (0, 60, 180, 240 would be; 300 is in the open window).
    (0, "1", SHRINKS, {}, 10, "counter"),
    (20, "1", SHRINKS, {}, 12, "counter"),
    (40, "1", SHRINKS, {}, 15, "counter"),
    (60, "1", SHRINKS, {}, 17, "counter"),
    (80, "1", SHRINKS, {}, 3, "counter"),  # reset: the broker restarted, +3
    (100, "1", SHRINKS, {}, 5, "counter"),
    # gap: no scrape in [120, 180)
    (180, "1", SHRINKS, {}, 9, "counter"),  # +4 over the gap, counted in [180, 240)
    (200, "1", SHRINKS, {}, 10, "counter"),
    (200, "1", SHRINKS, {}, 10, "counter"),  # duplicate timestamp
    (220, "1", SHRINKS, {}, 11, "counter"),
    (250, "1", SHRINKS, {}, 12, "counter"),  # the only sample of [240, 300)
    (300, "1", SHRINKS, {}, 13, "counter"),  # still-open window: excluded
    (320, "1", SHRINKS, {}, 14, "counter"),
    # Broker 2: starts mid-window at 150 s.
    (150, "2", SHRINKS, {}, 100, "counter"),
    (170, "2", SHRINKS, {}, 101, "counter"),
    (190, "2", SHRINKS, {}, 102, "counter"),
    (210, "2", SHRINKS, {}, 103, "counter"),
    (230, "2", SHRINKS, {}, 104, "counter"),
    # Broker 3: a young counter, where PromQL stops extrapolating at the counter's zero point.
    (135, "3", SHRINKS, {}, 1, "counter"),
    (155, "3", SHRINKS, {}, 3, "counter"),
    (175, "3", SHRINKS, {}, 5, "counter"),
]


@pytest.fixture(scope="module")
def counter_rows(spark: SparkSession) -> dict[tuple[Any, ...], dict[str, Any]]:
    samples = transforms.dedupe_samples(prepared(spark, COUNTER_SAMPLES))
    windows = transforms.counter_windows(
        transforms.counter_deltas(samples), parameters(as_of_s=330)
    ).collect()
    return {(row["broker"], offset_s(row["window_start_ms"])): row.asDict() for row in windows}


def test_counter_windows_cover_each_series_span_and_exclude_the_open_window(
    counter_rows: dict[tuple[Any, ...], dict[str, Any]],
) -> None:
    assert sorted(counter_rows) == [
        ("1", 0), ("1", 60), ("1", 120), ("1", 180), ("1", 240),
        ("2", 120), ("2", 180),
        ("3", 120),
    ]  # fmt: skip


def test_counter_increase_sums_reset_aware_deltas_whose_later_sample_is_in_the_window(
    counter_rows: dict[tuple[Any, ...], dict[str, Any]],
) -> None:
    increases = {key: row["increase"] for key, row in counter_rows.items()}
    assert increases == {
        ("1", 0): 5.0,  # the series' first sample has no delta: 12-10 + 15-12
        ("1", 60): 7.0,  # 17-15 (from the previous window) + 3 (reset) + 5-3
        ("1", 120): None,  # no sample: the increase during the gap lands in the next window
        ("1", 180): 6.0,  # 9-5 across the gap + 1 + 1 (the duplicate adds nothing)
        ("1", 240): 1.0,  # single sample: 12-11
        ("2", 120): 1.0,  # starts mid-window: only 101-100
        ("2", 180): 3.0,
        ("3", 120): 4.0,
    }
    assert counter_rows[("1", 60)]["resets"] == 1
    assert counter_rows[("1", 180)]["resets"] == 0
    assert counter_rows[("1", 60)]["rate"] == pytest.approx(7.0 / 60)


def test_duplicate_timestamps_count_as_one_sample(
    counter_rows: dict[tuple[Any, ...], dict[str, Any]],
) -> None:
    assert counter_rows[("1", 180)]["n_samples"] == 3


def test_counter_windows_are_flagged_like_cruise_control(
    counter_rows: dict[tuple[Any, ...], dict[str, Any]],
) -> None:
    flags = {
        key: (row["n_samples"], row["extrapolation"], row["validity"]) for key, row in counter_rows.items()
    }
    assert flags == {
        ("1", 0): (3, "none", "valid"),
        ("1", 60): (3, "none", "valid"),
        ("1", 120): (0, "avg_adjacent", "extrapolated"),  # both neighbours valid
        ("1", 180): (3, "none", "valid"),
        ("1", 240): (1, "avg_available", "extrapolated"),  # half of 3, rounded down, is 1
        ("2", 120): (2, "avg_available", "extrapolated"),
        ("2", 180): (3, "none", "valid"),
        ("3", 120): (3, "none", "valid"),
    }


def test_single_sample_window_with_invalid_neighbours_is_forced_or_invalid(spark: SparkSession) -> None:
    # min_samples 5: half is 2, so one sample is "forced_insufficient"; an empty window between two
    # windows that are not valid has no valid extrapolation.
    samples = transforms.dedupe_samples(
        prepared(spark, [(0, "1", SHRINKS, {}, 1, "counter"), (130, "1", SHRINKS, {}, 2, "counter")])
    )
    rows = transforms.counter_windows(
        transforms.counter_deltas(samples), parameters(as_of_s=180, min_samples=5)
    ).collect()
    flags = {offset_s(r["window_start_ms"]): (r["extrapolation"], r["validity"]) for r in rows}
    assert flags == {
        0: ("forced_insufficient", "extrapolated"),
        60: ("no_valid_extrapolation", "invalid"),
        120: ("forced_insufficient", "extrapolated"),
    }


def test_extrapolated_increase_matches_promql_by_hand(
    counter_rows: dict[tuple[Any, ...], dict[str, Any]],
) -> None:
    extrapolated = {key: row["extrapolated_increase"] for key, row in counter_rows.items()}
    # [0, 60): 5 over 40 s sampled, first sample on the edge, 20 s to the end (< 1.1 x 20 s):
    # extrapolated to the whole minute, x 60/40.
    assert extrapolated[("1", 0)] == pytest.approx(7.5)
    # [60, 120): in-window increase 3 + 2 (the reset adds the 17 PromQL corrects for), x 1.5.
    assert extrapolated[("1", 60)] == pytest.approx(7.5)
    # [120, 180) for broker 2: first sample 30 s after the start (>= 22 s): only half an
    # interval (10 s) is added before it; 10 s to the end is added in full: 1 x 40/20.
    assert extrapolated[("2", 120)] == pytest.approx(2.0)
    # Broker 3: 15 s to the start, but the counter would reach 0 after 10 s: 4 x (40+10+5)/40.
    assert extrapolated[("3", 120)] == pytest.approx(5.5)
    assert extrapolated[("1", 120)] is None
    assert extrapolated[("1", 240)] is None  # PromQL needs two samples


def test_extrapolated_increase_matches_the_promql_reference_in_every_window(
    counter_rows: dict[tuple[Any, ...], dict[str, Any]],
) -> None:
    unique = sorted({(broker, at(s), value) for s, broker, _, _, value, _ in COUNTER_SAMPLES})
    for (broker, start_s), row in counter_rows.items():
        start, end = at(start_s), at(start_s) + MINUTE.ms
        points = [(t, v) for b, t, v in unique if b == broker and start <= t < end]
        expected = promql_increase(points, start, end)
        if expected is None:
            assert row["extrapolated_increase"] is None, (broker, start_s)
        else:
            assert row["extrapolated_increase"] == pytest.approx(expected), (broker, start_s)


def test_a_window_ending_exactly_at_as_of_is_complete(spark: SparkSession) -> None:
    samples = transforms.dedupe_samples(
        prepared(spark, [(0, "1", SHRINKS, {}, 1, "counter"), (59, "1", SHRINKS, {}, 2, "counter")])
    )
    deltas = transforms.counter_deltas(samples)

    complete = transforms.counter_windows(deltas, parameters(as_of_s=60)).collect()
    still_open = transforms.counter_windows(deltas, parameters(as_of_s=59.999)).collect()

    assert [offset_s(r["window_start_ms"]) for r in complete] == [0]
    assert still_open == []


# --- histograms --------------------------------------------------------------------------------

INF = math.inf


@pytest.mark.parametrize(
    ("buckets", "p50", "p99"),
    [
        # Interpolated inside (0.1, 0.5] for p50; p99 falls in +Inf: the largest finite bound.
        ([(0.1, 2), (0.5, 6), (1.0, 9), (INF, 10)], 0.4, 1.0),
        # p50 inside the first bucket, interpolated from 0; p99 inside (0.5, 1].
        ([(0.1, 8), (0.5, 8), (1.0, 10), (INF, 10)], 0.0625, 0.975),
        # Non-monotonic counts (a scrape racing observations) are repaired with a running max.
        ([(0.1, 6), (0.5, 5), (INF, 10)], 0.1 * 5 / 6, 0.5),
        # Nothing observed, or no +Inf bucket: no quantile.
        ([(0.1, 0), (INF, 0)], None, None),
        ([(0.1, 1), (0.5, 2)], None, None),
    ],
)
def test_histogram_quantiles_follow_promql(
    spark: SparkSession, buckets: list[tuple[float, float]], p50: float | None, p99: float | None
) -> None:
    frame = spark.createDataFrame(
        [("k", le, float(count)) for le, count in buckets], "k string, le double, increase double"
    )

    (row,) = transforms.histogram_quantiles(frame, ["k"]).collect()

    assert _close(row["p50"], p50)
    assert _close(row["p99"], p99)
    assert _close(promql_quantile(0.5, buckets), p50)
    assert _close(promql_quantile(0.99, buckets), p99)


def _close(actual: float | None, expected: float | None) -> bool:
    if actual is None or expected is None:
        return actual is None and expected is None
    return math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12)


def test_histogram_windows_roll_up_buckets_count_and_sum_across_a_reset(spark: SparkSession) -> None:
    family = M.REQUEST_DURATION.name
    produce = {"request": "Produce"}
    states = [  # seconds, (le 0.1, le 1.0, +Inf), count, sum; the broker restarts before 60 s
        (0, (1, 2, 2), 2, 0.5),
        (20, (2, 4, 5), 5, 1.5),
        (40, (3, 6, 8), 8, 3.0),
        (60, (0, 1, 1), 1, 0.5),
        (80, (1, 2, 3), 3, 1.0),
    ]
    samples: list[Sample] = []
    for s, buckets, count, total in states:
        for le, value in zip(("0.1", "1.0", "+Inf"), buckets, strict=True):
            samples.append((s, "1", family + "_bucket", {**produce, "le": le}, value, "histogram"))
        samples.append((s, "1", family + "_count", produce, count, "histogram"))
        samples.append((s, "1", family + "_sum", produce, total, "histogram"))
    series = transforms.counter_windows(
        transforms.counter_deltas(transforms.dedupe_samples(prepared(spark, samples))),
        parameters(as_of_s=120),
    )

    rows = {
        offset_s(r["window_start_ms"]): r.asDict()
        for r in transforms.histogram_windows(series, parameters(120)).collect()
    }

    assert rows[0]["metric"] == family
    assert rows[0]["labels"] == produce
    # [0, 60): +6 observations, 2 at or below 0.1 s and 4 at or below 1 s; sum +2.5.
    assert (rows[0]["count"], rows[0]["sum"], rows[0]["mean"]) == (6.0, 2.5, pytest.approx(2.5 / 6))
    assert (rows[0]["p50"], rows[0]["p99"]) == (pytest.approx(0.1 + 0.9 * (3 - 2) / (4 - 2)), 1.0)
    # [60, 120): after the reset every bucket counts from 0: 1+1 <= 0.1... see the states above.
    assert (rows[60]["count"], rows[60]["sum"]) == (3.0, 1.0)
    assert rows[60]["p50"] == pytest.approx(0.1 + 0.9 * (1.5 - 1) / (2 - 1))
    assert (rows[0]["validity"], rows[60]["validity"]) == ("valid", "extrapolated")


# --- gauges -------------------------------------------------------------------------------------

OFFLINE = M.OFFLINE_PARTITIONS.name


def test_gauges_are_time_weighted_with_missed_scrapes_capped(spark: SparkSession) -> None:
    samples = prepared(
        spark,
        [
            # Broker 1 scrapes every 10 s but misses 30..70 s: the value 2 from 20 s holds only
            # max_hold (20 s), not 60 s.
            (0, "1", OFFLINE, {}, 0, "gauge"),
            (10, "1", OFFLINE, {}, 2, "gauge"),
            (20, "1", OFFLINE, {}, 2, "gauge"),
            (80, "1", OFFLINE, {}, 1, "gauge"),
            (90, "1", OFFLINE, {}, 0, "gauge"),
            (100, "1", OFFLINE, {}, 0, "gauge"),
            (110, "1", OFFLINE, {}, 0, "gauge"),
            (120, "1", OFFLINE, {}, 0, "gauge"),
            # Broker 2: the value from 55 s holds across the window boundary at 60 s.
            (45, "2", OFFLINE, {}, 4, "gauge"),
            (55, "2", OFFLINE, {}, 4, "gauge"),
            (65, "2", OFFLINE, {}, 0, "gauge"),
        ],
    )
    as_of = at(130)
    scrapes = transforms.broker_scrapes(samples, as_of, max_hold_ms=20_000, last_hold_ms=10_000)
    rows = by_key(
        transforms.gauge_windows(transforms.dedupe_samples(samples), scrapes, parameters(130)).collect(),
        "broker",
        "window_start",
    )
    got = {(broker, start.timestamp() - T0 / 1000): row for (broker, start), row in rows.items()}

    first = got[("1", 0.0)]
    assert (first["value_seconds"], first["covered_seconds"], first["mean"]) == (60.0, 40.0, 1.5)
    assert (first["min"], first["max"], first["last"], first["n_samples"]) == (0.0, 2.0, 2.0, 3)
    second = got[("1", 60.0)]
    assert (second["value_seconds"], second["covered_seconds"], second["mean"]) == (10.0, 40.0, 0.25)
    assert second["max"] == 1.0
    # Broker 2: 4 x 10 s + 4 x 5 s before 60 s, 4 x 5 s after it.
    assert got[("2", 0.0)]["value_seconds"] == 60.0
    assert got[("2", 60.0)]["value_seconds"] == 20.0
    assert got[("2", 60.0)]["max"] == 4.0  # the value carried into the window counts
    assert ("1", 120.0) not in got  # the open window


def test_broker_scrapes_hold_until_the_next_scrape_capped_and_the_last_one_briefly(
    spark: SparkSession,
) -> None:
    samples = prepared(spark, [(s, "1", OFFLINE, {}, 0, "gauge") for s in (0, 10, 60, 65)])
    holds = {
        r["ts_ms"]: r["hold_ms"]
        for r in transforms.broker_scrapes(samples, at(70), max_hold_ms=20_000, last_hold_ms=10_000).collect()
    }
    assert holds == {at(0): 10_000, at(10): 20_000, at(60): 5_000, at(65): 5_000}


# --- partitions ----------------------------------------------------------------------------------

URP, UMI, ISR = M.PARTITION_UNDER_REPLICATED.name, M.PARTITION_UNDER_MIN_ISR.name, M.PARTITION_ISR_COUNT.name


def _tp(partition: int, topic: str = "t") -> dict[str, str]:
    return {"topic": topic, "partition": str(partition)}


def test_partition_seconds_integrate_non_zero_gauges_once_per_instant(spark: SparkSession) -> None:
    samples = prepared(
        spark,
        [
            (0, "1", URP, _tp(0), 1, "gauge"),
            (10, "1", URP, _tp(0), 1, "gauge"),
            (10, "1", URP, _tp(0), 1, "gauge"),  # duplicate: counted once
            (20, "1", URP, _tp(0), 1, "gauge"),
            (30, "1", URP, _tp(0), 0, "gauge"),
            (40, "1", URP, _tp(0), 0, "gauge"),
            (0, "2", URP, _tp(0), 0, "gauge"),  # a follower's zero
            (0, "1", UMI, _tp(0), 0, "gauge"),
            (40, "1", UMI, _tp(0), 1, "gauge"),
            (50, "1", UMI, _tp(0), 1, "gauge"),
        ],
    )
    scrapes = transforms.broker_scrapes(samples, at(60), max_hold_ms=20_000, last_hold_ms=10_000)

    rows = transforms.partition_gauge_seconds(
        transforms.partition_samples(samples), scrapes, parameters(60)
    ).collect()

    assert {(r["metric"], r["broker"], r["topic"], r["partition"], r["value_seconds"]) for r in rows} == {
        (URP, "1", "t", 0, 30.0),
        (UMI, "1", "t", 0, 20.0),
    }


# Partition t-0: shrink at 20 s undone at 40 s (one cycle); 3 -> 2 at 100 s, 2 -> 1 at 110 s, back to 3
# at 130 s (two cycles); a shrink at 200 s undone only at 600 s, after the 5-minute span (no cycle).
# Partition t-1: one cycle late; t-2: one cycle early (ties rank the most recent first).
FLAP_SAMPLES: list[Sample] = [
    *[(s, "1", ISR, _tp(0), v, "gauge") for s, v in [(0, 3), (10, 3), (20, 2), (30, 2), (40, 3), (100, 2)]],
    *[(s, "1", ISR, _tp(0), v, "gauge") for s, v in [(110, 1), (130, 3), (200, 2), (400, 2), (600, 3)]],
    (20, "2", ISR, _tp(0), 0, "gauge"),  # a follower reports 0: not a shrink
    (130, "2", ISR, _tp(0), 2, "gauge"),  # a stale view at the same instant: the larger size wins
    *[(s, "2", ISR, _tp(1), v, "gauge") for s, v in [(0, 3), (500, 2), (520, 3)]],
    *[(s, "3", ISR, _tp(2), v, "gauge") for s, v in [(0, 3), (50, 2), (70, 3)]],
]


@pytest.fixture(scope="module")
def timeline(spark: SparkSession) -> DataFrame:
    return transforms.isr_timeline(transforms.partition_samples(prepared(spark, FLAP_SAMPLES))).cache()


def test_isr_timeline_keeps_the_leaders_view_and_marks_changes(timeline: DataFrame) -> None:
    changes = [
        (r["ts_ms"], r["previous_isr"], r["isr"], r["change"])
        for r in timeline.where("topic = 't' and partition = 0 and change is not null")
        .orderBy("ts_ms")
        .collect()
    ]
    assert changes == [
        (at(20), 3.0, 2.0, "shrink"),
        (at(40), 2.0, 3.0, "expand"),
        (at(100), 3.0, 2.0, "shrink"),
        (at(110), 2.0, 1.0, "shrink"),
        (at(130), 1.0, 3.0, "expand"),
        (at(200), 3.0, 2.0, "shrink"),
        (at(600), 2.0, 3.0, "expand"),
    ]


def test_flap_cycles_are_shrinks_undone_within_the_span(timeline: DataFrame) -> None:
    cycles = transforms.flap_cycles(timeline, flap_span_ms=300_000).collect()

    got = sorted(
        (
            r["partition"],
            r["shrink_at"].timestamp() - T0 / 1000,
            r["recovery_seconds"],
            r["isr_before"],
            r["isr_after"],
        )
        for r in cycles
    )
    assert got == [
        (0, 20.0, 20.0, 3.0, 2.0),
        (0, 100.0, 30.0, 3.0, 2.0),
        (0, 110.0, 20.0, 2.0, 1.0),
        (1, 500.0, 20.0, 3.0, 2.0),
        (2, 50.0, 20.0, 3.0, 2.0),
    ]


def test_flapping_partitions_rank_by_cycles_then_most_recent(timeline: DataFrame) -> None:
    ranked = transforms.flapping_partitions(transforms.flap_cycles(timeline, flap_span_ms=300_000)).collect()

    assert [(r["rank"], r["partition"], r["cycles"]) for r in ranked] == [(1, 0, 3), (2, 1, 1), (3, 2, 1)]
    assert ranked[0]["min_isr"] == 1.0
    assert ranked[0]["mean_recovery_seconds"] == pytest.approx(70 / 3)


def test_a_longer_flap_span_counts_the_slow_recovery_too(timeline: DataFrame) -> None:
    ranked = transforms.flapping_partitions(transforms.flap_cycles(timeline, flap_span_ms=400_000)).collect()
    assert ranked[0]["cycles"] == 4


def test_partition_windows_count_observed_changes_and_seconds(
    spark: SparkSession, timeline: DataFrame
) -> None:
    samples = prepared(spark, [(s, "1", URP, _tp(0), 1, "gauge") for s in (20, 30)])
    scrapes = transforms.broker_scrapes(samples, at(130), max_hold_ms=20_000, last_hold_ms=10_000)
    seconds = transforms.partition_gauge_seconds(
        transforms.partition_samples(samples), scrapes, parameters(130)
    )
    present = {URP, ISR}

    rows = by_key(
        transforms.partition_windows(timeline, seconds, parameters(130), present)
        .where("partition = 0")
        .collect(),
        "window_start",
    )
    by_offset = {start.timestamp() - T0 / 1000: row for (start,), row in rows.items()}

    assert sorted(by_offset) == [0.0, 60.0]
    first = by_offset[0.0]
    assert (first["isr_shrinks_observed"], first["isr_expands_observed"]) == (1, 1)
    assert (first["isr_min"], first["isr_max"], first["n_samples"]) == (2.0, 3.0, 5)
    assert first["seconds_under_replicated"] == 20.0
    assert first["seconds_under_min_isr"] is None  # never scraped: unknown, not 0
    second = by_offset[60.0]
    # 100 s and 110 s; the expansion at 130 s is in the still-open window.
    assert (second["isr_shrinks_observed"], second["isr_expands_observed"]) == (2, 0)
    assert second["seconds_under_replicated"] == 0.0  # scraped, never non-zero


# --- brokers and the cluster ----------------------------------------------------------------------

CHECKS = M.PROPAGATION_CHECKS.name
PENDING = M.PENDING_ISR_CHANGES.name
ELECTIONS = M.LEADER_ELECTION.name


def test_broker_and_cluster_windows_combine_counters_gauges_and_partitions(spark: SparkSession) -> None:
    samples: list[Sample] = []
    for s in (0, 20, 40, 60, 80, 100):
        step = s // 20
        for broker, controller in (("1", True), ("2", False)):
            samples += [
                (s, broker, SHRINKS, {}, step * (2 if broker == "1" else 1), "counter"),
                (s, broker, CHECKS, {"outcome": "written"}, step, "counter"),
                (s, broker, CHECKS, {"outcome": "deferred"}, 3 * step, "counter"),
                (s, broker, CHECKS, {"outcome": "forced"}, 0, "counter"),
                (s, broker, PENDING, {}, step % 2, "gauge"),
                (s, broker, OFFLINE, {}, 2 if controller and s == 20 else 0, "gauge"),
                (s, broker, URP, _tp(int(broker)), 1 if s < 60 else 0, "gauge"),
                (s, broker, ELECTIONS + "_count", {}, step if controller else 0, "histogram"),
            ]
    frame = prepared(spark, samples)
    p = parameters(120)
    small = frame.where(f"metric != '{URP}'")
    scrapes = transforms.broker_scrapes(frame, at(120), max_hold_ms=40_000, last_hold_ms=20_000)
    series = transforms.counter_windows(
        transforms.counter_deltas(transforms.dedupe_samples(small.where("type != 'gauge'"))), p
    )
    gauges = transforms.gauge_windows(transforms.dedupe_samples(small.where("type = 'gauge'")), scrapes, p)
    histograms = transforms.histogram_windows(series, p)
    seconds = transforms.partition_gauge_seconds(transforms.partition_samples(frame), scrapes, p)
    present = {row["metric"] for row in frame.select("metric").distinct().collect()}

    brokers = transforms.broker_windows(scrapes, series, gauges, histograms, seconds, p, present)
    broker_rows = by_key(brokers.collect(), "broker", "window_start_ms")
    cluster_rows = {
        offset_s(r["window_start_ms"]): r.asDict()
        for r in transforms.cluster_windows(brokers.cache(), series, p).collect()
    }

    one, two = broker_rows[("1", at(0))], broker_rows[("2", at(0))]
    assert (one["isr_shrinks"], two["isr_shrinks"]) == (4.0, 2.0)  # first sample has no delta
    assert (one["propagations_written"], one["propagations_deferred"], one["propagations_forced"]) == (
        2.0,
        6.0,
        0.0,
    )
    assert (one["offline_partitions_max"], two["offline_partitions_max"]) == (2.0, 0.0)
    assert one["offline_partitions_mean"] == pytest.approx(2 * 20 / 60)
    assert (one["pending_isr_changes_max"], one["leader_elections"], two["leader_elections"]) == (
        1.0,
        2.0,
        0.0,
    )
    assert (one["seconds_under_replicated"], one["n_samples"], one["validity"]) == (60.0, 3, "valid")
    assert broker_rows[("1", at(60))]["seconds_under_replicated"] == 0.0
    assert broker_rows[("1", at(60))]["isr_shrinks"] == 6.0  # 2 per 20 s, including 40 -> 60
    assert one["propagation_delay_p50"] is None  # the histogram was never exported: no quantile

    assert sorted(cluster_rows) == [0, 60]
    first = cluster_rows[0]
    assert (first["brokers"], first["isr_shrinks"], first["offline_partitions_max"]) == (2, 6.0, 2.0)
    assert (first["seconds_under_replicated"], first["leader_elections"], first["validity"]) == (
        120.0,
        2.0,
        "valid",
    )
    assert first["offline_partitions_mean"] == pytest.approx(2 * 20 / 60)
