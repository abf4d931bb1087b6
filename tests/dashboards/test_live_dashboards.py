"""Every dashboard panel and template variable returns data from a real Prometheus scraping a real
cluster through faults.

Three broker processes on a real ZooKeeper; a real Prometheus (``ops/local/prometheus.py``) scrapes them
every second with the alert rules loaded. The scenario: topic ``orders`` (replication factor 3,
min ISR 2) led by a broker that is not the controller, and ``lonely`` (one replica, on the same
broker, created with ``min.insync.replicas=1``); acks=all produces; the follower that is neither
leader nor controller is stalled (SIGSTOP) until it leaves the ISR; the leader is killed
(SIGKILL), so the controller's broker leads ``orders`` alone (under min ISR) and ``lonely`` is
offline; the follower resumes and rejoins the ISR. Each step waits on a ZooKeeper watch or on
what Prometheus has stored, bounded.

Then every panel's queries, with the template variables substituted as Grafana would (the
variables' own queries resolved first, "All" selected), run as range queries over the scenario
and must return at least one finite value. Panels the scenario must move (the ISR shrank, the
ladder climbed, a leader was elected...) must show a non-zero value. The alert rules evaluate
without errors and the ladder's alerts are pending, not firing, at the end. Each live broker's
``/metrics`` passes ``promtool check metrics``.
"""

from __future__ import annotations

import asyncio
import math
import signal
from pathlib import Path

import aiohttp
import pytest
import yaml

from actors.common.types import TopicPartition
from actors.server import zk_data
from ops.local.prometheus import InstantSample, LocalPrometheus, ScrapeTarget
from tests.dashboards.grafana import BuiltIns, format_value, load_dashboards, substitute, variable_query
from tests.dashboards.promql import split_label_values
from tests.dashboards.promtool import ALERT_RULES, lint_exposition
from tests.support.process_cluster import ProcessCluster, ProduceLoop

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk, pytest.mark.prometheus]

CLUSTER = "live"
BROKERS = (1, 2, 3)
SCRAPE_INTERVAL_S = 1.0
STEP_S = 1.0
SESSION_MS = 4_000
ORDERS = TopicPartition("orders", 0)
LONELY = TopicPartition("lonely", 0)
PROPERTIES = {
    "zookeeper.session.timeout.ms": str(SESSION_MS),
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "min.insync.replicas": "2",
}
WAIT_S = 30.0

# Panels (dashboard title, panel title) with no data by nature in this scenario, with the reason.
# Each must really be empty: an entry that starts returning data fails the test, so it is removed.
NO_DATA_BY_NATURE: dict[tuple[str, str], str] = {}

# Panels the scenario must move, with what moves them; a zero everywhere would mean the panel
# (or the broker's metric) does not see the fault.
MUST_MOVE: dict[tuple[str, str], str] = {
    ("actorlog / Replication", "Under-replicated partitions"): "orders lost its follower, then its leader",
    ("actorlog / Replication", "Partitions at min ISR"): "orders at ISR 2 = min ISR",
    ("actorlog / Replication", "Partitions under min ISR"): "orders led by the controller's broker alone",
    ("actorlog / Replication", "Offline partitions"): "lonely's only replica was killed",
    ("actorlog / Replication", "Active controllers"): "one controller throughout",
    ("actorlog / Replication", "Controller epoch"): "a controller was elected",
    ("actorlog / Replication", "ISR shrinks per broker"): "the stalled follower left the ISR",
    ("actorlog / Replication", "ISR expands per broker"): "the resumed follower rejoined",
    ("actorlog / Replication", "ISR change propagation checks"): "ISR changes were propagated",
    ("actorlog / Replication", "Pending ISR changes"): "a change waits 5 s before propagation",
    ("actorlog / Replication", "Leader elections"): "the killed leader's partitions were re-elected",
    ("actorlog / Replication", "Produce throughput by topic"): "acks=all produces to orders",
    ("actorlog / Replication", "Purgatory size"): "acks=all produces waited for the stalled follower",
    ("actorlog / Topics and partitions", "Under-replicated partitions"): "orders-0",
    ("actorlog / Topics and partitions", "Partitions under min ISR"): "orders-0",
    (
        "actorlog / Topics and partitions",
        "ISR size changes in 15 minutes (top 10)",
    ): "orders-0 shrank and grew",
    ("actorlog / Topics and partitions", "Leader epoch"): "orders-0 changed leader",
}


