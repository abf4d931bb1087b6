"""The ISR history from state-change events (``ops/rollup/isr_history.py``) on hand-built events.

One story of three partitions (``EVENTS``), every expected row worked out by hand in the comments;
then a synthetic run whose brokers' ISR counters and events agree, where the rollup's totals must
match both (the reconciliation test). The job end to end, events and snapshots on disk, is in
``test_rollup_job.py``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ops.rollup import isr_history, transforms
from ops.rollup import metrics as M
from ops.rollup.schema import STATE_CHANGE_COLUMNS, snapshot_struct_type, state_change_struct_type

pytestmark = pytest.mark.spark

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SECOND = 1000
HORIZON = T0 + 60 * SECOND
# Broker 1 restarts (a second incarnation) late in the story.
A1, B1, I2, I3 = 1_000, 2_000, 3_000, 4_000


def at(seconds: float) -> int:
    return T0 + int(seconds * SECOND)


@dataclass
class EventLog:
    """Events as the brokers record them: each (broker, incarnation) numbers its own from 1."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    sequences: Counter[tuple[str, int]] = field(default_factory=Counter)

    def add(
        self, seconds: float, broker: str, incarnation: int, kind: str, tp: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        self.sequences[(broker, incarnation)] += 1
        topic, partition = (None, None) if tp is None else (tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1]))
        row = {
            "ts": at(seconds),
            "broker": broker,
            "incarnation": incarnation,
            "sequence": self.sequences[(broker, incarnation)],
            "kind": kind,
            "topic": topic,
            "partition": partition,
            **fields,
        }
        self.rows.append(row)
        return row

    def collected_twice(self, row: dict[str, Any]) -> None:
        """The exporter read the same event again: an exact duplicate."""
        self.rows.append(dict(row))


def events_frame(spark: SparkSession, rows: Sequence[dict[str, Any]]) -> DataFrame:
    tuples = [
        tuple(
            datetime.fromtimestamp(row["ts"] / 1000, tz=UTC) if name == "ts" else row.get(name)
            for name in STATE_CHANGE_COLUMNS
        )
        for row in rows
    ]
    return isr_history.prepare_events(spark.createDataFrame(tuples, schema=state_change_struct_type()))


