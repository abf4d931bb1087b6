"""Rollup benchmark: a synthetic day of snapshots and state-change events, then the PySpark rollup.

    python -m ops.bench.rollup [--brokers 3] [--partitions 3000 | --partitions 1000,3000]
                               [--interval 10] [--hours 24] [--shrinks-per-day 3] [--no-events]
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

State-change events (unless ``--no-events``) come from the same state machine, which then tracks
each partition's ISR members, leader epoch and znode version: every partition shrinks and expands
its ISR ``--shrinks-per-day`` times a day on average (the leader's ``isr_shrink``/``isr_expand``,
counted by the ISR counters too); the broker that leaves makes the controller (broker 0) elect new
leaders and remove it from the other ISRs (``leader_election``/``controller_isr_shrink``,
``broker_down``), and five minutes after it is back, move leadership back (``preferred``); every
leader's ISR change notification is a ``propagation`` event (``written`` after 5 s of quiet, or
``forced``), and the controller's read of the notified partitions a ``state_learned`` event each
(plus one per partition at the start of the day: the controller's initial read). Each broker's
events are collected every round into one ``<broker>-<epoch_ms>.state-changes.parquet`` file (the
exporter's cadence); the broker that is down records nothing and, back, is a new incarnation.

With several ``--partitions`` sizes, each is generated and rolled up in turn in one Spark session,
after an unmeasured warm-up hour (the first rollup in a JVM pays for class loading and JIT), and the
marginal cost per 1,000 partitions is printed from the smallest and the largest.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ops.metric_catalog import MetricSpec
from ops.rollup import metrics as M
from ops.rollup.schema import SNAPSHOT_ARROW_SCHEMA
from ops.snapshots import (
    snapshot_files,
    snapshot_path,
    state_change_files,
    state_changes_path,
    state_changes_to_table,
)
from runtime.histogram import LATENCY_BUCKETS_SECONDS, PROPAGATION_BUCKETS_SECONDS

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
REPLICATION_FACTOR = 3
PARTITIONS_PER_TOPIC = 100
REQUESTS = ("Produce", "FetchConsumer", "FetchFollower", "Metadata")
ELECTION_BUCKETS_SECONDS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0)
MIN_INSYNC_REPLICAS = 2
CONTROLLER = 0
PREFERRED_ELECTION_DELAY_S = 300  # auto.leader.rebalance: leadership moves back after 5 minutes


@dataclass(frozen=True, slots=True)
class GenerationStats:
    rows: int
    files: int
    bytes: int
    seconds: float
    events: int = 0
    event_files: int = 0


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

    def __init__(
        self,
        brokers: int,
        partitions: int,
        interval_s: int,
        rounds: int,
        seed: int,
        *,
        events: bool = False,
        shrinks_per_day: float | None = None,
    ) -> None:
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
        base = 2e-5 if shrinks_per_day is None else shrinks_per_day * interval_s / 86_400
        self.shrink_probability = np.full(partitions, base)
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
        # ISR members by replica slot, and what a partition state znode holds besides the ISR.
        self.members = np.ones((partitions, self.rf), dtype=bool)
        self.epoch = np.zeros(partitions, dtype=np.int64)
        self.zk_version = np.zeros(partitions, dtype=np.int64)
        self.events = _EventRecorder(self, brokers) if events else None
        self.event_rng = np.random.default_rng(seed + 1)
        self.preferred_round = -1
        if self.events is not None:
            # The controller's first read of every partition state (its startup).
            for p in range(partitions):
                self.events.partition(CONTROLLER, START_MS, "state_learned", p, "zookeeper")

    # --- partition state ----------------------------------------------------------------------

    def isr_members(self, p: int) -> list[int]:
        return [int(r) for r, member in zip(self.replicas[p], self.members[p], strict=True) if member]

    def _sync_isr(self) -> None:
        self.isr = self.members.sum(axis=1).astype(np.int64)

    def _change_ms(self, now_s: int) -> int:
        """A change seen by the scrape at ``now_s`` happened during the interval before it."""
        offset = int(self.event_rng.integers(1, self.interval_s * 1000)) if now_s > 0 else 0
        return START_MS + now_s * 1000 - offset

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
            self._broker_leaves(self.down_broker, round_index)
        if self.down_broker is not None and len(self.down_rounds) and round_index == self.down_rounds.stop:
            self._broker_returns(self.down_broker, round_index)
        if round_index == self.preferred_round:
            self._preferred_elections(now_s)
        recovered = self.recover_round == round_index
        # Back to every replica that is up (while a broker is down, it stays out).
        expanded = np.zeros(self.partitions, dtype=bool)
        for p in np.flatnonzero(recovered).tolist():
            before = self.isr_members(p)
            self.members[p] = (self.replicas[p] != self.down_broker) if down else True
            if self.isr_members(p) != before:
                expanded[p] = True
                self._leader_write(p, now_s, "isr_expand", "caught_up", before)
        self.recover_round[recovered] = -1
        shrinking = (self.rng.random(self.partitions) < self.shrink_probability) & (self.isr > 1)
        shrinking &= self.recover_round < 0
        for p in np.flatnonzero(shrinking).tolist():
            followers = np.flatnonzero(self.members[p] & (self.replicas[p] != self.leader[p]))
            before = self.isr_members(p)
            self.members[p, followers[int(self.event_rng.integers(len(followers)))]] = False
            reason = "fetch_stopped" if self.event_rng.random() < 0.2 else "lag"
            self._leader_write(p, now_s, "isr_shrink", reason, before)
        self._sync_isr()
        self.recover_round[shrinking] = round_index + self.rng.integers(2, 12, size=int(shrinking.sum()))
        changes = np.bincount(self.leader[shrinking | expanded], minlength=self.brokers)
        self.counters[:, 0] += np.bincount(self.leader[shrinking], minlength=self.brokers)
        self.counters[:, 1] += np.bincount(self.leader[expanded], minlength=self.brokers)
        self.counters[:, 2] += self.rng.random(self.brokers) < 0.001
        self._propagate(changes, now_s)
        for broker in range(self.brokers):
            if down and broker == self.down_broker:
                continue
            for histogram in self.requests[broker]:
                histogram.observe(self.rng, int(self.rng.poisson(50)))
            self.bytes[broker] += self.rng.poisson(1e5, size=self.bytes[broker].shape)

    def _leader_write(self, p: int, now_s: int, kind: str, reason: str, before: list[int]) -> None:
        """A leader's own ISR write: a new znode version, the event, a pending notification."""
        self.zk_version[p] += 1
        if self.events is not None:
            leader = int(self.leader[p])
            self.events.partition(leader, self._change_ms(now_s), kind, p, reason, previous_isr=before)
            self.events.pending[leader].add(p)

    def _controller_write(self, p: int, now_s: int, kind: str, reason: str, before: list[int]) -> None:
        """The controller's write of a partition state: a new leader epoch and znode version."""
        self.epoch[p] += 1
        self.zk_version[p] += 1
        if self.events is not None:
            self.events.partition(CONTROLLER, self._change_ms(now_s), kind, p, reason, previous_isr=before)
            self.events.seen[p] = self.zk_version[p]

    def _preferred_elections(self, now_s: int) -> None:
        slot = np.arange(self.partitions)
        moved = (self.leader != self.preferred) & self.members[slot, 0]
        for p in np.flatnonzero(moved).tolist():
            before = self.isr_members(p)
            self.leader[p] = self.preferred[p]
            self._controller_write(p, now_s, "leader_election", "preferred", before)
        self.elections.observe(self.rng, int(moved.sum()))

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
                    self._propagated(broker, now_s, "forced")
                else:
                    self.checks[broker, 1] += checks
            elif self.pending[broker]:
                self.checks[broker, 0] += 1
                self._propagated(broker, now_s + 5, "written")

    def _propagated(self, broker: int, now_s: float, outcome: str) -> None:
        if self.events is not None:
            self.events.propagated(broker, START_MS + int(now_s * 1000), outcome)
        delay = now_s - self.pending_since[broker]
        bounds = np.array((*PROPAGATION_BUCKETS_SECONDS, math.inf))
        self.propagation[broker].counts[int(np.searchsorted(bounds, delay))] += 1
        self.propagation[broker].sum += delay
        self.pending[broker] = 0
        self.last_propagation[broker] = now_s

    def _broker_leaves(self, broker: int, round_index: int) -> None:
        now_s = round_index * self.interval_s
        led = self.leader == broker
        alternatives = self.replicas[led]
        self.leader[led] = np.where(alternatives[:, 1] == broker, alternatives[:, 0], alternatives[:, 1])
        self.elections.observe(self.rng, int(led.sum()))
        hosted = (self.replicas == broker).any(axis=1)
        # The controller elects new leaders and removes the broker from the other ISRs (a
        # one-member ISR is left as is); the leaders' ISR counters do not count the controller's.
        for p in np.flatnonzero(hosted).tolist():
            before = self.isr_members(p)
            if len(before) > 1:
                self.members[p] &= self.replicas[p] != broker
            kind = "leader_election" if led[p] else "controller_isr_shrink"
            self._controller_write(p, now_s, kind, "broker_down", before)
        self._sync_isr()
        self.recover_round[hosted] = -1
        if self.events is not None:
            self.events.died(broker)

    def _broker_returns(self, broker: int, round_index: int) -> None:
        # A restart: every counter and histogram of this broker starts again from zero.
        self.counters[broker] = 0
        self.checks[broker] = 0
        self.bytes[broker] = 0
        for histogram in (*self.requests[broker], self.propagation[broker]):
            histogram.reset()
        hosted = np.flatnonzero((self.replicas == broker).any(axis=1))
        self.recover_round[hosted] = round_index + self.rng.integers(3, 12, size=len(hosted))
        self.preferred_round = round_index + PREFERRED_ELECTION_DELAY_S // self.interval_s
        if self.events is not None:
            self.events.restarted(broker, START_MS + round_index * self.interval_s * 1000)

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


