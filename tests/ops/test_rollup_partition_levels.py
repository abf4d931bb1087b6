"""The rollup on snapshots taken at each ``metrics.partition.level`` (``-m spark``).

The transforms on hand-made samples without the ``partition`` label (a topic's series per broker):
seconds under-replicated equal the per-partition ones, a topic's ISR timeline is one per broker (so
two brokers' sums never make a false cycle), its ISR range is left null. Then the whole job on the
same cluster written three ways (``test_rollup_job``'s two brokers, their per-partition families as
they are, folded per topic as the exporter folds them, and left out): same partition-seconds at
``partition`` and ``topic``, the flapping topic named as a topic, and ``none`` rolled up without
partition rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from ops.metric_catalog import TOPIC_AGGREGATION, PartitionLevel
from ops.rollup import job, transforms
from ops.rollup import metrics as M
from ops.snapshots import write_registry_snapshot
from tests.ops.test_rollup_job import ROUNDS, T0, BrokerState
from tests.ops.test_rollup_transforms import Sample, at, parameters, prepared

pytestmark = pytest.mark.spark

URP = M.PARTITION_UNDER_REPLICATED.name
ISR = M.PARTITION_ISR_COUNT.name
TOPIC = transforms.TOPIC_PARTITION


def _t(partition: int | None = None) -> dict[str, str]:
    return {"topic": "t"} if partition is None else {"topic": "t", "partition": str(partition)}


# --- transforms --------------------------------------------------------------------------------


def test_a_sample_without_the_partition_label_is_the_whole_topic(spark: SparkSession) -> None:
    rows = transforms.partition_samples(
        prepared(spark, [(0, "1", URP, _t(), 2, "gauge"), (0, "1", URP, _t(4), 1, "gauge")])
    ).collect()
    assert sorted((r["topic"], r["partition"], r["value"]) for r in rows) == [
        ("t", TOPIC, 2.0),
        ("t", 4, 1.0),
    ]


def _seconds(spark: SparkSession, samples: list[Sample]) -> dict[int, float]:
    frame = prepared(spark, samples)
    scrapes = transforms.broker_scrapes(frame, at(60), max_hold_ms=20_000, last_hold_ms=10_000)
    seconds = transforms.partition_gauge_seconds(transforms.partition_samples(frame), scrapes, parameters(60))
    totals: dict[int, float] = {}
    for row in seconds.collect():
        totals[row["partition"]] = totals.get(row["partition"], 0.0) + row["value_seconds"]
    return totals


def test_partition_seconds_are_the_same_whether_or_not_partitions_are_folded(spark: SparkSession) -> None:
    """Broker 1 leads t-0 and t-1, both under-replicated from 0 s to 30 s; broker 2 leads t-2,
    under-replicated from 10 s to 30 s (scrapes every 10 s, broker 2 offset by 5 s)."""
    per_partition: list[Sample] = []
    per_topic: list[Sample] = []
    for s in range(0, 60, 10):
        one = [int(s < 30), int(s < 30)]
        two = int(10 <= s < 30)
        per_partition += [(s, "1", URP, _t(p), v, "gauge") for p, v in enumerate(one)]
        per_partition.append((s + 5, "2", URP, _t(2), two, "gauge"))
        per_topic += [(s, "1", URP, _t(), sum(one), "gauge"), (s + 5, "2", URP, _t(), two, "gauge")]
    partition_level = _seconds(spark, per_partition)
    topic_level = _seconds(spark, per_topic)
    assert partition_level == {0: 30.0, 1: 30.0, 2: 20.0}
    assert topic_level == {TOPIC: 80.0}


def test_a_topics_isr_timeline_is_one_per_broker_and_its_cycles_are_that_brokers(
    spark: SparkSession,
) -> None:
    """Broker 1's sum over the partitions it leads drops 6 -> 5 at 20 s and is back at 40 s; broker
    2's sum is 3 throughout, scraped 5 s later. Mixed into one series they would alternate 6, 3, 6..."""
    samples: list[Sample] = [
        *[(s, "1", ISR, _t(), v, "gauge") for s, v in [(0, 6), (10, 6), (20, 5), (30, 5), (40, 6), (50, 6)]],
        *[(s + 5, "2", ISR, _t(), 3, "gauge") for s in range(0, 60, 10)],
    ]
    timeline = transforms.isr_timeline(transforms.partition_samples(prepared(spark, samples))).cache()
    changes = [
        (r["broker"], r["ts_ms"], r["change"])
        for r in timeline.where("change is not null").orderBy("ts_ms").collect()
    ]
    assert changes == [("1", at(20), "shrink"), ("1", at(40), "expand")]
    cycles = transforms.flap_cycles(timeline, flap_span_ms=60_000).collect()
    assert [(r["partition"], r["broker"], r["isr_before"], r["isr_after"]) for r in cycles] == [
        (TOPIC, "1", 6.0, 5.0)
    ]
    # Broker 2 expanding after broker 1's shrink is not its recovery.
    crossed = [*samples[:3], *[(s + 5, "2", ISR, _t(), v, "gauge") for s, v in [(0, 3), (20, 2), (30, 9)]]]
    crossed_timeline = transforms.isr_timeline(transforms.partition_samples(prepared(spark, crossed)))
    assert transforms.flap_cycles(crossed_timeline, flap_span_ms=60_000).count() == 1  # broker 2's own
    windows = transforms.partition_windows(
        timeline,
        transforms.partition_gauge_seconds(
            transforms.partition_samples(prepared(spark, samples)),
            transforms.broker_scrapes(
                prepared(spark, samples), at(60), max_hold_ms=20_000, last_hold_ms=10_000
            ),
            parameters(60),
        ),
        parameters(60),
        {ISR},
    ).collect()
    ((row,),) = [windows]
    assert (row["partition"], row["isr_min"], row["isr_max"]) == (TOPIC, None, None)
    assert (row["isr_shrinks_observed"], row["isr_expands_observed"], row["n_samples"]) == (1, 1, 12)


