"""``actorlog rollup`` end to end: brokers' own snapshots -> Spark job -> tables, summary, report.

Snapshots are written the way a broker writes its own (``write_registry_snapshot`` from a
``CollectorRegistry``), for two brokers over four minutes, with a counter reset, missed scrapes, a
flapping partition and metrics that are simply not exported (no request histogram, no byte
counters). The job's totals are checked against a plain-Python computation over the same files.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ops.rollup import job
from ops.rollup import metrics as M
from ops.rollup.report import EVENT_PLOTS, PLOTS
from ops.rollup.schema import SNAPSHOT_ARROW_SCHEMA, snapshot_struct_type
from ops.snapshots import (
    SnapshotRow,
    read_snapshots,
    state_changes_path,
    write_registry_snapshot,
    write_snapshot,
    write_state_changes,
)

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
ROUNDS = 25  # 0 .. 240 s, every 10 s: four complete 1-minute windows


@dataclass
class BrokerState:
    """What one fake broker's collector reports."""

    broker_id: int
    controller: bool
    shrinks: int = 0
    expands: int = 0
    written: int = 0
    deferred: int = 0
    pending: int = 0
    offline: int = 0
    delays: list[float] = field(default_factory=list)
    isr: dict[int, int] = field(default_factory=dict)  # led partition -> ISR size

    def families(self) -> Iterator[Metric]:
        yield CounterMetricFamily(M.ISR_SHRINKS.family, "Shrinks.", value=self.shrinks)
        yield CounterMetricFamily(M.ISR_EXPANDS.family, "Expands.", value=self.expands)
        checks = CounterMetricFamily(M.PROPAGATION_CHECKS.family, "Checks.", labels=["outcome"])
        for outcome, count in (("written", self.written), ("deferred", self.deferred), ("forced", 0)):
            checks.add_metric([outcome], count)
        yield checks
        yield GaugeMetricFamily(M.PENDING_ISR_CHANGES.name, "Pending.", value=self.pending)
        yield GaugeMetricFamily(M.OFFLINE_PARTITIONS.name, "Offline.", value=self.offline)
        bounds = (1.0, 5.0, 10.0)
        cumulative = [(str(b), sum(1 for d in self.delays if d <= b)) for b in bounds]
        yield HistogramMetricFamily(
            M.PROPAGATION_DELAY.name,
            "Delay.",
            buckets=[*cumulative, ("+Inf", len(self.delays))],
            sum_value=sum(self.delays),
        )
        # Followers report 0 for the ISR size and 0/1 gauges of partitions they do not lead.
        isr = {partition: self.isr.get(partition, 0) for partition in (0, 1)}
        per_partition = {
            M.PARTITION_ISR_COUNT.name: isr,
            M.PARTITION_UNDER_REPLICATED.name: {p: int(0 < size < 3) for p, size in isr.items()},
            M.PARTITION_UNDER_MIN_ISR.name: {p: int(0 < size < 2) for p, size in isr.items()},
        }
        for name, values in per_partition.items():
            family = GaugeMetricFamily(name, "Partition.", labels=["topic", "partition"])
            for partition, value in values.items():
                family.add_metric(["t", str(partition)], value)
            yield family


class _StateCollector(Collector):
    def __init__(self, state: BrokerState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        return self.state.families()


def write_cluster_snapshots(directory: Path) -> None:
    one = BrokerState(broker_id=1, controller=True, isr={0: 3})
    two = BrokerState(broker_id=2, controller=False, isr={1: 3})
    registries = {}
    for state in (one, two):
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_StateCollector(state))
        registries[state.broker_id] = registry
    for i in range(ROUNDS):
        # Partition t-0 flaps: shrinks at rounds 5 and 12, back one round later (2 cycles).
        if i in (5, 12):
            one.isr[0] = 2
            one.shrinks += 1
            one.pending += 1
            one.deferred += 2
        elif i in (6, 13):
            one.isr[0] = 3
            one.expands += 1
            one.written += 1
            one.delays.append(6.0)
            one.pending = 0
        one.offline = 1 if i == 20 else 0
        # Broker 2 is away for rounds 9-10 (missed scrapes), then restarts: counters from 0.
        if i < 9:
            two.shrinks += 1
        elif i == 11:
            two.shrinks = 1
            two.isr[1] = 2
        elif i > 11:
            two.shrinks += 1
            two.isr[1] = 3 if i > 14 else 2
        ts_ms = T0 + i * 10_000
        write_registry_snapshot(registries[1], "1", directory, ts_ms)
        if i not in (9, 10):
            write_registry_snapshot(registries[2], "2", directory, ts_ms)