class _EventRecorder:
    """Each broker's state-change events not yet collected, numbered per incarnation."""

    def __init__(self, cluster: SyntheticCluster, brokers: int) -> None:
        self.cluster = cluster
        # Process start times: before the day, and the return time after a restart.
        self.incarnation = [START_MS - 3_600_000 + broker for broker in range(brokers)]
        self.sequence = [0] * brokers
        self.held: list[list[dict[str, object]]] = [[] for _ in range(brokers)]
        # Partitions a leader changed since its last ISR change notification.
        self.pending: list[set[int]] = [set() for _ in range(brokers)]
        # The znode version the controller last wrote or read, per partition.
        self.seen = np.full(cluster.partitions, -1, dtype=np.int64)

    def _name(self, p: int) -> str:
        cluster = self.cluster
        return f"{cluster.topics[cluster.topic_of[p]]}-{p % PARTITIONS_PER_TOPIC}"

    def _record(self, broker: int, ts_ms: int, kind: str, **fields: object) -> None:
        self.sequence[broker] += 1
        self.held[broker].append(
            {
                "ts": ts_ms,
                "broker": str(broker),
                "incarnation": self.incarnation[broker],
                "sequence": self.sequence[broker],
                "kind": kind,
                **fields,
            }
        )

    def partition(
        self, broker: int, ts_ms: int, kind: str, p: int, reason: str, previous_isr: list[int] | None = None
    ) -> None:
        """An event about partition ``p`` in its current state."""
        cluster = self.cluster
        self._record(
            broker,
            ts_ms,
            kind,
            topic=cluster.topics[cluster.topic_of[p]],
            partition=int(p % PARTITIONS_PER_TOPIC),
            leader=int(cluster.leader[p]),
            leader_epoch=int(cluster.epoch[p]),
            zk_version=int(cluster.zk_version[p]),
            isr=cluster.isr_members(p),
            previous_isr=previous_isr,
            replicas=[int(r) for r in cluster.replicas[p]],
            min_insync_replicas=MIN_INSYNC_REPLICAS,
            reason=reason,
        )

    def propagated(self, broker: int, ts_ms: int, outcome: str) -> None:
        """The broker's ISR change notification; the controller then reads the states it names."""
        partitions = sorted(self.pending[broker])
        self.pending[broker].clear()
        if not partitions:
            return
        self._record(
            broker, ts_ms, "propagation", partitions=[self._name(p) for p in partitions], reason=outcome
        )
        for p in partitions:
            if self.seen[p] != self.cluster.zk_version[p]:
                self.seen[p] = self.cluster.zk_version[p]
                self.partition(CONTROLLER, ts_ms + 100, "state_learned", p, "zookeeper")

    def died(self, broker: int) -> None:
        """The broker's process is gone: what it had not been collected of is lost."""
        self.held[broker].clear()
        self.pending[broker].clear()

    def restarted(self, broker: int, ts_ms: int) -> None:
        self.incarnation[broker] = ts_ms
        self.sequence[broker] = 0

    def collect(self, broker: int, ts_ms: int) -> list[dict[str, object]]:
        """The broker's events up to ``ts_ms`` (a collection round), oldest first."""
        held = self.held[broker]
        ready = [event for event in held if int(str(event["ts"])) <= ts_ms]
        if ready:
            self.held[broker] = [event for event in held if int(str(event["ts"])) > ts_ms]
        return sorted(ready, key=lambda event: int(str(event["sequence"])))


