"""The broker's /metrics families against the catalogue, from a real (in-process) cluster."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from actors.common.errors import ErrorCode
from actors.common.names import controller_ref
from actors.common.protocol import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
)
from actors.common.types import TopicPartition
from ops.broker_metrics import broker_metric_families, collect_node
from ops.metric_catalog import CATALOG, metric_names
from ops.sim.cluster import LOG_DIR
from runtime.metrics import NodeMetrics
from runtime.storage.fs import DiskFault
from tests.support.cluster import InProcessCluster, batch

TP = TopicPartition("metrics", 0)


def exposition(cluster: InProcessCluster, broker_id: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    node = cluster.brokers[broker_id].node
    assert node is not None
    metrics = NodeMetrics()
    metrics.add_collector(
        lambda: broker_metric_families(node.system, collect_node(node.system, node.coordinator.statistics()))
    )
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


@pytest.mark.asyncio
async def test_every_catalogued_metric_is_exported_from_start_up_and_nothing_else() -> None:
    async with InProcessCluster() as cluster:
        await cluster.start_broker(1)  # with the controller, active on this broker
        samples = exposition(cluster, 1)
    exported = set(samples)
    assert exported <= metric_names(), sorted(exported - metric_names())
    missing = {
        spec.name
        for spec in CATALOG
        # Series labelled by values unknown at start-up appear with them: per topic and partition
        # with the partition, per source broker with the first fetcher, per error and per
        # controller event type when they first happen.
        if not set(spec.labels) & {"topic", "error", "source_broker", "event"}
        and not set(spec.sample_names) & exported
        # The broker process watches its event loop (ops/broker_main.py, runtime/loop_lag.py): an
        # in-process node on virtual time has no loop of its own to watch.
        and not spec.name.startswith("actorlog_event_loop_")
    }
    assert missing == set()
    assert {labels["outcome"] for labels, _ in samples["kafka_server_isrchangepropagation_checks_total"]} == {
        "written", "deferred", "forced",
    }  # fmt: skip


@pytest.mark.asyncio
async def test_replication_metrics_follow_the_partitions() -> None:
    cluster = InProcessCluster(config_overrides={"replica_lag_time_max_ms": 1_000})
    async with cluster:
        await cluster.start_brokers(1, 2, 3)
        await cluster.create_topic(TP.topic, {0: (1, 2, 3)})
        # Broker 3 dies (SIGKILL): the leader drops it from the ISR after the lag, long before its
        # session expires and the controller hears of it.
        await cluster.kill(3)
        task = asyncio.ensure_future(cluster.produce(1, TP, batch(b"a", b"b"), acks=1))
        await cluster.settle()
        assert task.done()
        await cluster.advance(1_600)
        samples = exposition(cluster, 1)
        follower = exposition(cluster, 2)

    def value(
        name: str, source: dict[str, list[tuple[dict[str, str], float]]] = samples, **labels: str
    ) -> float:
        return next(v for lbls, v in source[name] if all(lbls.get(k) == x for k, x in labels.items()))

    assert value("kafka_server_replicamanager_isrshrinks_total") == 1
    assert value("kafka_server_replicamanager_leadercount") == 1
    assert value("kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert value("kafka_cluster_partition_insyncreplicascount", topic="metrics", partition="0") == 2
    assert value("kafka_cluster_partition_underreplicated", topic="metrics", partition="0") == 1
    assert value("kafka_log_log_logendoffset", topic="metrics", partition="0") == 2
    assert value("kafka_server_brokertopicmetrics_messagesin_total", topic="metrics") == 2
    assert value("kafka_server_isrchangepropagation_pending_changes") == 1
    # On the follower the partition gauges are 0 and it counts no led partitions.
    assert value("kafka_server_replicamanager_leadercount", follower) == 0
    assert value("kafka_cluster_partition_insyncreplicascount", follower, topic="metrics", partition="0") == 0
    assert value("kafka_server_replicafetchermanager_maxlag", follower, clientId="Replica") == 0


def test_a_registry_per_node_never_touches_the_global_registry() -> None:
    metrics = NodeMetrics()
    assert isinstance(metrics.registry, CollectorRegistry)
    assert metrics.registry is not REGISTRY


@pytest.mark.asyncio
async def test_a_failed_log_dir_is_counted_offline_and_halts_the_broker() -> None:
    """Kafka's OfflineLogDirectoryCount: 0 while the log dir works; a write error on it marks it
    offline (what the gauge exports) and halts the broker, the produce answered
    KAFKA_STORAGE_ERROR."""
    async with InProcessCluster() as cluster:
        await cluster.start_brokers(1, 2)
        await cluster.create_topic(TP.topic, {0: (1, 2)})
        assert exposition(cluster, 1)["kafka_log_logmanager_offlinelogdirectorycount"] == [({}, 0.0)]
        node = cluster.brokers[1].node
        assert node is not None
        cluster.brokers[1].fs.inject_fault(DiskFault.WRITE_ERROR)
        response = await cluster.complete(cluster.produce(1, TP, batch(b"a"), acks=1))
        assert [p.error_code for p in response.partitions] == [ErrorCode.KAFKA_STORAGE_ERROR]
        await cluster.wait_for(lambda: cluster.brokers[1].node is None)
        assert node.log_manager.offline_reason is not None
        assert cluster.brokers[1].exit_reason is not None  # it ended on its own, non-zero

        # The gauge reads the log manager's state (a halting node is gone before a scrape).
        live = cluster.brokers[2].node
        assert live is not None
        live.log_manager.mark_offline("injected for the gauge")
        assert exposition(cluster, 2)["kafka_log_logmanager_offlinelogdirectorycount"] == [({}, 1.0)]


@pytest.mark.asyncio
async def test_repairs_made_while_loading_the_log_dir_are_counted() -> None:
    """A broker stopped, its files damaged (a stray copy of a segment, a garbage leader epoch
    checkpoint), started again: the repairs show in kafka_log_recovery_actions_total."""
    async with InProcessCluster() as cluster:
        await cluster.start_brokers(1, 2)
        await cluster.create_topic(TP.topic, {0: (1, 2)})
        await cluster.complete(cluster.produce(1, TP, batch(b"a", b"b", b"c"), acks=-1))
        before = {s[0]["action"]: s[1] for s in exposition(cluster, 2)["kafka_log_recovery_actions_total"]}
        assert set(before.values()) == {0.0}
        await cluster.stop_broker(2)
        fs, directory = cluster.brokers[2].fs, f"{LOG_DIR}/{TP}"
        fs.write_file(
            f"{directory}/00000000000000000002.log", fs.read_file(f"{directory}/{0:020d}.log"), fsync=True
        )
        fs.write_file(f"{directory}/leader-epoch-checkpoint", b"garbage", fsync=True)
        await cluster.start_broker(2)
        after = {s[0]["action"]: s[1] for s in exposition(cluster, 2)["kafka_log_recovery_actions_total"]}
        assert after["file_moved_aside"] == 1.0
        assert after["checkpoint_rebuilt"] == 1.0
        assert after["records_missing"] == 0.0
        assert exposition(cluster, 2)["kafka_log_recovery_truncated_bytes_total"] == [({}, 0.0)]


@pytest.mark.asyncio
async def test_a_reassignment_is_counted_by_its_leader_and_its_bytes_by_both_ends() -> None:
    cluster = InProcessCluster(config_overrides={"replica_lag_time_max_ms": 1_000})
    async with cluster:
        await cluster.start_brokers(1, 2, 3)
        await cluster.create_topic(TP.topic, {0: (2,)})
        produced = await cluster.complete(cluster.produce(2, TP, batch(b"a", b"b"), acks=1))
        assert produced.partitions[0].error_code is ErrorCode.NONE
        cut = cluster.cut(3, 2)  # the new replica cannot fetch yet
        request = AlterPartitionReassignmentsRequest(
            partitions=(ReassignablePartition(topic=TP.topic, partition=0, replicas=(2, 3)),)
        )
        response = await cluster.complete(
            cluster.client_node.ask(controller_ref(1), request, timeout_ms=10_000)
        )
        assert isinstance(response, AlterPartitionReassignmentsResponse)
        assert [r.error_code for r in response.results] == [ErrorCode.NONE]
        await cluster.advance(1_000)
        leader = exposition(cluster, 2)
        assert _value(leader, "kafka_server_replicamanager_reassigningpartitions") == 1
        assert _value(leader, "kafka_server_replicamanager_underreplicatedpartitions") == 0  # KIP-352
        cluster.heal(cut)
        await cluster.wait_for(lambda: cluster.assignment(TP) == (2, 3), within_ms=30_000)
        await cluster.wait_for(lambda: not cluster.partition(2, TP).statistics().reassigning, within_ms=5_000)
        leader, follower = exposition(cluster, 2), exposition(cluster, 3)
    assert _value(leader, "kafka_server_replicamanager_reassigningpartitions") == 0
    served = _value(leader, "kafka_server_brokertopicmetrics_reassignmentbytesout_total", topic=TP.topic)
    fetched = _value(follower, "kafka_server_brokertopicmetrics_reassignmentbytesin_total", topic=TP.topic)
    assert served == fetched > 0
    assert (
        _value(follower, "kafka_server_brokertopicmetrics_replicationbytesin_total", topic=TP.topic)
        == fetched
    )


def _value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return next(v for lbls, v in samples[name] if all(lbls.get(k) == x for k, x in labels.items()))