def story() -> list[dict[str, Any]]:
    """Three partitions of topic ``t``; broker 2 is the controller; the horizon is 60 s.

    t-0 (replicas 1,2,3, min ISR 2): created at 0 s; leader 1 drops 3 at 10 s (collected twice,
    and learned by the controller, whose clock is behind, at "9 s"); 2 leaves at 25 s, a write only
    known from the controllers' reads (25 s and, after a failover, 27 s); back to full at 40 s;
    broker 1 dies and the controller elects 2 at 52 s. t-1 (leader 3): its first event is a shrink
    at 35 s that names no replicas (the controller's read of the same state at 36 s does), full
    again at 45 s, 1 removed by the controller at 52 s. t-2 (leader 2, two replicas, min ISR 1): 3
    out from 45 s to 48 s. Propagations test the matching: same broker,
    same incarnation, the partition named, at or after the change, before the horizon.
    """
    log = EventLog()
    full = {"replicas": [1, 2, 3], "min_insync_replicas": 2}
    log.add(0, "2", I2, "leader_election", "t-0", leader=1, leader_epoch=0, zk_version=0,
            isr=[1, 2, 3], reason="new_partition", **full)  # fmt: skip
    shrink = log.add(10, "1", A1, "isr_shrink", "t-0", leader=1, leader_epoch=0, zk_version=1,
                     isr=[1, 2], previous_isr=[1, 2, 3], reason="lag")  # fmt: skip
    log.collected_twice(shrink)
    log.add(12, "1", A1, "propagation", partitions=["t-1"], reason="written")  # another partition
    log.add(9, "2", I2, "state_learned", "t-0", leader=1, leader_epoch=0, zk_version=1, isr=[1, 2],
            reason="zookeeper", **full)  # fmt: skip
    log.add(15, "1", A1, "propagation", partitions=["t-0"], reason="written")
    log.add(25, "2", I2, "state_learned", "t-0", leader=1, leader_epoch=0, zk_version=2, isr=[1],
            reason="zookeeper", **full)  # fmt: skip
    log.add(27, "3", I3, "state_learned", "t-0", leader=1, leader_epoch=0, zk_version=2, isr=[1],
            reason="zookeeper", **full)  # fmt: skip
    log.add(35, "3", I3, "isr_shrink", "t-1", leader=3, leader_epoch=5, zk_version=9, isr=[3, 1],
            previous_isr=[3, 1, 2], reason="lag")  # fmt: skip
    log.add(35, "3", I3, "propagation", partitions=["t-1"], reason="forced")  # the same instant
    log.add(36, "2", I2, "state_learned", "t-1", leader=3, leader_epoch=5, zk_version=9, isr=[3, 1],
            reason="zookeeper", replicas=[3, 1, 2], min_insync_replicas=2)  # fmt: skip
    log.add(40, "1", A1, "isr_expand", "t-0", leader=1, leader_epoch=0, zk_version=3, isr=[1, 2, 3],
            previous_isr=[1], reason="caught_up")  # fmt: skip
    log.add(41, "2", I2, "propagation", partitions=["t-0"], reason="written")  # another broker
    log.add(42, "1", B1, "propagation", partitions=["t-0"], reason="written")  # another incarnation
    log.add(45, "3", I3, "isr_expand", "t-1", leader=3, leader_epoch=5, zk_version=10,
            isr=[3, 1, 2], previous_isr=[3, 1], reason="caught_up")  # fmt: skip
    log.add(45, "2", I2, "isr_shrink", "t-2", leader=2, leader_epoch=0, zk_version=1, isr=[2],
            previous_isr=[2, 3], replicas=[2, 3], min_insync_replicas=1, reason="fetch_stopped")  # fmt: skip
    log.add(48, "2", I2, "isr_expand", "t-2", leader=2, leader_epoch=0, zk_version=2, isr=[2, 3],
            previous_isr=[2], replicas=[2, 3], min_insync_replicas=1, reason="caught_up")  # fmt: skip
    log.add(50, "3", I3, "propagation", partitions=["t-1", "t-2"], reason="written")
    log.add(52, "2", I2, "leader_election", "t-0", leader=2, leader_epoch=1, zk_version=4,
            isr=[2, 3], previous_isr=[1, 2, 3], reason="broker_down", **full)  # fmt: skip
    # Broker 1 is also out of t-1's ISR: the controller removes it (and bumps the epoch).
    log.add(52, "2", I2, "controller_isr_shrink", "t-1", leader=3, leader_epoch=6, zk_version=11,
            isr=[3, 2], previous_isr=[3, 1, 2], reason="broker_down")  # fmt: skip
    log.add(53, "2", I2, "propagation", partitions=["t-2"], reason="forced")
    # After the horizon: ignored (t-0's expand at 40 s stays unpropagated).
    log.add(65, "1", A1, "propagation", partitions=["t-0"], reason="written")
    log.add(70, "2", I2, "isr_shrink", "t-0", leader=2, leader_epoch=1, zk_version=5, isr=[2],
            previous_isr=[2, 3], reason="lag")  # fmt: skip
    return log.rows


@pytest.fixture(scope="module")
def events(spark: SparkSession) -> DataFrame:
    return events_frame(spark, story()).cache()


@pytest.fixture(scope="module")
def intervals(events: DataFrame) -> DataFrame:
    return isr_history.isr_intervals(events, HORIZON).cache()


def rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in frame.collect()]


def seconds(ts_ms: int) -> float:
    return (ts_ms - T0) / SECOND