async def wait_for_sample(prometheus: LocalPrometheus, expr: str, *, what: str) -> list[InstantSample]:
    """Wait until ``expr`` returns samples in Prometheus (a condition on what it has scraped)."""

    async def probe() -> list[InstantSample] | None:
        return await prometheus.query(expr) or None

    return await prometheus.wait_until(probe, timeout_s=WAIT_S, what=what)


def selector(**labels: object) -> str:
    return "{" + ",".join(f'{key}="{value}"' for key, value in {"cluster": CLUSTER, **labels}.items()) + "}"


async def run_scenario(cluster: ProcessCluster, prometheus: LocalPrometheus) -> tuple[int, int, int]:
    """Stall a follower, kill the leader, resume the follower. Returns (controller, leader, follower)."""
    await cluster.wait_for_znode(zk_data.CONTROLLER_PATH, lambda data: data is not None, timeout_s=WAIT_S)
    controller, _ = await cluster.controller()
    leader, follower = (b for b in BROKERS if b != controller)
    await cluster.create_topic(ORDERS.topic, {0: [leader, controller, follower]})
    await cluster.create_topic(LONELY.topic, {0: [leader]}, {"min.insync.replicas": "1"})
    await cluster.wait_for_partition_state(ORDERS, lambda s: len(s.isr) == 3, timeout_s=WAIT_S)
    await cluster.wait_for_partition_state(LONELY, lambda s: s.leader == leader, timeout_s=WAIT_S)
    await prometheus.wait_for_targets_up(len(BROKERS), timeout_s=WAIT_S)

    produce = ProduceLoop(cluster, ORDERS)
    produce.start()
    try:
        await produce.wait_for_acks(20, timeout_s=WAIT_S)
        # A stalled follower leaves the ISR: under-replicated, at min ISR.
        cluster.pause(follower)
        await cluster.wait_for_partition_state(ORDERS, lambda s: follower not in s.isr, timeout_s=WAIT_S)
        await wait_for_sample(
            prometheus,
            f"kafka_server_replicamanager_underreplicatedpartitions{selector(broker=leader)} > 0",
            what="the shrink scraped",
        )
        # The leader dies: the controller's broker leads alone (under min ISR); lonely is offline.
        await cluster.kill(leader, signal.SIGKILL)
        await cluster.wait_for_partition_state(ORDERS, lambda s: s.leader == controller, timeout_s=WAIT_S)
        await wait_for_sample(
            prometheus,
            f"kafka_server_replicamanager_underminisrpartitioncount{selector(broker=controller)} > 0",
            what="under min ISR scraped",
        )
        await wait_for_sample(
            prometheus,
            f"kafka_controller_kafkacontroller_offlinepartitionscount{selector(broker=controller)} > 0",
            what="the offline partition scraped",
        )
        # The follower resumes, catches up from the new leader and rejoins.
        cluster.resume(follower)
        await cluster.wait_for_partition_state(ORDERS, lambda s: follower in s.isr, timeout_s=WAIT_S)
    finally:
        await produce.stop()
    await wait_for_sample(
        prometheus,
        f"kafka_server_replicamanager_isrexpands_total{selector(broker=controller)} > 0",
        what="the expansion scraped",
    )
    # The expansion is propagated 5-7.5 s later: the delay histogram gets its observation.
    await wait_for_sample(
        prometheus,
        f"kafka_server_isrchangepropagation_delay_seconds_count{selector(broker=controller)} > 0",
        what="the propagation scraped",
    )
    return controller, leader, follower