def _write(table: pa.Table, path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="zstd")
    return path.stat().st_size


def generate(
    out_dir: Path,
    *,
    brokers: int,
    partitions: int,
    interval_s: int,
    hours: float,
    seed: int = 7,
    events: bool = True,
    shrinks_per_day: float = 3.0,
) -> GenerationStats:
    """Write the synthetic snapshots (and state-change files) under ``out_dir``; returns what was
    written. Without ``events``, the ISR churn is the old benchmark's (about 0.17 shrinks per
    partition per day)."""
    started = time.perf_counter()
    rounds = int(hours * 3600 // interval_s)
    cluster = SyntheticCluster(
        brokers,
        partitions,
        interval_s,
        rounds,
        seed,
        events=events,
        shrinks_per_day=shrinks_per_day if events else None,
    )
    rows = files = size = event_rows = event_files = 0

    def tables() -> Iterator[tuple[pa.Table, Path, bool]]:
        for round_index in range(rounds):
            cluster.step(round_index)
            ts_ms = START_MS + round_index * interval_s * 1000
            for broker in range(brokers):
                table = cluster.table(broker, ts_ms)
                if table is None:
                    continue
                yield table, snapshot_path(out_dir, str(broker), ts_ms), False
                batch = [] if cluster.events is None else cluster.events.collect(broker, ts_ms)
                if batch:
                    yield state_changes_to_table(batch), state_changes_path(out_dir, str(broker), ts_ms), True

    # pyarrow releases the GIL while encoding and compressing: two writers keep both cores busy
    # while this thread computes the next round.
    with ThreadPoolExecutor(max_workers=2) as pool:
        pending = []
        for table, path, is_events in tables():
            if is_events:
                event_rows += table.num_rows
                event_files += 1
            else:
                rows += table.num_rows
                files += 1
            pending.append(pool.submit(_write, table, path))
            if len(pending) >= 64:
                size += sum(future.result() for future in pending)
                pending.clear()
        size += sum(future.result() for future in pending)
    return GenerationStats(
        rows=rows,
        files=files,
        bytes=size,
        seconds=time.perf_counter() - started,
        events=event_rows,
        event_files=event_files,
    )


@dataclass(frozen=True, slots=True)
class RunFigures:
    partitions: int
    rows: int  # snapshot rows
    events: int
    wall_seconds: float


def _partition_sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected partition counts like 3000 or 1000,3000, got {text!r}"
        ) from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError(f"expected positive partition counts, got {text!r}")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.bench.rollup", description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument(
        "--partitions",
        type=_partition_sizes,
        default=[3000],
        help="partition count, or several (1000,3000): each is generated and rolled up in turn",
    )
    parser.add_argument("--interval", type=int, default=10, help="scrape interval, seconds")
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument(
        "--shrinks-per-day", type=float, default=3.0, help="ISR shrink/expand pairs per partition per day (3)"
    )
    parser.add_argument(
        "--no-events", action="store_true", help="snapshots only, with the old benchmark's ISR churn"
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--shuffle-partitions", type=int, default=None)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the snapshots and the output")
    parser.add_argument("--skip-generate", action="store_true", help="reuse snapshots already in --dir")
    arguments = parser.parse_args(argv)

    work = arguments.dir or Path(tempfile.mkdtemp(prefix="actorlog-rollup-bench-"))
    figures: list[RunFigures] = []
    try:
        if len(arguments.partitions) > 1 and not arguments.skip_generate:
            # The first rollup in a JVM pays for class loading and JIT compilation: a small hour
            # first, unmeasured, so the sizes compared all run warm.
            print("warm-up (not measured): 30 partitions, 1 h", flush=True)
            warm = argparse.Namespace(**{**vars(arguments), "hours": 1.0})
            _run_size(warm, 30, work / "warm-up")
            shutil.rmtree(work / "warm-up", ignore_errors=True)
        for partitions in arguments.partitions:
            # One directory per size (a single size keeps the old layout, so --skip-generate still works).
            base = work if len(arguments.partitions) == 1 else work / f"partitions-{partitions}"
            figures.append(_run_size(arguments, partitions, base))
            if not arguments.keep and len(arguments.partitions) > 1:
                shutil.rmtree(base, ignore_errors=True)
        if len(figures) > 1:
            small, large = figures[0], figures[-1]
            per_thousand = 1000 / (large.partitions - small.partitions)
            print(
                f"cost per extra 1,000 partitions ({small.partitions:,} -> {large.partitions:,}): "
                f"{(large.wall_seconds - small.wall_seconds) * per_thousand:,.1f} s, "
                f"{(large.rows - small.rows) * per_thousand:,.0f} snapshot rows and "
                f"{(large.events - small.events) * per_thousand:,.0f} events",
                flush=True,
            )
    finally:
        _stop_session()
        if not arguments.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def _session(arguments: argparse.Namespace) -> Any:
    """A SparkSession for one rollup (generating needs no JVM, so it starts after). Each size gets a
    new SparkContext in the same JVM: nothing a previous run left in the heap (status store,
    blocks, broadcasts) is carried over, while the JIT's work is."""
    from ops.rollup.session import build_session, plan_session

    plan = plan_session(
        arguments.master,
        os.environ,
        shuffle_partitions=arguments.shuffle_partitions,
        extra_config={"spark.driver.memory": arguments.driver_memory},
    )
    return build_session(plan)