def test_intervals_of_a_partition_deduplicate_states_and_carry_replicas(intervals: DataFrame) -> None:
    got = [
        (
            seconds(r["start_ms"]), seconds(r["end_ms"]), r["open"], r["isr"], r["leader"], r["leader_epoch"],
            r["zk_version"], r["replicas"], r["min_insync_replicas"], r["under_replicated"],
            r["under_min_isr"], r["cause_kind"], r["reason"], r["removed"], r["added"], r["recorded_by"],
        )
        for r in rows(intervals.where("partition = 0"))
    ]  # fmt: skip

    full, two = [1, 2, 3], 2
    assert got == [
        # The first state: its event named no previous ISR, so nothing is known removed or added.
        (0.0, 10.0, False, [1, 2, 3], 1, 0, 0, full, two, False, False, "leader_election", "new_partition",
         None, None, "2"),
        # The leader's own write (exact ts) wins over the controller's read of it at "9 s"; the
        # duplicate collection adds nothing; replicas are carried from the state before.
        (10.0, 25.0, False, [1, 2], 1, 0, 1, full, two, True, False, "isr_shrink", "lag", [3], [], "1"),
        # Only the controllers' reads know this one: the earliest (25 s) is kept.
        (25.0, 40.0, False, [1], 1, 0, 2, full, two, True, True, "state_learned", "zookeeper", [2], [], "2"),
        (40.0, 52.0, False, [1, 2, 3], 1, 0, 3, full, two, False, False, "isr_expand", "caught_up",
         [], [2, 3], "1"),
        # The last state holds until the horizon (the shrink at 70 s is after it).
        (52.0, 60.0, True, [2, 3], 2, 1, 4, full, two, True, False, "leader_election", "broker_down",
         [1], [], "2"),
    ]  # fmt: skip


def test_replicas_come_from_any_row_of_the_same_state(intervals: DataFrame) -> None:
    got = [
        (
            seconds(r["start_ms"]),
            r["isr"],
            r["replicas"],
            r["under_replicated"],
            r["removed"],
            r["cause_kind"],
        )
        for r in rows(intervals.where("partition = 1"))
    ]

    # The leader's shrink named no replicas; the controller's read of the same state did.
    assert got == [
        (35.0, [3, 1], [3, 1, 2], True, [2], "isr_shrink"),
        (45.0, [3, 1, 2], [3, 1, 2], False, [], "isr_expand"),
        (52.0, [3, 2], [3, 1, 2], True, [1], "controller_isr_shrink"),
    ]


def test_partition_and_topic_totals(intervals: DataFrame) -> None:
    totals = {r["partition"]: r for r in rows(isr_history.partition_isr_totals(intervals, 300_000))}
    columns = isr_history.PARTITION_TOTAL_COLUMNS

    # t-0: 60 s observed; under-replicated 10-40 and 52-60 (38 s, longest run 30 s); under min ISR
    # 25-40; shrinks at 10, 25, 52; one expand; elections: the creation and epoch 0 -> 1; the expand
    # at 40 s undoes both earlier shrinks (2 cycles).
    assert tuple(totals[0][c] for c in columns) == (60.0, 38.0, 15.0, 3, 1, 2, 2, 30.0)
    # t-1: the controller's shrink at 52 s bumps the epoch (5 -> 6) but elects nobody.
    assert tuple(totals[1][c] for c in columns) == (25.0, 18.0, 0.0, 2, 1, 0, 1, 10.0)
    assert tuple(totals[2][c] for c in columns) == (15.0, 3.0, 0.0, 1, 1, 0, 1, 3.0)

    topics = rows(isr_history.topic_isr_totals(isr_history.partition_isr_totals(intervals, 300_000)))
    assert [(r["topic"], r["partitions"], *(r[c] for c in columns)) for r in topics] == [
        ("t", 3, 100.0, 59.0, 15.0, 6, 3, 2, 4, 30.0)
    ]