async def resolve_variables(
    prometheus: LocalPrometheus, variables: list[dict[str, object]], *, start: float, end: float
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Grafana's resolution: each query variable in order, its query using those above it; the
    cluster under test selected, "All" for the others."""
    values: dict[str, str] = {}
    found: dict[str, list[str]] = {}
    for variable in variables:
        name = str(variable["name"])
        if variable["type"] != "query":
            continue
        match, label = split_label_values(substitute(variable_query(variable), values))
        options = await prometheus.label_values(label, match=match, start=start, end=end)
        found[name] = options
        if name == "cluster":
            values[name] = format_value(variable, [CLUSTER], all_selected=False)
        else:
            values[name] = format_value(variable, options, all_selected=bool(variable.get("includeAll")))
    return values, found


async def test_every_panel_and_variable_query_returns_data_from_a_cluster_under_faults(
    zk_connect_string: str, tmp_path: Path, promtool: Path, prometheus_binary: Path
) -> None:
    dashboards = load_dashboards()
    (tmp_path / "cluster").mkdir()
    async with ProcessCluster(zk_connect_string, tmp_path / "cluster", PROPERTIES) as cluster:
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
            controller, leader, follower = await run_scenario(cluster, prometheus)
            end = await prometheus.now()
            # Evaluate at ``end`` itself (the grid runs start, start + step, ... up to end): the
            # last waits saw an increase scraped just before ``end``, which a grid ending up to a
            # step earlier could leave outside every rate window.
            start = end - math.floor((end - start) / STEP_S) * STEP_S

            # ---------------------------------------------------------------- every panel
            builtins = BuiltIns(scrape_interval_s=SCRAPE_INTERVAL_S, step_s=STEP_S, range_s=end - start)
            empty: dict[tuple[str, str], list[str]] = {}
            still_zero: list[tuple[str, str]] = []
            checked = 0
            for dashboard in dashboards:
                values, options = await resolve_variables(
                    prometheus, dashboard.variables(), start=start, end=end
                )
                assert CLUSTER in options["cluster"]
                assert sorted(options["broker"]) == [str(b) for b in BROKERS]
                assert {ORDERS.topic, LONELY.topic} <= set(options["topic"])
                values.update(builtins.values())
                panels: dict[tuple[str, str], list[float]] = {}
                for target in dashboard.targets():
                    expr = substitute(target.expr, values)
                    series = await prometheus.query_range(expr, start=start, end=end, step_s=STEP_S)
                    checked += 1
                    key = (dashboard.title, target.panel_title)
                    finite = [v for s in series for v in s.finite_values()]
                    panels.setdefault(key, []).extend(finite)
                    if not finite:
                        empty.setdefault(key, []).append(f"{target.ref_id}: {expr}")
                for key, found_values in panels.items():
                    if key in MUST_MOVE and not any(v != 0 for v in found_values):
                        still_zero.append(key)
            assert checked > 50
            assert {key: exprs for key, exprs in empty.items() if key not in NO_DATA_BY_NATURE} == {}
            assert set(NO_DATA_BY_NATURE) <= set(empty), "an allow-listed panel has data: remove it"
            assert still_zero == []
            missing = set(MUST_MOVE) - {(d.title, t.panel_title) for d in dashboards for t in d.targets()}
            assert missing == set(), "a panel the scenario checks was renamed or removed"

            # ---------------------------------------------------------------- the alert rules
            rules = [rule for group in await prometheus.rule_groups() for rule in group["rules"]]
            # Every rule of the file is loaded (counted from the file: a new rule needs no edit here).
            in_file = yaml.safe_load(ALERT_RULES.read_text())["groups"]
            assert len(rules) == sum(len(group["rules"]) for group in in_file)
            assert {rule["name"]: rule["health"] for rule in rules if rule["health"] != "ok"} == {}
            states = {rule["name"]: rule["state"] for rule in rules}
            # Still degraded at the end (the leader stays dead), but not for long enough to fire.
            assert states["ActorlogUnderReplicatedPartitions"] == "pending"
            assert states["ActorlogPartitionsAtMinIsr"] == "pending"
            assert states["ActorlogOfflinePartitions"] == "pending"
            assert "firing" not in states.values(), states
            assert states["ActorlogReplicaLostFlushedRecords"] == "inactive"  # the files were not damaged
            assert states["ActorlogRackConstraintViolated"] == "inactive"  # no broker has a rack

            # ---------------------------------------------------------------- /metrics lint
            async with aiohttp.ClientSession() as session:
                for broker_id in (controller, follower):
                    url = cluster.brokers[broker_id].url + "/metrics"
                    async with session.get(url) as response:
                        exposition = await response.text()
                    if broker_id == follower:
                        # A follower's exposition has the fetcher families (clientId labels).
                        assert "kafka_server_fetcherlagmetrics_consumerlag{" in exposition
                    assert await asyncio.to_thread(lint_exposition, promtool, exposition) == []
            assert leader not in {b.broker_id for b in cluster.live_endpoints()}