# --- the job -----------------------------------------------------------------------------------


class _AtLevel(Collector):
    """A fake broker's families as a broker at ``level`` exports them: per-partition gauges as
    they are, folded per topic (``TOPIC_AGGREGATION``), or left out."""

    def __init__(self, state: BrokerState, level: PartitionLevel) -> None:
        self.state = state
        self.level = level

    def collect(self) -> Iterator[Metric]:
        for family in self.state.families():
            if family.name not in TOPIC_AGGREGATION or self.level is PartitionLevel.PARTITION:
                yield family
                continue
            if self.level is PartitionLevel.NONE:
                continue
            folded: dict[str, list[float]] = {}
            for sample in family.samples:
                folded.setdefault(sample.labels["topic"], []).append(sample.value)
            topic_family = GaugeMetricFamily(family.name, family.documentation, labels=["topic"])
            for topic, values in sorted(folded.items()):
                topic_family.add_metric(
                    [topic], sum(values) if TOPIC_AGGREGATION[family.name] == "sum" else max(values)
                )
            yield topic_family


def write_snapshots(directory: Path, level: PartitionLevel) -> None:
    """``test_rollup_job.write_cluster_snapshots``'s scenario, exported at ``level``."""
    one = BrokerState(broker_id=1, controller=True, isr={0: 3})
    two = BrokerState(broker_id=2, controller=False, isr={1: 3})
    registries = {}
    for state in (one, two):
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_AtLevel(state, level))
        registries[state.broker_id] = registry
    for i in range(ROUNDS):
        if i in (5, 12):
            one.isr[0] = 2
            one.shrinks += 1
        elif i in (6, 13):
            one.isr[0] = 3
            one.expands += 1
        if i == 11:
            two.isr[1] = 2
        elif i > 14:
            two.isr[1] = 3
        ts_ms = T0 + i * 10_000
        write_registry_snapshot(registries[1], "1", directory, ts_ms)
        if i not in (9, 10):
            write_registry_snapshot(registries[2], "2", directory, ts_ms)


def run_job(tmp_path: Path, level: PartitionLevel, capsys: pytest.CaptureFixture[str]) -> list[str]:
    snapshots, out = tmp_path / level.value / "snapshots", tmp_path / level.value / "out"
    write_snapshots(snapshots, level)
    code = job.main(
        ["--snapshots", str(snapshots), "--out", str(out), "--window", "1m", "--shuffle-partitions", "2",
         "--flap-span", "1m"]
    )  # fmt: skip
    printed = capsys.readouterr().out.splitlines()
    assert code == 0, printed
    return printed[printed.index(next(line for line in printed if line.startswith("rollup of"))) :]


@pytest.mark.slow  # three Spark jobs: about 90 s on two cores
def test_the_job_rolls_up_snapshots_at_every_level(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    partition = run_job(tmp_path, PartitionLevel.PARTITION, capsys)
    topic = run_job(tmp_path, PartitionLevel.TOPIC, capsys)
    none = run_job(tmp_path, PartitionLevel.NONE, capsys)

    def line(summary: list[str], prefix: str) -> str:
        return next(text for text in summary if text.startswith(prefix))

    # Partition-seconds under-replicated / under min ISR: the same whether partitions are folded.
    assert line(partition, "partitions:") == line(topic, "partitions:")
    assert "under-replicated" in line(partition, "partitions:")
    assert line(partition, "top flapping") == "top flapping partitions: t-0 (2 cycles), t-1 (1 cycle)"
    # Folded: broker 1's two drops and broker 2's one, as the topic's.
    assert line(topic, "top flapping") == "top flapping partitions: t (topic) (3 cycles)"
    # Without per-partition series: no partition rows, the rest as before.
    assert line(none, "top flapping") == "top flapping partitions: none"
    assert line(none, "ISR:") == line(partition, "ISR:")
    assert table(spark, tmp_path / "none", "partition_windows").count() == 0
    topic_windows = table(spark, tmp_path / "topic", "partition_windows")
    assert {r["partition"] for r in topic_windows.select("partition").distinct().collect()} == {TOPIC}


def table(spark: SparkSession, run: Path, name: str) -> DataFrame:
    """A table the job wrote, read with the schema it wrote beside it (an empty one has no files)."""
    directory = run / "out" / "tables" / name
    schema = StructType.fromJson(json.loads((directory / "_schema.json").read_text(encoding="utf-8")))
    return spark.read.schema(schema).parquet(str(directory))
