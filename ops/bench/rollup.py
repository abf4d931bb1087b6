"""Rollup benchmark: a synthetic day of snapshots, then the PySpark rollup over it on ``local[2]``.

    python -m ops.bench.rollup [--brokers 3] [--partitions 3000] [--interval 10] [--hours 24]
                               [--master local[2]] [--dir DIR] [--keep] [--skip-generate]

Generation is vectorised (numpy + pyarrow), not row-by-row Python: per broker, the label maps and
metric names of every series are built once as Arrow arrays, and each round only computes a value
array and writes one file, in the exporter's layout (``date=/hour=/<broker>-<epoch_ms>.parquet``).
Files are written without fsync (a benchmark fixture, not a durable store); the bench then runs
``ops.rollup.job.run_rollup`` with windows 1m and 1h and prints rows, wall time and rows/s.

What a broker exports here: for every hosted partition the three per-partition gauges the rollup
reads (``underreplicated``, ``underminisr``, ``insyncreplicascount``; followers report 0), ISR
churn and propagation counters, the propagation-delay, leader-election and request-duration
histograms, per-topic byte counters and the broker-level gauges. The story of the day: random ISR
shrinks that recover after about a minute, a handful of flapping partitions, and one broker that
is down for 10 minutes (a gap in its snapshots; its counters restart from 0 when it returns, its
partitions' ISRs shrink while it is away and expand when it is back).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ops.metric_catalog import MetricSpec
from ops.rollup import metrics as M
from ops.rollup.schema import SNAPSHOT_ARROW_SCHEMA
from ops.snapshots import snapshot_files, snapshot_path
from runtime.histogram import LATENCY_BUCKETS_SECONDS, PROPAGATION_BUCKETS_SECONDS

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
REPLICATION_FACTOR = 3
PARTITIONS_PER_TOPIC = 100
REQUESTS = ("Produce", "FetchConsumer", "FetchFollower", "Metadata")
ELECTION_BUCKETS_SECONDS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0)


@dataclass(frozen=True, slots=True)
class GenerationStats:
    rows: int
    files: int
    bytes: int
    seconds: float


@dataclass
class _SeriesBlock:
    """Static columns of a broker's file (metric, labels, type) and where its values come from."""

    metrics: list[str] = field(default_factory=list)
    labels: list[list[tuple[str, str]]] = field(default_factory=list)
    types: list[str] = field(default_factory=list)

    def add(self, name: str, labels: dict[str, str], family_type: str) -> int:
        self.metrics.append(name)
        self.labels.append(list(labels.items()))
        self.types.append(family_type)
        return len(self.metrics) - 1


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(float(bound))


class _Histogram:
    """Cumulative bucket counts for one histogram series, advanced with vectorised draws."""

    def __init__(self, bounds: tuple[float, ...], weights: np.ndarray) -> None:
        self.bounds = (*bounds, math.inf)
        self.probabilities = weights / weights.sum()
        self.counts = np.zeros(len(self.bounds), dtype=np.float64)  # per bucket, not cumulative
        self.sum = 0.0
        midpoints = [bounds[0] / 2, *((a + b) / 2 for a, b in itertools.pairwise(bounds))]
        self.midpoints = np.array([*midpoints, bounds[-1] * 1.5])

    def observe(self, rng: np.random.Generator, n: int) -> None:
        if n <= 0:
            return
        drawn = rng.multinomial(n, self.probabilities)
        self.counts += drawn
        self.sum += float(drawn @ self.midpoints)

    def reset(self) -> None:
        self.counts[:] = 0
        self.sum = 0.0

    def values(self) -> list[float]:
        """Cumulative buckets, then _count and _sum (the order ``_register`` added them)."""
        cumulative = np.cumsum(self.counts)
        return [*cumulative.tolist(), float(cumulative[-1]), self.sum]