def test_incidents_merge_overlapping_and_touching_stretches_across_partitions(intervals: DataFrame) -> None:
    got = [
        (
            r["incident"], seconds(r["start_ms"]), seconds(r["end_ms"]), r["open"],
            r["duration_seconds"], r["partitions"], r["partition_count"], r["replicas_out"], r["reasons"],
            r["under_min_isr_seconds"],
        )
        for r in rows(isr_history.incidents(intervals))
    ]  # fmt: skip

    # t-0 10-40 overlaps t-1 35-45, which t-2 45-48 touches: one incident until 48 s. t-0 is
    # under-replicated again from 52 s with t-1 (broker 1 died), still at the horizon.
    assert got == [
        (1, 10.0, 48.0, False, 38.0, ["t-0", "t-1", "t-2"], 3, [2, 3], ["fetch_stopped", "lag", "zookeeper"],
         15.0),
        (2, 52.0, 60.0, True, 8.0, ["t-0", "t-1"], 2, [1], ["broker_down"], 0.0),
    ]  # fmt: skip


def test_propagation_delays_match_the_same_broker_and_incarnation(events: DataFrame) -> None:
    got = [
        (r["broker"], f"t-{r['partition']}", seconds(r["change_ms"]), r["change_kind"],
         None if r["propagated_ms"] is None else seconds(r["propagated_ms"]), r["delay_seconds"],
         r["outcome"])
        for r in rows(isr_history.propagation_delays(events, HORIZON))
    ]  # fmt: skip

    assert got == [
        ("1", "t-0", 10.0, "isr_shrink", 15.0, 5.0, "written"),  # not 12 s: that one named t-1 only
        ("3", "t-1", 35.0, "isr_shrink", 35.0, 0.0, "forced"),  # at the same instant counts
        # 41 s is broker 2's, 42 s broker 1's next incarnation, 65 s after the horizon.
        ("1", "t-0", 40.0, "isr_expand", None, None, None),
        ("2", "t-2", 45.0, "isr_shrink", 53.0, 8.0, "forced"),
        ("3", "t-1", 45.0, "isr_expand", 50.0, 5.0, "written"),
        ("2", "t-2", 48.0, "isr_expand", 53.0, 5.0, "forced"),
    ]


def test_state_change_totals_count_each_event_once(events: DataFrame) -> None:
    got = {(r["broker"], r["kind"]): r["events"] for r in rows(isr_history.state_change_totals(events))}

    assert got == {
        ("1", "isr_shrink"): 1,  # collected twice, counted once
        ("1", "isr_expand"): 1,
        ("1", "propagation"): 4,  # the job drops events after --as-of before this table
        ("2", "leader_election"): 2,
        ("2", "state_learned"): 3,
        ("2", "isr_shrink"): 2,  # 45 s and 70 s: totals count every collected event
        ("2", "isr_expand"): 1,
        ("2", "controller_isr_shrink"): 1,
        ("2", "propagation"): 2,
        ("3", "state_learned"): 1,
        ("3", "isr_shrink"): 1,
        ("3", "isr_expand"): 1,
        ("3", "propagation"): 2,
    }


def test_flap_cycles_from_intervals_use_the_gauge_rule_and_columns(intervals: DataFrame) -> None:
    cycles = isr_history.flap_cycles(intervals, 300_000)

    got = sorted(
        (
            r["partition"], r["broker"], r["shrink_at"].timestamp() - T0 / 1000, r["recovery_seconds"],
            r["isr_before"], r["isr_after"],
        )
        for r in cycles.collect()
    )  # fmt: skip
    assert got == [
        (0, "1", 10.0, 30.0, 3.0, 2.0),
        (0, "1", 25.0, 15.0, 2.0, 1.0),
        (1, "3", 35.0, 10.0, 3.0, 2.0),
        (2, "2", 45.0, 3.0, 2.0, 1.0),
    ]
    # The same table as the gauge-based one, so flapping_partitions and the report read it as is.
    gauge_cycles = transforms.flap_cycles(
        transforms.isr_timeline(cycles.sparkSession.createDataFrame([], _PARTITION_ROWS)), 300_000
    )
    assert [(f.name, f.dataType) for f in cycles.schema] == [
        (f.name, f.dataType) for f in gauge_cycles.schema
    ]
    # A 20 s span misses t-0's 30 s recovery.
    assert isr_history.flap_cycles(intervals, 20_000).count() == 3
    ranked = rows(transforms.flapping_partitions(cycles))
    assert [(r["partition"], r["cycles"]) for r in ranked] == [(0, 2), (2, 1), (1, 1)]