def _stop_session() -> None:
    if "pyspark" in sys.modules:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()


def _run_size(arguments: argparse.Namespace, partitions: int, work: Path) -> RunFigures:
    """Generate (unless --skip-generate) and roll up one partition count; prints its figures."""
    snapshots, out = work / "snapshots", work / "out"
    if not arguments.skip_generate:
        shutil.rmtree(snapshots, ignore_errors=True)
        stats = generate(
            snapshots,
            brokers=arguments.brokers,
            partitions=partitions,
            interval_s=arguments.interval,
            hours=arguments.hours,
            events=not arguments.no_events,
            shrinks_per_day=arguments.shrinks_per_day,
        )
        print(
            f"generated {stats.rows:,} rows in {stats.files:,} files and {stats.events:,} state-change "
            f"events in {stats.event_files:,} files, {stats.bytes / 2**20:,.1f} MiB, "
            f"in {stats.seconds:.1f} s ({stats.rows / stats.seconds:,.0f} rows/s)",
            flush=True,
        )
    files = snapshot_files(snapshots)
    rows = sum(pq.ParquetFile(path).metadata.num_rows for path in files)
    size = sum(path.stat().st_size for path in files)
    event_paths = state_change_files(snapshots)
    events = sum(pq.ParquetFile(path).metadata.num_rows for path in event_paths)
    # Imported here: generating needs no JVM.
    from ops.rollup.job import Progress, RollupOptions, rollup
    from ops.rollup.transforms import TumblingWindow

    spark = _session(arguments)
    options = RollupOptions(
        snapshots=snapshots,
        out=out,
        windows=(TumblingWindow("1m", 60_000), TumblingWindow("1h", 3_600_000)),
        scrape_interval_ms=arguments.interval * 1000,
    )
    started = time.perf_counter()
    result = rollup(spark, options, Progress())
    wall = time.perf_counter() - started
    spark.stop()
    for line in result.history_lines:
        print(line, flush=True)
    print(
        f"rollup: {rows:,} rows ({len(files):,} files, {size / 2**20:,.1f} MiB) and {events:,} state-change "
        f"events ({len(event_paths):,} files) on {arguments.master} in {wall:.1f} s = "
        f"{(rows + events) / wall:,.0f} rows/s ({arguments.brokers} brokers, {partitions} partitions, "
        f"{arguments.interval} s interval, {arguments.hours:g} h; flapping partitions found: "
        f"{len(result.summary.flapping)})",
        flush=True,
    )
    return RunFigures(partitions=partitions, rows=rows, events=events, wall_seconds=wall)


if __name__ == "__main__":
    raise SystemExit(main())