class SyntheticCluster:
    """A simulated cluster state, advanced one scrape round at a time, with one table per broker."""

    def __init__(self, brokers: int, partitions: int, interval_s: int, rounds: int, seed: int) -> None:
        self.brokers = brokers
        self.partitions = partitions
        self.interval_s = interval_s
        self.rng = np.random.default_rng(seed)
        self.rf = min(REPLICATION_FACTOR, brokers)
        self.topics = [f"topic-{i:03d}" for i in range(math.ceil(partitions / PARTITIONS_PER_TOPIC))]
        self.topic_of = np.arange(partitions) // PARTITIONS_PER_TOPIC
        self.preferred = np.arange(partitions) % brokers
        self.replicas = (self.preferred[:, None] + np.arange(self.rf)[None, :]) % brokers
        self.leader = self.preferred.copy()
        self.isr = np.full(partitions, self.rf, dtype=np.int64)
        self.recover_round = np.full(partitions, -1, dtype=np.int64)
        flappy = self.rng.choice(partitions, size=min(5, partitions), replace=False)
        self.shrink_probability = np.full(partitions, 2e-5)
        self.shrink_probability[flappy] = 0.02
        # One broker (the last) is away for 10 minutes in the middle of the run.
        self.down_broker = brokers - 1 if brokers > 1 else None
        middle = rounds // 2
        self.down_rounds = range(middle, middle + max(1, 600 // interval_s)) if rounds > 4 else range(0)
        self.counters = np.zeros((brokers, 3))  # shrinks, expands, failed
        self.checks = np.zeros((brokers, 3))  # written, deferred, forced
        self.pending = np.zeros(brokers)
        self.pending_since = np.full(brokers, -1.0)
        self.last_propagation = np.zeros(brokers)
        self.bytes = np.zeros((brokers, len(self.topics), 4))
        self.requests = [
            [_Histogram(LATENCY_BUCKETS_SECONDS, self._latency_weights(r)) for r in range(len(REQUESTS))]
            for _ in range(brokers)
        ]
        self.propagation = [
            _Histogram(PROPAGATION_BUCKETS_SECONDS, np.ones(len(PROPAGATION_BUCKETS_SECONDS) + 1))
            for _ in range(brokers)
        ]
        self.elections = _Histogram(ELECTION_BUCKETS_SECONDS, np.array([5.0, 10, 5, 2, 1, 0.5, 0.1]))
        self.blocks = [self._layout(broker) for broker in range(brokers)]

    def _latency_weights(self, request: int) -> np.ndarray:
        peak = 3 + request  # different requests peak in different buckets
        positions = np.arange(len(LATENCY_BUCKETS_SECONDS) + 1)
        return np.exp(-0.5 * ((positions - peak) / 1.5) ** 2) + 1e-4

    def _layout(self, broker: int) -> tuple[_SeriesBlock, np.ndarray, pa.Array, pa.Array, pa.Array]:
        """The broker's series in file order, and the Arrow arrays that never change."""
        block = _SeriesBlock()
        hosted = np.flatnonzero((self.replicas == broker).any(axis=1))
        for spec in (M.PARTITION_UNDER_REPLICATED, M.PARTITION_UNDER_MIN_ISR, M.PARTITION_ISR_COUNT):
            for p in hosted:
                labels = {"topic": self.topics[self.topic_of[p]], "partition": str(p % PARTITIONS_PER_TOPIC)}
                block.add(spec.name, labels, "gauge")
        for spec in (M.ISR_SHRINKS, M.ISR_EXPANDS, M.FAILED_ISR_UPDATES):
            block.add(spec.name, {}, "counter")
        for outcome in M.PROPAGATION_OUTCOMES:
            block.add(M.PROPAGATION_CHECKS.name, {"outcome": outcome}, "counter")
        for spec in (
            M.PENDING_ISR_CHANGES,
            M.UNDER_REPLICATED_PARTITIONS,
            M.UNDER_MIN_ISR_PARTITIONS,
            M.OFFLINE_PARTITIONS,
        ):
            block.add(spec.name, {}, "gauge")
        for topic in self.topics:
            for spec in (M.BYTES_IN, M.BYTES_OUT, M.REPLICATION_BYTES_IN, M.REPLICATION_BYTES_OUT):
                block.add(spec.name, {"topic": topic}, "counter")
        for request in REQUESTS:
            self._register(block, M.REQUEST_DURATION, LATENCY_BUCKETS_SECONDS, {"request": request})
        self._register(block, M.PROPAGATION_DELAY, PROPAGATION_BUCKETS_SECONDS, {})
        self._register(block, M.LEADER_ELECTION, ELECTION_BUCKETS_SECONDS, {})
        metric = pa.array(block.metrics, type=pa.string()).dictionary_encode().cast(pa.string())
        labels = pa.array(block.labels, type=SNAPSHOT_ARROW_SCHEMA.field("labels").type)
        types = pa.array(block.types, type=pa.string())
        return block, hosted, metric, labels, types

    @staticmethod
    def _register(
        block: _SeriesBlock, spec: MetricSpec, bounds: tuple[float, ...], labels: dict[str, str]
    ) -> None:
        for bound in (*bounds, math.inf):
            block.add(spec.name + "_bucket", {**labels, "le": _le(bound)}, "histogram")
        block.add(spec.name + "_count", labels, "histogram")
        block.add(spec.name + "_sum", labels, "histogram")

    def step(self, round_index: int) -> None:
        """Advance the state by one scrape interval."""
        now_s = round_index * self.interval_s
        down = self.down_broker is not None and round_index in self.down_rounds
        if self.down_broker is not None and round_index == self.down_rounds.start:
            self._broker_leaves(self.down_broker)
        if self.down_broker is not None and len(self.down_rounds) and round_index == self.down_rounds.stop:
            self._broker_returns(self.down_broker, round_index)
        recovered = self.recover_round == round_index
        self.isr[recovered] = self.rf
        self.recover_round[recovered] = -1
        shrinking = (self.rng.random(self.partitions) < self.shrink_probability) & (self.isr > 1)
        shrinking &= self.recover_round < 0
        self.isr[shrinking] -= 1
        self.recover_round[shrinking] = round_index + self.rng.integers(2, 12, size=int(shrinking.sum()))
        changes = np.bincount(self.leader[shrinking | recovered], minlength=self.brokers)
        self.counters[:, 0] += np.bincount(self.leader[shrinking], minlength=self.brokers)
        self.counters[:, 1] += np.bincount(self.leader[recovered], minlength=self.brokers)
        self.counters[:, 2] += self.rng.random(self.brokers) < 0.001
        self._propagate(changes, now_s)
        for broker in range(self.brokers):
            if down and broker == self.down_broker:
                continue
            for histogram in self.requests[broker]:
                histogram.observe(self.rng, int(self.rng.poisson(50)))
            self.bytes[broker] += self.rng.poisson(1e5, size=self.bytes[broker].shape)

    def _propagate(self, changes: np.ndarray, now_s: float) -> None:
        # Four checks per 10 s round: with changes this round they are deferred (black-out) unless
        # the 60 s bound forces a write; a quiet round writes what is pending.
        checks = max(1, self.interval_s * 1000 // 2500)
        for broker in range(self.brokers):
            if changes[broker]:
                if self.pending[broker] == 0:
                    self.pending_since[broker] = now_s
                self.pending[broker] += changes[broker]
                if now_s - self.last_propagation[broker] > 60:
                    self.checks[broker, 2] += 1
                    self.checks[broker, 1] += checks - 1
                    self._propagated(broker, now_s)
                else:
                    self.checks[broker, 1] += checks
            elif self.pending[broker]:
                self.checks[broker, 0] += 1
                self._propagated(broker, now_s + 5)

    def _propagated(self, broker: int, now_s: float) -> None:
        delay = now_s - self.pending_since[broker]
        bounds = np.array((*PROPAGATION_BUCKETS_SECONDS, math.inf))
        self.propagation[broker].counts[int(np.searchsorted(bounds, delay))] += 1
        self.propagation[broker].sum += delay
        self.pending[broker] = 0
        self.last_propagation[broker] = now_s

    def _broker_leaves(self, broker: int) -> None:
        led = self.leader == broker
        alternatives = self.replicas[led]
        self.leader[led] = np.where(alternatives[:, 1] == broker, alternatives[:, 0], alternatives[:, 1])
        self.elections.observe(self.rng, int(led.sum()))
        hosted = (self.replicas == broker).any(axis=1)
        self.isr[hosted] = np.maximum(self.isr[hosted] - 1, 1)
        self.recover_round[hosted] = -1
        # The new leaders shrink the ISRs (the leaving broker's own counters stop with it).
        self.counters[:, 0] += np.bincount(self.leader[hosted], minlength=self.brokers)

    def _broker_returns(self, broker: int, round_index: int) -> None:
        # A restart: every counter and histogram of this broker starts again from zero.
        self.counters[broker] = 0
        self.checks[broker] = 0
        self.bytes[broker] = 0
        for histogram in (*self.requests[broker], self.propagation[broker]):
            histogram.reset()
        hosted = np.flatnonzero((self.replicas == broker).any(axis=1))
        self.recover_round[hosted] = round_index + self.rng.integers(3, 12, size=len(hosted))

    def table(self, broker: int, ts_ms: int) -> pa.Table | None:
        """The broker's snapshot at ``ts_ms``, or None while it is down."""
        round_index = (ts_ms - START_MS) // (self.interval_s * 1000)
        if self.down_broker == broker and round_index in self.down_rounds:
            return None
        block, hosted, metric, labels, types = self.blocks[broker]
        leads = self.leader[hosted] == broker
        isr = self.isr[hosted]
        led_isr = np.where(leads, isr, 0)
        per_partition = [
            (leads & (isr < self.rf)).astype(np.float64),
            (leads & (isr < min(2, self.rf))).astype(np.float64),
            led_isr.astype(np.float64),
        ]
        led_all = self.leader == broker
        offline = 2.0 if broker == 0 and round_index % 2000 == 1000 else 0.0
        scalars = [
            *self.counters[broker],
            *self.checks[broker],
            self.pending[broker],
            float((led_all & (self.isr < self.rf)).sum()),
            float((led_all & (self.isr < min(2, self.rf))).sum()),
            offline,
            *self.bytes[broker].ravel(),
        ]
        histograms: list[float] = []
        for histogram in self.requests[broker]:
            histograms += histogram.values()
        histograms += self.propagation[broker].values()
        histograms += self.elections.values() if broker == 0 else [0.0] * (len(ELECTION_BUCKETS_SECONDS) + 3)
        values = np.concatenate([*per_partition, np.array(scalars), np.array(histograms)])
        assert len(values) == len(block.metrics)
        count = len(values)
        ts = pa.array(np.full(count, ts_ms, dtype=np.int64)).cast(SNAPSHOT_ARROW_SCHEMA.field("ts").type)
        broker_column = pa.array(np.full(count, str(broker), dtype=object), type=pa.string())
        return pa.Table.from_arrays(
            [ts, broker_column, metric, labels, pa.array(values, type=pa.float64()), types],
            schema=SNAPSHOT_ARROW_SCHEMA,
        )


def _write(table: pa.Table, path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="zstd")
    return path.stat().st_size


def generate(
    out_dir: Path, *, brokers: int, partitions: int, interval_s: int, hours: float, seed: int = 7
) -> GenerationStats:
    """Write the synthetic snapshots under ``out_dir``; returns what was written."""
    started = time.perf_counter()
    rounds = int(hours * 3600 // interval_s)
    cluster = SyntheticCluster(brokers, partitions, interval_s, rounds, seed)
    rows = files = size = 0

    def tables() -> Iterator[tuple[pa.Table, Path]]:
        for round_index in range(rounds):
            cluster.step(round_index)
            ts_ms = START_MS + round_index * interval_s * 1000
            for broker in range(brokers):
                table = cluster.table(broker, ts_ms)
                if table is not None:
                    yield table, snapshot_path(out_dir, str(broker), ts_ms)

    # pyarrow releases the GIL while encoding and compressing: two writers keep both cores busy
    # while this thread computes the next round.
    with ThreadPoolExecutor(max_workers=2) as pool:
        pending = []
        for table, path in tables():
            rows += table.num_rows
            files += 1
            pending.append(pool.submit(_write, table, path))
            if len(pending) >= 64:
                size += sum(future.result() for future in pending)
                pending.clear()
        size += sum(future.result() for future in pending)
    return GenerationStats(rows=rows, files=files, bytes=size, seconds=time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.bench.rollup", description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--interval", type=int, default=10, help="scrape interval, seconds")
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--shuffle-partitions", type=int, default=None)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the snapshots and the output")
    parser.add_argument("--skip-generate", action="store_true", help="reuse snapshots already in --dir")
    arguments = parser.parse_args(argv)

    work = arguments.dir or Path(tempfile.mkdtemp(prefix="actorlog-rollup-bench-"))
    snapshots, out = work / "snapshots", work / "out"
    try:
        if not arguments.skip_generate:
            shutil.rmtree(snapshots, ignore_errors=True)
            stats = generate(
                snapshots,
                brokers=arguments.brokers,
                partitions=arguments.partitions,
                interval_s=arguments.interval,
                hours=arguments.hours,
            )
            print(
                f"generated {stats.rows:,} rows in {stats.files:,} files, {stats.bytes / 2**20:,.1f} MiB, "
                f"in {stats.seconds:.1f} s ({stats.rows / stats.seconds:,.0f} rows/s)",
                flush=True,
            )
        files = snapshot_files(snapshots)
        rows = sum(pq.ParquetFile(path).metadata.num_rows for path in files)
        size = sum(path.stat().st_size for path in files)
        # Imported here: generating needs no JVM.
        from ops.rollup.job import Progress, RollupOptions, run_rollup
        from ops.rollup.session import build_session, plan_session
        from ops.rollup.transforms import TumblingWindow

        plan = plan_session(
            arguments.master,
            os.environ,
            shuffle_partitions=arguments.shuffle_partitions,
            extra_config={"spark.driver.memory": arguments.driver_memory},
        )
        spark = build_session(plan)
        options = RollupOptions(
            snapshots=snapshots,
            out=out,
            windows=(TumblingWindow("1m", 60_000), TumblingWindow("1h", 3_600_000)),
            scrape_interval_ms=arguments.interval * 1000,
        )
        started = time.perf_counter()
        summary = run_rollup(spark, options, Progress())
        wall = time.perf_counter() - started
        spark.stop()
        print(
            f"rollup: {rows:,} rows ({len(files):,} files, {size / 2**20:,.1f} MiB) on {arguments.master} "
            f"in {wall:.1f} s = {rows / wall:,.0f} rows/s "
            f"({arguments.brokers} brokers, {arguments.partitions} partitions, {arguments.interval} s "
            f"interval, {arguments.hours:g} h; flapping partitions found: {len(summary.flapping)})",
            flush=True,
        )
    finally:
        if not arguments.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
