"""``metrics.partition.level``: the exporter's per-partition families at each level, from one
in-process cluster's statistics (the same snapshot rendered at every level, so the folded values
are compared with the per-partition ones they come from), and the config key."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from actors.common.types import TopicPartition
from ops.broker_metrics import NodeSnapshot, broker_metric_families, collect_node
from ops.config import load_broker_settings
from ops.metric_catalog import CATALOG, TOPIC_AGGREGATION, PartitionLevel, labels_at, metric_names, spec
from ops.properties import ConfigError
from runtime.metrics import NodeMetrics
from runtime.system import ActorSystem
from tests.support.cluster import InProcessCluster, batch

Samples = dict[str, list[tuple[dict[str, str], float]]]
PER_PARTITION = frozenset(TOPIC_AGGREGATION)


def render(system: ActorSystem, snapshot: NodeSnapshot, level: PartitionLevel) -> tuple[Samples, set[str]]:
    """The exposition at ``level``: samples by name, and the family names with a HELP line."""
    metrics = NodeMetrics()
    metrics.add_collector(lambda: broker_metric_families(system, snapshot, partition_level=level))
    text = generate_latest(metrics.registry).decode()
    samples: Samples = {}
    families = set()
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples, families


@pytest.fixture(scope="module")
def expositions() -> dict[PartitionLevel, tuple[Samples, set[str]]]:
    """Broker 1 of three: leader of levels-0 and levels-1 (with ISR 1,2 after broker 3 is cut off
    from it), follower of other-0 (led by 2), with records in each."""

    async def build() -> dict[PartitionLevel, tuple[Samples, set[str]]]:
        cluster = InProcessCluster(config_overrides={"replica_lag_time_max_ms": 1_000})
        async with cluster:
            await cluster.start_brokers(1, 2, 3)
            await cluster.create_topic("levels", {0: (1, 2, 3), 1: (1, 2, 3)})
            await cluster.create_topic("other", {0: (2, 1, 3)})
            for tp, records in (
                (TopicPartition("levels", 0), batch(b"a", b"b")),
                (TopicPartition("levels", 1), batch(b"c", b"d", b"e")),
                (TopicPartition("other", 0), batch(b"f")),
            ):
                leader = 2 if tp.topic == "other" else 1
                answer = await cluster.produce(leader, tp, records, acks=-1)
                assert answer.partitions[0].error_code.name == "NONE"
            cut = cluster.cut(1, 3)
            await cluster.produce(1, TopicPartition("levels", 1), batch(b"g"), acks=1)
            await cluster.wait_for(
                lambda: 3 not in cluster.partition(1, TopicPartition("levels", 1)).state.isr
            )
            cluster.heal(cut)
            node = cluster.brokers[1].node
            assert node is not None
            snapshot = collect_node(node.system, node.coordinator.statistics())
            return {level: render(node.system, snapshot, level) for level in PartitionLevel}

    return asyncio.run(build())


def value(samples: Samples, name: str, **labels: str) -> float:
    (found,) = [v for lbls, v in samples[name] if lbls == labels]
    return found


def test_partition_level_exports_one_series_per_partition(
    expositions: dict[PartitionLevel, tuple[Samples, set[str]]],
) -> None:
    samples, _ = expositions[PartitionLevel.PARTITION]
    assert value(samples, "kafka_cluster_partition_underreplicated", topic="levels", partition="1") == 1
    assert value(samples, "kafka_cluster_partition_insyncreplicascount", topic="levels", partition="1") == 2
    assert value(samples, "kafka_cluster_partition_insyncreplicascount", topic="levels", partition="0") in (
        2,
        3,
    )
    assert value(samples, "kafka_log_log_logendoffset", topic="levels", partition="1") == 4
    assert value(samples, "kafka_log_log_logendoffset", topic="other", partition="0") == 1
    lag_labels = {frozenset(labels) for labels, _ in samples["kafka_server_fetcherlagmetrics_consumerlag"]}
    assert lag_labels == {frozenset({"clientId", "topic", "partition"})}


def test_topic_level_folds_each_family_as_the_catalogue_says(
    expositions: dict[PartitionLevel, tuple[Samples, set[str]]],
) -> None:
    per_partition, _ = expositions[PartitionLevel.PARTITION]
    per_topic, families = expositions[PartitionLevel.TOPIC]
    checked = 0
    for name, how in TOPIC_AGGREGATION.items():
        expected: dict[frozenset[tuple[str, str]], list[float]] = {}
        for labels, number in per_partition.get(name, []):
            key = frozenset((k, v) for k, v in labels.items() if k != "partition")
            expected.setdefault(key, []).append(number)
        folded = {key: sum(numbers) if how == "sum" else max(numbers) for key, numbers in expected.items()}
        got = {frozenset(labels.items()): number for labels, number in per_topic.get(name, [])}
        assert got == folded, name
        assert all("partition" not in labels for labels, _ in per_topic.get(name, [])), name
        checked += bool(got)
    assert checked >= 11  # every family but the follower lag has series on broker 1
    # Summed: both partitions' records and under-replicated counts; maxed: the leader epoch.
    assert value(per_topic, "kafka_log_log_logendoffset", topic="levels") == 2 + 4
    assert value(per_topic, "kafka_cluster_partition_underreplicated", topic="levels") == 1
    assert value(per_topic, "kafka_cluster_partition_replicascount", topic="levels") == 6
    assert value(per_topic, "kafka_cluster_partition_leaderepoch", topic="levels") == max(
        value(per_partition, "kafka_cluster_partition_leaderepoch", topic="levels", partition=p) for p in "01"
    )
    # The family still has its HELP and TYPE, with the labels the catalogue gives for the level.
    assert "kafka_cluster_partition_underreplicated" in families
    assert labels_at(spec("kafka_server_fetcherlagmetrics_consumerlag"), PartitionLevel.TOPIC) == (
        "clientId", "topic",
    )  # fmt: skip


def test_none_level_drops_the_per_partition_families_and_keeps_everything_else(
    expositions: dict[PartitionLevel, tuple[Samples, set[str]]],
) -> None:
    full, _ = expositions[PartitionLevel.PARTITION]
    none, none_families = expositions[PartitionLevel.NONE]
    assert not PER_PARTITION & none_families
    assert not PER_PARTITION & set(none)
    assert set(full) - set(none) == PER_PARTITION & set(full)
    assert set(none) <= metric_names()
    # Broker-level totals remain, with the same values (the same snapshot).
    for name in (
        "kafka_server_replicamanager_underreplicatedpartitions",
        "kafka_server_replicamanager_partitioncount",
        "kafka_server_replicamanager_leadercount",
    ):
        assert none[name] == full[name], name
    assert value(none, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert value(none, "kafka_server_brokertopicmetrics_messagesin_total", topic="levels") > 0
    assert {s.name for s in CATALOG if labels_at(s, PartitionLevel.NONE) is None} == PER_PARTITION


_BASE = {
    "broker.id": "1",
    "listeners": "HTTP://127.0.0.1:19092",
    "log.dirs": "/var/lib/actorlog",
    "zookeeper.connect": "zk:2181",
    "internal.auth.secret": "s3cret-s3cret-s3cret",
}


def _settings(**extra: str) -> PartitionLevel:
    overrides = [f"{k}={v}" for k, v in {**_BASE, **extra}.items()]
    return load_broker_settings(overrides=overrides, environ={}).metrics_partition_level


def test_the_config_key_takes_the_three_levels_and_names_them_when_refused() -> None:
    assert _settings() is PartitionLevel.PARTITION
    for level in PartitionLevel:
        assert _settings(**{"metrics.partition.level": level.value}) is level
    assert _settings(**{"metrics.partition.level": "Topic"}) is PartitionLevel.TOPIC
    with pytest.raises(ConfigError) as refused:
        _settings(**{"metrics.partition.level": "broker"})
    assert str(refused.value) == "metrics.partition.level must be one of partition, topic, none, got 'broker'"
