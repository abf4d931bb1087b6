"""The rollup over snapshots exported from a real cluster run: three broker processes, the exporter
scraping them while a follower stalls (the ISR shrinks) and resumes (it expands); the job's ISR
totals equal a plain-Python reading of the same files, and they show the faults."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from actors.common.types import TopicPartition
from ops.rollup import job
from ops.rollup import metrics as M
from ops.snapshots import ExportOptions, RoundResult, read_snapshots, run_export
from tests.ops.test_rollup_job import reference_increase
from tests.support.process_cluster import SECRET, ProcessCluster, ProduceLoop

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.spark]

TP = TopicPartition("orders", 0)
WINDOW_MS = 5_000


async def export_during_faults(zk_connect_string: str, base: Path, snapshots: Path) -> None:
    properties = {"replica.lag.time.max.ms": "1500", "zookeeper.session.timeout.ms": "10000"}
    async with ProcessCluster(zk_connect_string, base, properties) as cluster:
        await asyncio.gather(*(cluster.start(b) for b in (1, 2, 3)))
        await cluster.create_topic(TP.topic, {0: [1, 2, 3]})
        stop = asyncio.Event()
        options = ExportOptions(
            bootstrap=tuple(b.url for b in cluster.brokers.values()),
            out_dir=snapshots,
            interval_ms=500,
            scrape_timeout_s=0.4,
            secret=SECRET,
        )
        rounds: list[RoundResult] = []
        new_round = asyncio.Event()

        def on_round(result: RoundResult) -> None:
            rounds.append(result)
            new_round.set()

        async def rounds_done(count: int) -> None:
            while len(rounds) < count:
                new_round.clear()
                await new_round.wait()

        export = asyncio.ensure_future(run_export(options, stop, on_round))
        producer = ProduceLoop(cluster, TP)
        producer.start()
        await producer.wait_for_acks(20, timeout_s=30)
        cluster.pause(3)
        await cluster.wait_for_partition_state(TP, lambda s: 3 not in s.isr, timeout_s=30)
        await asyncio.wait_for(rounds_done(len(rounds) + 4), timeout=30)  # scraped while under-replicated
        cluster.resume(3)
        await cluster.wait_for_partition_state(TP, lambda s: 3 in s.isr, timeout_s=30)
        # Two windows' worth of rounds after the last event, so complete windows hold it.
        await asyncio.wait_for(rounds_done(len(rounds) + 2 * WINDOW_MS // 500), timeout=60)
        await producer.stop()
        stop.set()
        assert await export >= 20


def test_rollup_of_a_real_cluster_run_shows_the_isr_shrink_and_expand(
    spark: SparkSession, zk_connect_string: str, tmp_path: Path
) -> None:
    snapshots, out = tmp_path / "snapshots", tmp_path / "out"
    (tmp_path / "cluster").mkdir()
    asyncio.run(export_during_faults(zk_connect_string, tmp_path / "cluster", snapshots))
    rows = read_snapshots(snapshots).to_pylist()
    assert {row["broker"] for row in rows} == {"1", "2", "3"}
    as_of_ms = max(int(row["ts"].timestamp() * 1000) for row in rows)
    as_of_ms -= as_of_ms % WINDOW_MS  # the job excludes the still-open window

    code = job.main(
        ["--snapshots", str(snapshots), "--out", str(out), "--window", "5s", "--min-samples", "2",
         "--scrape-interval", "500ms", "--shuffle-partitions", "2"]
    )  # fmt: skip
    assert code == 0

    cluster = spark.read.parquet(str(out / "tables" / "cluster_windows")).where(F.col("window") == "5s")
    shrinks = cluster.agg(F.sum("isr_shrinks")).first()[0]  # type: ignore[index]
    expands = cluster.agg(F.sum("isr_expands")).first()[0]  # type: ignore[index]
    assert shrinks == reference_increase(snapshots, M.ISR_SHRINKS.name, as_of_ms, WINDOW_MS)
    assert expands == reference_increase(snapshots, M.ISR_EXPANDS.name, as_of_ms, WINDOW_MS)
    assert shrinks >= 1
    assert expands >= 1
    partitions = spark.read.parquet(str(out / "tables" / "partition_windows"))
    under = partitions.where((F.col("topic") == "orders") & (F.col("partition") == 0))
    assert under.agg(F.sum("seconds_under_replicated")).first()[0] > 0  # type: ignore[index]
