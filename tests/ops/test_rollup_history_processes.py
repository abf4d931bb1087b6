"""The exact ISR history on real processes: a shrink and expand that both happen between two scrapes.

Two broker processes and a real ZooKeeper; the snapshot exporter runs one round, then the follower
is stalled (SIGSTOP) until its leader drops it from the ISR and resumed until it is back, then the
exporter runs its second round. Both scrapes saw a whole ISR, so the metric snapshots alone cannot
tell that anything happened; the leader's state-change events, collected by the same rounds, can:
the rollup (the real PySpark job, on the tests' Spark session) shows the follower's absence as an
ISR interval, with the times the ZooKeeper watches saw it start and end. Every wait is a watch or a
reply.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from actors.common.types import TopicPartition
from ops.rollup import job
from ops.snapshots import SnapshotExporter, read_snapshots, read_state_changes
from runtime.clock import LoopClock
from tests.support.process_cluster import SECRET, ProcessCluster

# slow (make soak): 30 s; make test keeps the same check on the demo's real cluster (tests/ops/test_demo.py).
pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.spark, pytest.mark.slow]

TP = TopicPartition("history", 0)
LEADER, FOLLOWER = 1, 2
PROPERTIES = {
    "replica.lag.time.max.ms": "1000",
    "replica.fetch.wait.max.ms": "100",
    "min.insync.replicas": "1",
}


@dataclass
class Seen:
    """Wall-clock times the test saw: the stall began, ZooKeeper showed the shrink, the expand."""

    paused_at: int = 0
    shrunk: int = 0
    expanded: int = 0


async def stall_between_two_rounds(zk_connect_string: str, base: Path, out: Path) -> Seen:
    seen = Seen()
    clock = LoopClock()
    async with ProcessCluster(zk_connect_string, base, PROPERTIES) as cluster:
        await cluster.start(LEADER)
        await cluster.start(FOLLOWER)
        await cluster.create_topic(TP.topic, {0: [LEADER, FOLLOWER]})
        await cluster.wait_for_partition_state(TP, lambda s: s.isr == (LEADER, FOLLOWER), timeout_s=30)
        headers = {"Authorization": f"Bearer {SECRET}"}
        async with aiohttp.ClientSession(headers=headers) as session:
            exporter = SnapshotExporter(session, [cluster.brokers[LEADER].url], out)
            first = await exporter.export_round()
            assert not first.failures

            cluster.pause(FOLLOWER)
            seen.paused_at = clock.wall_clock_ms()
            # A record the stalled follower cannot fetch: it falls behind, and out.
            async with session.post(
                f"{cluster.brokers[LEADER].url}/v1/topics/{TP.topic}/partitions/0/records",
                json={"records": [{"value": "behind"}], "acks": 1},
            ) as response:
                assert response.status == 200, await response.text()
            await cluster.wait_for_partition_state(TP, lambda s: s.isr == (LEADER,), timeout_s=30)
            seen.shrunk = clock.wall_clock_ms()
            cluster.resume(FOLLOWER)
            await cluster.wait_for_partition_state(TP, lambda s: FOLLOWER in s.isr, timeout_s=30)
            seen.expanded = clock.wall_clock_ms()

            second = await exporter.export_round()
            assert not second.failures
            assert second.state_changes >= 2
    return seen


def test_a_shrink_and_expand_between_two_scrapes_is_in_the_isr_history(
    spark: SparkSession, zk_connect_string: str, tmp_path: Path
) -> None:
    out = tmp_path / "snapshots"
    (tmp_path / "cluster").mkdir()
    seen = asyncio.run(stall_between_two_rounds(zk_connect_string, tmp_path / "cluster", out))

    # Both scrapes saw the whole ISR: the snapshots alone show nothing under-replicated.
    scraped = [
        row["value"]
        for row in read_snapshots(out).to_pylist()
        if row["metric"] == "kafka_cluster_partition_underreplicated"
        and dict(row["labels"]).get("topic") == TP.topic
    ]
    assert scraped
    assert set(scraped) == {0.0}
    events = [e for e in read_state_changes(out).to_pylist() if e["topic"] == TP.topic]
    kinds = [e["kind"] for e in events if e["kind"] in ("isr_shrink", "isr_expand")]
    assert kinds == ["isr_shrink", "isr_expand"]

    rollup = tmp_path / "rollup"
    code = job.main(
        ["--snapshots", str(out), "--out", str(rollup), "--window", "1m", "--shuffle-partitions", "2"]
    )
    assert code == 0
    intervals = [
        row
        for row in pq.read_table(rollup / "tables" / "isr_intervals").to_pylist()
        if row["topic"] == TP.topic and row["partition"] == TP.partition
    ]
    intervals.sort(key=lambda row: row["start_ms"])
    isrs = [sorted(row["isr"]) for row in intervals]
    assert isrs[-3:] == [[LEADER, FOLLOWER], [LEADER], [LEADER, FOLLOWER]]
    out_of_sync = intervals[-2]
    assert out_of_sync["under_replicated"] is True
    assert out_of_sync["cause_kind"] == "isr_shrink"
    assert out_of_sync["reason"] in ("lag", "fetch_stopped")
    assert out_of_sync["removed"] == [FOLLOWER]
    # The leader's clock and the test's watch agree within a second (one machine).
    assert seen.paused_at < out_of_sync["start_ms"] <= seen.shrunk + 1_000
    assert abs(out_of_sync["end_ms"] - seen.expanded) <= 1_000
    totals = pq.read_table(rollup / "tables" / "partition_isr_totals").to_pylist()
    (partition,) = [row for row in totals if row["topic"] == TP.topic]
    assert partition["shrinks"] == 1
    assert partition["expands"] == 1
    assert partition["under_replicated_seconds"] == pytest.approx(
        (out_of_sync["end_ms"] - out_of_sync["start_ms"]) / 1000
    )