_PARTITION_ROWS = "ts_ms long, broker string, metric string, topic string, partition int, value double"


def test_no_events_give_empty_tables_with_their_columns(spark: SparkSession) -> None:
    empty = events_frame(spark, [])
    intervals = isr_history.isr_intervals(empty, HORIZON)
    totals = isr_history.partition_isr_totals(intervals, 300_000)

    assert intervals.columns == list(isr_history.INTERVAL_COLUMNS)
    assert totals.columns == ["topic", "partition", *isr_history.PARTITION_TOTAL_COLUMNS]
    assert isr_history.incidents(intervals).columns == list(isr_history.INCIDENT_COLUMNS)
    delays = isr_history.propagation_delays(empty, HORIZON)
    assert delays.columns == list(isr_history.PROPAGATION_DELAY_COLUMNS)
    assert intervals.count() == totals.count() == delays.count() == 0


# --- reconciliation: counters and events of one synthetic run agree with the rollup ------------------

RUN_SECONDS = 600
SCRAPE_SECONDS = 10


@dataclass
class SyntheticRun:
    events: list[dict[str, Any]]
    # (broker, kind) -> the events' own count (each event once)
    counts: Counter[tuple[str, str]]
    samples: list[tuple[int, str, str, float]]  # (ts_ms, broker, metric, value)


@dataclass
class _Partition:
    replicas: list[int]
    leader: int
    isr: list[int]
    epoch: int = 0
    zk: int = 0

    def fields(self) -> dict[str, Any]:
        return {
            "leader": self.leader,
            "leader_epoch": self.epoch,
            "zk_version": self.zk,
            "isr": list(self.isr),
        }