def reference_increase(directory: Path, metric: str, as_of_ms: int, window_ms: int) -> float:
    """Reset-aware deltas whose later sample lies in a complete window, summed (plain Python)."""
    rows = [r for r in read_snapshots(directory).to_pylist() if r["metric"] == metric]
    total = 0.0
    for _, series in itertools.groupby(
        sorted(rows, key=lambda r: (r["broker"], r["ts"])), key=lambda r: r["broker"]
    ):
        points = [(int(r["ts"].timestamp() * 1000), r["value"]) for r in series]
        for (_, previous), (ts, current) in itertools.pairwise(points):
            window_end = ts - ts % window_ms + window_ms
            if window_end <= as_of_ms:
                total += current - previous if current >= previous else current
    return total


@pytest.mark.spark
def test_rollup_job_writes_tables_summary_and_report(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshots, out = tmp_path / "snapshots", tmp_path / "out"
    write_cluster_snapshots(snapshots)
    # A write that a crash interrupted: the job must not read it.
    (snapshots / "date=2026-01-01" / "hour=00" / "1-1767225605000.parquet.tmp").write_bytes(b"PAR1 torn")
    arguments = ["--snapshots", str(snapshots), "--out", str(out), "--window", "1m", "--window", "2m"]

    code = job.main([*arguments, "--shuffle-partitions", "2", "--flap-span", "1m", "--top", "3"])

    printed = capsys.readouterr().out.splitlines()
    assert code == 0
    # One progress line per stage, then the summary.
    assert printed[0].startswith("[")
    assert "] spark: master local[2]" in printed[0]
    assert any("] wrote broker_windows: " in line for line in printed)
    summary = printed[printed.index(next(line for line in printed if line.startswith("rollup of"))) :]
    assert summary[0] == "rollup of 2 brokers (1, 2) from 2026-01-01 00:00:00Z to 2026-01-01 00:04:00Z"
    assert (
        summary[1]
        == "windows: 1m (4 complete), 2m (2 complete); totals below are over the complete 1m windows"
    )
    shrinks = reference_increase(snapshots, M.ISR_SHRINKS.name, T0 + 240_000, 60_000)
    expands = reference_increase(snapshots, M.ISR_EXPANDS.name, T0 + 240_000, 60_000)
    assert summary[2] == f"ISR: {shrinks:.0f} shrinks, {expands:.0f} expands, n/a failed updates"
    assert "2 written after 5 s of quiet, 0 forced by the 60 s bound, 4 checks deferred" in summary[3]
    assert summary[4].startswith("partitions: max 1 offline, ")
    assert summary[5] == "top flapping partitions: t-0 (2 cycles), t-1 (1 cycle)"
    assert summary[6].startswith("missing from the snapshots (")
    assert summary[7] == f"report: {out / 'report' / 'index.html'}"
    # A snapshot directory from before brokers recorded state changes: one line says so.
    assert summary[8:] == [f"ISR history: no state-change events under {snapshots}"]

    # Tables: Parquet under OUT/tables/<name>, windowed ones partitioned by window.
    for name in job.TABLES:
        assert (out / "tables" / name).is_dir(), name
    for name in job.HISTORY_TABLES:  # written empty, with their columns
        assert spark.read.parquet(str(out / "tables" / name)).count() == 0, name
    assert "start_ms" in spark.read.parquet(str(out / "tables" / "isr_intervals")).columns
    cluster = spark.read.parquet(str(out / "tables" / "cluster_windows"))
    assert sorted(r["window"] for r in cluster.select("window").distinct().collect()) == ["1m", "2m"]
    one_minute = cluster.where(F.col("window") == "1m")
    assert one_minute.count() == 4
    assert one_minute.agg(F.sum("isr_shrinks")).first()[0] == shrinks  # type: ignore[index]
    two_minutes = cluster.where(F.col("window") == "2m").agg(F.sum("isr_shrinks")).first()[0]  # type: ignore[index]
    assert two_minutes == reference_increase(snapshots, M.ISR_SHRINKS.name, T0 + 240_000, 120_000)
    brokers = spark.read.parquet(str(out / "tables" / "broker_windows")).where(F.col("window") == "1m")
    gap = brokers.where((F.col("broker") == "2") & (F.unix_millis("window_start") == T0 + 60_000)).first()
    assert gap is not None
    assert (gap["n_samples"], gap["validity"]) == (4, "valid")  # 60..110 s minus the missed 90 and 100
    assert brokers.where(F.col("broker") == "1").agg(F.max("propagation_delay_p50")).first()[0] is not None  # type: ignore[index]
    histograms = spark.read.parquet(str(out / "tables" / "histogram_windows"))
    assert {r["metric"] for r in histograms.select("metric").distinct().collect()} == {
        M.PROPAGATION_DELAY.name
    }

    # Report: the PNGs and one page embedding them.
    page = (out / "report" / "index.html").read_text(encoding="utf-8")
    for plot in PLOTS:
        assert (out / "report" / plot).stat().st_size > 1000
    assert page.count('src="data:image/png;base64,') == len(PLOTS)
    assert "<td>t-0</td>" in page


def write_cluster_state_changes(directory: Path) -> None:
    """The ISR changes of ``write_cluster_snapshots`` as the brokers record them, in the exporter's
    files (one per broker per 10 s collection round).

    t-0 (leader 1) shrinks at 45 s and 115 s and is back 10 s later each time; broker 2 restarts
    (a new incarnation) and, leading t-1, shrinks it at 105 s, back at 145 s; broker 1, the
    controller, created both partitions and read t-1's shrink at 107 s. One round of broker 1 is
    collected twice, and a torn file is left behind.
    """
    one, two = 1_767_000_000_000, 1_767_225_700_000  # incarnations (process start times)
    sequences: dict[tuple[str, int], int] = {}
    events: list[dict[str, object]] = []

    def event(
        seconds: int, broker: str, incarnation: int, kind: str, partition: int | None, **fields: object
    ) -> None:
        sequences[(broker, incarnation)] = sequences.get((broker, incarnation), 0) + 1
        topic = None if partition is None else "t"
        events.append(
            {"ts": T0 + seconds * 1000, "broker": broker, "incarnation": incarnation,
             "sequence": sequences[(broker, incarnation)], "kind": kind, "topic": topic,
             "partition": partition, **fields}
        )  # fmt: skip

    for partition, replicas in ((0, [1, 2, 3]), (1, [2, 3, 1])):
        event(0, "1", one, "leader_election", partition, leader=replicas[0], leader_epoch=0, zk_version=0,
              isr=replicas, replicas=replicas, min_insync_replicas=2, reason="new_partition")  # fmt: skip
    for start, version in ((45, 1), (115, 3)):
        event(start, "1", one, "isr_shrink", 0, leader=1, leader_epoch=0, zk_version=version, isr=[1, 2],
              previous_isr=[1, 2, 3], reason="lag")  # fmt: skip
        event(start + 10, "1", one, "isr_expand", 0, leader=1, leader_epoch=0, zk_version=version + 1,
              isr=[1, 2, 3], previous_isr=[1, 2], reason="caught_up")  # fmt: skip
        event(start + 15, "1", one, "propagation", None, partitions=["t-0"], reason="written")
    event(105, "2", two, "isr_shrink", 1, leader=2, leader_epoch=0, zk_version=1, isr=[2, 3],
          previous_isr=[2, 3, 1], reason="fetch_stopped")  # fmt: skip
    event(107, "1", one, "state_learned", 1, leader=2, leader_epoch=0, zk_version=1, isr=[2, 3],
          replicas=[2, 3, 1], min_insync_replicas=2, reason="zookeeper")  # fmt: skip
    event(145, "2", two, "isr_expand", 1, leader=2, leader_epoch=0, zk_version=2, isr=[2, 3, 1],
          previous_isr=[2, 3], reason="caught_up")  # fmt: skip
    event(150, "2", two, "propagation", None, partitions=["t-1"], reason="written")
    rounds: dict[tuple[str, int], list[dict[str, object]]] = {}
    for e in events:
        collected = T0 + -(-(int(str(e["ts"])) - T0) // 10_000) * 10_000
        rounds.setdefault((str(e["broker"]), collected), []).append(e)
    for (broker, collected), batch in rounds.items():
        write_state_changes(batch, directory, broker, collected)
    write_state_changes(rounds[("1", T0 + 60_000)], directory, "1", T0 + 60_001)  # collected twice
    torn = state_changes_path(directory, "2", T0 + 200_000).with_suffix(".parquet.tmp")
    torn.write_bytes(b"PAR1 torn")


@pytest.mark.spark
def test_rollup_job_builds_the_isr_history_from_state_change_files(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshots, out = tmp_path / "snapshots", tmp_path / "out"
    write_cluster_snapshots(snapshots)
    write_cluster_state_changes(snapshots)

    code = job.main(
        ["--snapshots", str(snapshots), "--out", str(out), "--window", "1m", "--shuffle-partitions", "2",
         "--flap-span", "1m", "--top", "3"]
    )  # fmt: skip

    printed = capsys.readouterr().out.splitlines()
    assert code == 0
    assert any("] events: 12 state-change events in " in line for line in printed)
    assert "top flapping partitions: t-0 (2 cycles), t-1 (1 cycle)" in printed
    # Six leader changes propagated after 15, 5, 15, 5, 45 and 5 s: the median is 10 s.
    assert printed[-3:] == [
        "ISR history from 12 state-change events of 2 brokers (1, 2) up to 2026-01-01T00:04:00Z: "
        "3 shrinks, 3 expands, 2 leader elections",
        "ISR history: 60 s under-replicated and 0 s under min ISR (partition-seconds); "
        "2 incidents, longest 40 s",
        "ISR change propagation (events): median 10 s, max 45 s over 6 leader ISR changes",
    ]

    def table(name: str) -> list[dict[str, Any]]:
        return [row.asDict() for row in spark.read.parquet(str(out / "tables" / name)).collect()]

    def offset(ts_ms: int) -> int:
        return (ts_ms - T0) // 1000

    intervals = sorted(
        (r["partition"], offset(r["start_ms"]), offset(r["end_ms"]), r["open"], r["under_replicated"])
        for r in table("isr_intervals")
    )
    assert intervals == [
        (0, 0, 45, False, False), (0, 45, 55, False, True), (0, 55, 115, False, False),
        (0, 115, 125, False, True), (0, 125, 240, True, False),
        (1, 0, 105, False, False), (1, 105, 145, False, True), (1, 145, 240, True, False),
    ]  # fmt: skip
    incidents = sorted(
        (r["incident"], offset(r["start_ms"]), offset(r["end_ms"]), r["partitions"])
        for r in table("incidents")
    )
    assert incidents == [(1, 45, 55, ["t-0"]), (2, 105, 145, ["t-0", "t-1"])]
    totals = {(r["broker"], r["kind"]): r["events"] for r in table("state_change_totals")}
    # The round collected twice (t-0's expand at 55 s, its propagation at 60 s) counts once.
    assert (totals[("1", "isr_expand")], totals[("1", "propagation")]) == (2, 2)
    assert sorted(
        (r["topic"], r["partitions"], r["shrinks"], r["flap_cycles"]) for r in table("topic_isr_totals")
    ) == [("t", 2, 3, 3)]
    # Flapping now comes from the events: t-0 shrank at 45 s (the gauges saw it at the 50 s scrape).
    cycles = sorted((r["partition"], r["shrink_at"].timestamp() - T0 / 1000) for r in table("flap_cycles"))
    assert cycles == [(0, 45.0), (0, 115.0), (1, 105.0)]
    # The report draws the event rows the job handed it.
    for plot in EVENT_PLOTS:
        assert (out / "report" / plot).stat().st_size > 1000, plot
    delays = sorted(
        (r["partition"], offset(r["change_ms"]), r["delay_seconds"]) for r in table("propagation_delays")
    )
    assert delays == [
        (0, 45, 15.0),
        (0, 55, 5.0),
        (0, 115, 15.0),
        (0, 125, 5.0),
        (1, 105, 45.0),
        (1, 145, 5.0),
    ]


@pytest.mark.spark
def test_spark_reader_skips_tmp_files_and_reads_the_fixed_schema(spark: SparkSession, tmp_path: Path) -> None:
    ts_ms = T0 + 1_234
    write_snapshot([SnapshotRow(ts_ms, "1", "m", {"a": "b"}, 1.5, "gauge")], tmp_path)
    torn = tmp_path / "date=2026-01-01" / "hour=00" / f"2-{ts_ms}.parquet.tmp"
    torn.write_bytes(b"PAR1 not a parquet file")

    rows = (
        job._read_snapshots(spark, tmp_path)
        .select(*SNAPSHOT_ARROW_SCHEMA.names, F.unix_millis("ts"))
        .collect()
    )

    assert [(r["broker"], r["metric"], r["labels"], r["value"], r["type"], r[6]) for r in rows] == [
        ("1", "m", {"a": "b"}, 1.5, "gauge", ts_ms)
    ]


def test_arrow_and_spark_snapshot_schemas_describe_the_same_columns() -> None:
    spark_fields = [(f.name, f.dataType.simpleString(), f.nullable) for f in snapshot_struct_type().fields]
    arrow_types = {
        "timestamp[ms, tz=UTC]": "timestamp",
        "string": "string",
        "double": "double",
        "map<string, string>": "map<string,string>",
    }
    arrow_fields = [(f.name, arrow_types[str(f.type)], f.nullable) for f in SNAPSHOT_ARROW_SCHEMA]
    assert spark_fields == arrow_fields


def test_rollup_of_an_empty_directory_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "date=2026-01-01").mkdir()
    (tmp_path / "date=2026-01-01" / "1-1.parquet.tmp").write_bytes(b"")

    code = job.main(["--snapshots", str(tmp_path), "--out", str(tmp_path / "out")])

    captured = capsys.readouterr()
    assert code == 2
    assert captured.err == f"actorlog rollup: no snapshot files (*.parquet) under {tmp_path}\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.spark
def test_rollup_of_snapshots_without_any_rollup_metric_exits_2(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_snapshot([SnapshotRow(T0, "1", "process_cpu_seconds_total", {}, 1.0, "counter")], tmp_path / "in")

    code = job.main(
        ["--snapshots", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--shuffle-partitions", "2"]
    )

    captured = capsys.readouterr()
    assert code == 2
    assert (
        captured.err
        == f"actorlog rollup: the snapshot files under {tmp_path / 'in'} hold no metric the rollup reads\n"
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--window", "1x"], "invalid duration '1x'"),
        (["--as-of", "yesterday"], "invalid time 'yesterday'"),
        (["--as-of", "2026-01-01T00:00:00"], "needs a time zone"),
        (["--min-samples", "0"], "expected a positive integer"),
        (["--conf", "novalue"], "expected KEY=VALUE"),
    ],
)
def test_rollup_rejects_bad_arguments_with_one_line(
    arguments: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        job.main(["--snapshots", str(tmp_path), "--out", str(tmp_path), *arguments])

    captured = capsys.readouterr()
    assert exit_info.value.code == 2
    assert captured.err.count("\n") == 1
    assert message in captured.err
