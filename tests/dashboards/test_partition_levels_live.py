"""The dashboards and alert rules at ``metrics.partition.level=topic`` and ``none``, live: three
broker processes exporting at that level, scraped by a real Prometheus with the rules loaded.

Scenario: topic ``orders`` (two partitions led by brokers 1 and 2, replication factor 3, min ISR 2);
acks=all produces; broker 3, a follower of both, is stalled (SIGSTOP) until it leaves both ISRs and
the shrink is scraped, then resumed until it is back. Then every panel's queries run as in
``test_live_dashboards.py``, the variables resolved first: at ``topic`` every panel returns data and
no series carries a ``partition`` label, and the partition panels the shrink moves show it; at
``none`` the panels over per-partition families return nothing and every other panel returns data.
The alert rules evaluate without errors at both levels.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from actors.common.types import TopicPartition
from ops.local.prometheus import LocalPrometheus, ScrapeTarget
from ops.metric_catalog import TOPIC_AGGREGATION
from tests.dashboards.grafana import BuiltIns, load_dashboards, substitute
from tests.dashboards.promql import metric_names as names_in
from tests.dashboards.promtool import ALERT_RULES
from tests.dashboards.test_live_dashboards import (
    CLUSTER,
    PROPERTIES,
    SCRAPE_INTERVAL_S,
    STEP_S,
    WAIT_S,
    resolve_variables,
    selector,
    wait_for_sample,
)
from tests.support.process_cluster import ProcessCluster, ProduceLoop

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.integration,
    pytest.mark.zk,
    pytest.mark.prometheus,
    pytest.mark.slow,
]

BROKERS = (1, 2, 3)
ORDERS = (TopicPartition("orders", 0), TopicPartition("orders", 1))
STALLED = 3
PER_PARTITION = frozenset(TOPIC_AGGREGATION)
# Panels with no data by nature in this scenario at every level, and why.
EMPTY_BY_NATURE = {("actorlog / Replication", "Leader election time"): "no leader is elected after the start"}
# ... and at ``topic`` (nothing goes under min ISR).
EMPTY_AT_TOPIC = {
    **EMPTY_BY_NATURE,
    ("actorlog / Topics and partitions", "Partitions under min ISR"): "no ISR below 2",
}
# Partition panels the stall must move at ``topic`` (one line per topic, from the folded series).
MOVED_AT_TOPIC = {
    ("actorlog / Topics and partitions", "Under-replicated partitions"),
    ("actorlog / Topics and partitions", "Partitions at min ISR"),
    ("actorlog / Topics and partitions", "ISR size changes in 15 minutes (top 10)"),
}


async def run_scenario(cluster: ProcessCluster, prometheus: LocalPrometheus) -> None:
    await cluster.create_topic("orders", {0: [1, 2, STALLED], 1: [2, 1, STALLED]})
    for tp in ORDERS:
        await cluster.wait_for_partition_state(tp, lambda s: len(s.isr) == 3, timeout_s=WAIT_S)
    await prometheus.wait_for_targets_up(len(BROKERS), timeout_s=WAIT_S)
    produce = ProduceLoop(cluster, ORDERS[0])
    produce.start()
    try:
        await produce.wait_for_acks(10, timeout_s=WAIT_S)
        cluster.pause(STALLED)
        for tp in ORDERS:
            await cluster.wait_for_partition_state(tp, lambda s: STALLED not in s.isr, timeout_s=WAIT_S)
        for leader in (1, 2):
            await wait_for_sample(
                prometheus,
                f"kafka_server_replicamanager_underreplicatedpartitions{selector(broker=leader)} > 0",
                what=f"broker {leader}'s shrink scraped",
            )
        cluster.resume(STALLED)
        for tp in ORDERS:
            await cluster.wait_for_partition_state(tp, lambda s: STALLED in s.isr, timeout_s=WAIT_S)
    finally:
        await produce.stop()
    await wait_for_sample(
        prometheus,
        f"kafka_server_replicamanager_underreplicatedpartitions{selector(broker=1)} == 0",
        what="the recovery scraped",
    )
    # The expansion is propagated 5-7.5 s later: the delay histogram gets its observation.
    await wait_for_sample(
        prometheus,
        f"kafka_server_isrchangepropagation_delay_seconds_count{selector(broker=1)} > 0",
        what="a propagation scraped",
    )


@pytest.mark.parametrize("level", ["topic", "none"])
async def test_dashboards_and_alerts_at_a_partition_level(
    level: str, zk_connect_string: str, tmp_path: Path, prometheus_binary: Path
) -> None:
    dashboards = load_dashboards()
    properties = {**PROPERTIES, "metrics.partition.level": level}
    (tmp_path / "cluster").mkdir()
    async with ProcessCluster(zk_connect_string, tmp_path / "cluster", properties) as cluster:
        await asyncio.gather(*(cluster.start(broker_id) for broker_id in BROKERS))
        async with LocalPrometheus(
            tmp_path / "prometheus",
            scrape_interval_s=SCRAPE_INTERVAL_S,
            rule_files=[ALERT_RULES],
            cluster=CLUSTER,
            binary=prometheus_binary,
        ) as prometheus:
            prometheus.set_targets(
                ScrapeTarget(f"127.0.0.1:{broker.port}", {"broker": str(broker.broker_id)})
                for broker in cluster.brokers.values()
            )
            start = await prometheus.now()
            await run_scenario(cluster, prometheus)
            end = await prometheus.now()
            start = end - math.floor((end - start) / STEP_S) * STEP_S

            builtins = BuiltIns(scrape_interval_s=SCRAPE_INTERVAL_S, step_s=STEP_S, range_s=end - start)
            empty: set[tuple[str, str]] = set()
            with_data: set[tuple[str, str]] = set()
            moved: set[tuple[str, str]] = set()
            partition_labelled: list[str] = []
            per_partition_panels: set[tuple[str, str]] = set()
            for dashboard in dashboards:
                values, options = await resolve_variables(
                    prometheus, dashboard.variables(), start=start, end=end
                )
                # The topic variable comes from a family every level exports.
                assert "orders" in options["topic"], options
                values.update(builtins.values())
                for target in dashboard.targets():
                    key = (dashboard.title, target.panel_title)
                    expr = substitute(target.expr, values)
                    series = await prometheus.query_range(expr, start=start, end=end, step_s=STEP_S)
                    finite = [v for s in series for v in s.finite_values()]
                    (with_data if finite else empty).add(key)
                    if any(v != 0 for v in finite):
                        moved.add(key)
                    partition_labelled += [expr for s in series if "partition" in s.labels]
                    if names_in(target.expr) & PER_PARTITION:
                        per_partition_panels.add(key)
            # A panel is empty only if every one of its queries is.
            empty -= with_data
            assert len(per_partition_panels) >= 10
            assert partition_labelled == []
            if level == "topic":
                assert empty == set(EMPTY_AT_TOPIC), sorted(empty)
                assert moved >= MOVED_AT_TOPIC, sorted(MOVED_AT_TOPIC - moved)
            else:
                # Only the panels over per-partition families (all of their queries) are empty.
                only_per_partition = {
                    key
                    for key in per_partition_panels
                    if all(
                        names_in(t.expr) & PER_PARTITION
                        for d in dashboards
                        for t in d.targets()
                        if (d.title, t.panel_title) == key
                    )
                }
                expected = only_per_partition | set(EMPTY_BY_NATURE)
                assert empty == expected, sorted(empty ^ expected)

            rules = [rule for group in await prometheus.rule_groups() for rule in group["rules"]]
            assert rules
            assert {rule["name"]: rule["health"] for rule in rules if rule["health"] != "ok"} == {}
            assert "firing" not in {rule["state"] for rule in rules}