def synthetic_run(seed: int = 11) -> SyntheticRun:
    """Six partitions over ten minutes; leaders shrink and expand their ISRs at random, each write
    counted by the leader's ISR counters (scraped every 10 s) and recorded as an event. The
    controller (broker 1) creates the partitions, moves one leadership back to its preferred
    replica (no ISR change), and learns half the writes; the exporter collects some events twice.
    """
    rng = random.Random(seed)
    log = EventLog()
    incarnations = {"1": A1, "2": I2, "3": I3}
    partitions = {}
    for p in range(6):
        replicas = [(p + i) % 3 + 1 for i in range(3)]
        # Partition 3 starts led by its second replica, so a preferred election can move it back.
        partitions[p] = _Partition(
            replicas, leader=replicas[1] if p == 3 else replicas[0], isr=list(replicas)
        )
    counts: Counter[tuple[str, str]] = Counter()

    def record(seconds: float, broker: str, kind: str, p: int, **fields: Any) -> dict[str, Any]:
        counts[(broker, kind)] += 1
        return log.add(seconds, broker, incarnations[broker], kind, f"t-{p}", **fields)

    for p, s in partitions.items():
        record(0.5, "1", "leader_election", p, replicas=s.replicas, min_insync_replicas=2,
               reason="new_partition", **s.fields())  # fmt: skip
    elected = False
    for second in range(1, RUN_SECONDS - 10):
        for p, s in partitions.items():
            if p == 3 and not elected and second >= 300 and len(s.isr) == 3:
                elected = True
                s.leader, s.epoch, s.zk = s.replicas[0], s.epoch + 1, s.zk + 1
                record(second + 0.5, "1", "leader_election", p, previous_isr=list(s.isr), replicas=s.replicas,
                       min_insync_replicas=2, reason="preferred", **s.fields())  # fmt: skip
                continue
            if rng.random() >= 0.01:
                continue
            before = list(s.isr)
            if len(before) == 3:
                follower = rng.choice([b for b in before if b != s.leader])
                s.isr = [b for b in before if b != follower]
                kind, reason = "isr_shrink", "lag"
            else:
                s.isr = list(s.replicas)
                kind, reason = "isr_expand", "caught_up"
            s.zk += 1
            row = record(
                second + 0.25, str(s.leader), kind, p, previous_isr=before, reason=reason, **s.fields()
            )
            if rng.random() < 0.5:
                record(second + 2.25, "1", "state_learned", p, replicas=s.replicas, min_insync_replicas=2,
                       reason="zookeeper", **s.fields())  # fmt: skip
            if rng.random() < 0.2:
                log.collected_twice(row)
    # Each broker's counters count its own writes once (the exporter's duplicates are not writes).
    written = {(e["broker"], e["incarnation"], e["sequence"]): e for e in log.rows}.values()
    samples = []
    for scrape in range(0, RUN_SECONDS + 1, SCRAPE_SECONDS):
        ts = at(scrape)
        for broker in ("1", "2", "3"):
            for metric, kind in ((M.ISR_SHRINKS.name, "isr_shrink"), (M.ISR_EXPANDS.name, "isr_expand")):
                value = sum(
                    1 for e in written if e["broker"] == broker and e["kind"] == kind and e["ts"] <= ts
                )
                samples.append((ts, broker, metric, float(value)))
    return SyntheticRun(events=log.rows, counts=counts, samples=samples)


def test_reconciliation_counters_events_and_rollup_totals_agree(spark: SparkSession) -> None:
    run = synthetic_run()
    assert len(run.events) > sum(run.counts.values())  # some events were collected twice
    events = events_frame(spark, run.events)
    snapshot = spark.createDataFrame(
        [
            (datetime.fromtimestamp(ts / 1000, tz=UTC), broker, metric, {}, value, "counter")
            for ts, broker, metric, value in run.samples
        ],
        schema=snapshot_struct_type(),
    )
    deltas = transforms.counter_deltas(transforms.prepare_samples(snapshot))
    counters = {
        (r["broker"], r["metric"]): r["increase"]
        for r in deltas.groupBy("broker", "metric").agg(F.sum("delta").alias("increase")).collect()
    }
    horizon = at(RUN_SECONDS)
    totals = {(r["broker"], r["kind"]): r["events"] for r in rows(isr_history.state_change_totals(events))}
    partitions = rows(isr_history.partition_isr_totals(isr_history.isr_intervals(events, horizon), 300_000))

    for kind, metric in (("isr_shrink", M.ISR_SHRINKS.name), ("isr_expand", M.ISR_EXPANDS.name)):
        by_broker = {b: run.counts[(b, kind)] for b in ("1", "2", "3")}
        assert sum(by_broker.values()) >= 5, kind  # the run is not trivially empty
        # Per broker: the events' own count == state_change_totals == the counter's increase.
        assert {b: totals.get((b, kind), 0) for b in by_broker} == by_broker
        assert {b: counters[(b, metric)] for b in by_broker} == {b: float(n) for b, n in by_broker.items()}
    # Over the partitions: every ISR write is a shrink or an expand of one partition's ISR.
    assert sum(r["shrinks"] for r in partitions) == sum(run.counts[(b, "isr_shrink")] for b in "123")
    assert sum(r["expands"] for r in partitions) == sum(run.counts[(b, "isr_expand")] for b in "123")
    assert sum(r["elections"] for r in partitions) == run.counts[("1", "leader_election")] == 7
    assert sum(totals.values()) == sum(run.counts.values())
