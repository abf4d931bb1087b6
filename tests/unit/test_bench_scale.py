"""The pure parts of ``python -m ops.bench.scale`` (ops/bench/scale*.py): the balanced replica
assignment, reading and differencing broker counters, the percentile summary, the table and the
option checks."""

from __future__ import annotations

from collections import Counter

import pytest

from ops.bench.scale import build_parser, led_by_victim, replica_assignment
from ops.bench.scale_figures import (
    Figure,
    RunInfo,
    counter_values,
    counters_used,
    fmt,
    markdown_table,
    per_broker,
    per_second,
    summarize,
)

# Shaped as a broker's /metrics answers (ops/broker_metrics.py), with the families around ours.
SCRAPE = """\
# HELP kafka_network_requestmetrics_requests_total Requests handled, by request type.
# TYPE kafka_network_requestmetrics_requests_total counter
kafka_network_requestmetrics_requests_total{request="Produce"} 7.0
kafka_network_requestmetrics_requests_total{request="FetchConsumer"} 3.0
kafka_network_requestmetrics_requests_total{request="FetchFollower"} 1200.0
# HELP kafka_server_fetcherstats_requests_total Fetch requests sent by replica fetchers, by source broker.
# TYPE kafka_server_fetcherstats_requests_total counter
kafka_server_fetcherstats_requests_total{clientId="ReplicaFetcherThread-0-2",source_broker="2"} 500.0
kafka_server_fetcherstats_requests_total{clientId="ReplicaFetcherThread-0-3",source_broker="3"} 650.0
# HELP kafka_server_replicamanager_isrshrinks_total Successful leader-initiated ISR shrinks.
# TYPE kafka_server_replicamanager_isrshrinks_total counter
kafka_server_replicamanager_isrshrinks_total 2.0
# HELP kafka_server_replicamanager_isrexpands_total Successful leader-initiated ISR expansions.
# TYPE kafka_server_replicamanager_isrexpands_total counter
kafka_server_replicamanager_isrexpands_total 1.0
# HELP kafka_server_replicamanager_underreplicatedpartitions Under-replicated partitions led here.
# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge
kafka_server_replicamanager_underreplicatedpartitions 0.0
"""


def test_counters_are_read_by_sample_name_and_label_and_summed_over_the_other_labels() -> None:
    values = counter_values(SCRAPE)
    assert values == {
        "follower_fetches_handled": 1200.0,  # FetchFollower only, not Produce or FetchConsumer
        "follower_fetches_sent": 1150.0,  # both source brokers
        "isr_shrinks": 2.0,
        "isr_expands": 1.0,
        "failed_isr_updates": None,  # not in this scrape: unknown, not zero
    }


def test_a_counter_difference_is_none_when_missing_or_gone_backwards() -> None:
    before = {"a": 10.0, "b": 5.0, "c": None, "d": 100.0}
    after = {"a": 25.0, "b": 5.0, "c": 3.0, "d": 4.0}  # d: a restarted broker starts again at 0
    assert counters_used(before, after) == {"a": 15.0, "b": 0.0, "c": None, "d": None}
    assert per_second(15.0, 3.0) == 5.0
    assert per_second(None, 3.0) is None
    assert per_second(1.0, 0.0) is None


def test_the_summary_is_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 1..100, unsorted
    summary = summarize(values)
    assert summary is not None
    assert (summary.count, summary.p50, summary.p99, summary.max) == (100, 50.0, 99.0, 100.0)
    one = summarize([7.0])
    assert one is not None
    assert (one.p50, one.p99, one.max) == (7.0, 7.0, 7.0)
    three = summarize([30.0, 10.0, 20.0])
    assert three is not None
    assert (three.p50, three.p99) == (20.0, 30.0)
    assert summarize([]) is None


def test_the_table_has_the_run_and_one_row_per_figure_with_its_goal() -> None:
    info = RunInfo(
        date="2026-11-27 21:00 UTC",
        command="python -m ops.bench.scale --partitions 3000",
        partitions=3000,
        session_timeout_ms=6000,
        load="1.00/1.00/1.00 at the start, 2.00/2.00/2.00 at the end (1/5/15 min)",
    )
    table = markdown_table(
        info,
        [
            Figure("idle: ISR shrinks", per_broker({2: 0.0, 1: 3.0}, digits=0), "0"),
            Figure("idle: ZooKeeper CPU", fmt(None, "%")),
        ],
    )
    assert table.splitlines() == [
        "Scale figures, 2026-11-27 21:00 UTC: `python -m ops.bench.scale --partitions 3000`",
        "3000 partitions, RF 3, min.insync.replicas=2, 3 broker processes, "
        "zookeeper.session.timeout.ms=6000; load average 1.00/1.00/1.00 at the start, "
        "2.00/2.00/2.00 at the end (1/5/15 min)",
        "",
        "| Figure | Measured | Goal |",
        "|---|---|---|",
        "| idle: ISR shrinks | broker 1: 3, broker 2: 0 | 0 |",
        "| idle: ZooKeeper CPU | n/a | — |",
    ]
    assert fmt(12.345, "%") == "12.3 %"
    assert fmt(1999.6, "ms", 0) == "2000 ms"


def test_leadership_is_balanced_and_each_brokers_partitions_move_to_both_survivors() -> None:
    assignment = replica_assignment(3000)
    assert all(sorted(replicas) == [1, 2, 3] for replicas in assignment.values())
    assert Counter(replicas[0] for replicas in assignment.values()) == {1: 1000, 2: 1000, 3: 1000}
    led = led_by_victim(3000)
    assert len(led) == 1000
    # The first follower is who takes over on a shutdown: half of broker 1's go to each survivor.
    assert Counter(assignment[p][1] for p in led) == {2: 500, 3: 500}
    assert [assignment[p] for p in (0, 1, 3)] == [[1, 2, 3], [2, 3, 1], [1, 3, 2]]


def test_the_options_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    arguments = parser.parse_args(["--idle-minutes", "0.1", "--phases", "kill,idle", "--partitions", "30"])
    assert (arguments.idle_minutes, arguments.phases, arguments.partitions) == (0.1, ("kill", "idle"), 30)
    defaults = parser.parse_args([])
    assert (defaults.partitions, defaults.idle_minutes, defaults.session_timeout_ms) == (3000, 10.0, 6000)
    assert defaults.phases == ("idle", "shutdown", "kill")
    for bad, message in (
        (["--phases", "idle,reboot"], "unknown phase(s) reboot"),
        (["--partitions", "0"], "'0' must be positive"),
        (["--idle-minutes", "soon"], "'soon' is not a number"),
    ):
        with pytest.raises(SystemExit) as exited:
            parser.parse_args(bad)
        assert exited.value.code == 2
        assert message in capsys.readouterr().err
