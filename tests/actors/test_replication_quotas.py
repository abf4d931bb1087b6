"""Replication quotas on the virtual-time cluster: dynamic broker configs reach running brokers, a
replica that joins late catches up at about the throttled rate (leader side or follower side),
and in-sync replicas are never throttled, so the ISR does not shrink under a throttle."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import pytest
import pytest_asyncio

from actors.common.client_protocol import (
    AlterableConfig,
    AlterConfigOp,
    ConfigResourceType,
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from actors.common.errors import ErrorCode
from actors.common.names import admin_ref
from actors.common.types import TopicPartition
from actors.server.replication_quota import UNBOUNDED_RATE
from tests.support.cluster import InProcessCluster, batch, started

pytestmark = pytest.mark.asyncio

TP = TopicPartition("moving", 0)
REPLICAS = {0: (1, 2, 3)}
FETCH_MAX_BYTES = 8_192
RECORD = b"r" * 500
RECORDS_PER_BATCH = 4  # ~2 KB batches: a fetch carries up to four
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[InProcessCluster]:
    cluster = await started(1, 2, others=(3,), replica_fetch_max_bytes=FETCH_MAX_BYTES)
    try:
        yield cluster
    finally:
        await cluster.__aexit__(None, None, None)


async def alter(
    cluster: InProcessCluster,
    via: int,
    resource_type: ConfigResourceType,
    name: str,
    changes: Mapping[str, str | None],
) -> IncrementalAlterConfigsResponse:
    request = IncrementalAlterConfigsRequest(
        resource_type=resource_type,
        resource_name=name,
        configs=tuple(
            AlterableConfig(name=k, op=AlterConfigOp.SET, value=v)
            if v is not None
            else AlterableConfig(name=k, op=AlterConfigOp.DELETE)
            for k, v in changes.items()
        ),
    )
    response = await cluster.complete(
        cluster.client_node.ask(admin_ref(via), request, timeout_ms=30_000), step_ms=10
    )
    assert isinstance(response, IncrementalAlterConfigsResponse)
    await cluster.advance(100)  # the change notification reaches every broker
    return response


async def alter_ok(
    cluster: InProcessCluster,
    via: int,
    resource_type: ConfigResourceType,
    name: str,
    changes: Mapping[str, str | None],
) -> None:
    response = await alter(cluster, via, resource_type, name, changes)
    assert response.error_code is ErrorCode.NONE, response


async def fill_backlog(cluster: InProcessCluster, batches: int) -> int:
    """Produce while broker 3 is down (ISR [1, 2]); the bytes of the leader's log."""
    for _ in range(batches):
        response = await cluster.complete(cluster.produce(1, TP, batch(*[RECORD] * RECORDS_PER_BATCH)))
        assert response.partitions[0].error_code is ErrorCode.NONE
    return cluster.log(1, TP).size_in_bytes


async def catch_up(cluster: InProcessCluster, *, within_s: int) -> list[int]:
    """Start broker 3 and sample its log size every virtual second until it has the leader's log
    end offset; the samples (the first taken as it starts)."""
    target = cluster.log(1, TP).log_end_offset
    await cluster.start_broker(3)
    sizes = [cluster.log(3, TP).size_in_bytes]
    for _ in range(within_s):
        await cluster.advance(1_000)
        sizes.append(cluster.log(3, TP).size_in_bytes)
        if cluster.log(3, TP).log_end_offset >= target:
            return sizes
    raise AssertionError(f"broker 3 did not catch up within {within_s} s: {sizes}")


# --------------------------------------------------------------------- dynamic broker configs


async def test_dynamic_broker_configs_reach_running_brokers(cluster: InProcessCluster) -> None:
    await cluster.start_broker(3)
    quotas = {b: cluster.broker(b).quotas for b in (1, 2, 3)}
    assert all(q.leader.bound == UNBOUNDED_RATE for q in quotas.values())
    # The cluster default reaches every broker, whichever broker's admin wrote it.
    await alter_ok(cluster, 2, ConfigResourceType.BROKER, "", {FOLLOWER_RATE: "5000"})
    assert [quotas[b].follower.bound for b in (1, 2, 3)] == [5_000] * 3
    # A broker's own value wins over the default, for that broker only.
    await alter_ok(cluster, 3, ConfigResourceType.BROKER, "3", {FOLLOWER_RATE: "7000", LEADER_RATE: "9000"})
    assert [quotas[b].follower.bound for b in (1, 2, 3)] == [5_000, 5_000, 7_000]
    assert [quotas[b].leader.bound for b in (1, 2, 3)] == [UNBOUNDED_RATE, UNBOUNDED_RATE, 9_000]
    # DescribeConfigs tells the sources apart.
    request = DescribeConfigsRequest(
        resources=(DescribeConfigsResource(resource_type=ConfigResourceType.BROKER, resource_name="3"),)
    )
    described = await cluster.complete(cluster.client_node.ask(admin_ref(3), request, timeout_ms=30_000))
    assert isinstance(described, DescribeConfigsResponse)
    sources = {e.name: (e.value, e.source) for e in described.results[0].configs}
    assert sources[FOLLOWER_RATE] == ("7000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert sources[LEADER_RATE] == ("9000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    request = DescribeConfigsRequest(
        resources=(DescribeConfigsResource(resource_type=ConfigResourceType.BROKER, resource_name="1"),)
    )
    described = await cluster.complete(cluster.client_node.ask(admin_ref(1), request, timeout_ms=30_000))
    assert isinstance(described, DescribeConfigsResponse)
    sources = {e.name: (e.value, e.source) for e in described.results[0].configs}
    assert sources[FOLLOWER_RATE] == ("5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert LEADER_RATE not in sources
    # Deleting falls back: broker 3 to the default, then everyone to unbounded.
    await alter_ok(cluster, 3, ConfigResourceType.BROKER, "3", {FOLLOWER_RATE: None, LEADER_RATE: None})
    assert quotas[3].follower.bound == 5_000
    assert quotas[3].leader.bound == UNBOUNDED_RATE
    await alter_ok(cluster, 1, ConfigResourceType.BROKER, "", {FOLLOWER_RATE: None})
    assert all(q.follower.bound == UNBOUNDED_RATE for q in quotas.values())


async def test_a_restarted_broker_reads_its_dynamic_configs(cluster: InProcessCluster) -> None:
    await alter_ok(cluster, 1, ConfigResourceType.BROKER, "", {LEADER_RATE: "1234"})
    await cluster.start_broker(3)
    await cluster.advance(100)
    assert cluster.broker(3).quotas.leader.bound == 1_234


async def test_refused_broker_config_changes(cluster: InProcessCluster) -> None:
    response = await alter(
        cluster, 1, ConfigResourceType.BROKER, "1", {"num.partitions": "3", LEADER_RATE: "1"}
    )
    assert response.error_code is ErrorCode.INVALID_REQUEST
    assert response.error_message == (
        "Invalid config value for resource ConfigResource(type=BROKER, name='1'): "
        "Cannot update these configs dynamically: Set(num.partitions)"
    )
    response = await alter(cluster, 1, ConfigResourceType.BROKER, "", {FOLLOWER_RATE: "-5"})
    assert response.error_code is ErrorCode.INVALID_REQUEST
    assert "Value must be at least 0" in (response.error_message or "")
    response = await alter(cluster, 1, ConfigResourceType.BROKER, "2", {FOLLOWER_RATE: "5"})
    assert response.error_code is ErrorCode.INVALID_REQUEST
    assert response.error_message == "Unexpected broker id, expected 1, but received 2"
    assert cluster.broker(1).quotas.follower.bound == UNBOUNDED_RATE
    await cluster.create_topic(TP.topic, REPLICAS)
    response = await alter(
        cluster, 1, ConfigResourceType.TOPIC, TP.topic, {"leader.replication.throttled.replicas": "0:x"}
    )
    assert response.error_code is ErrorCode.INVALID_CONFIG
    assert "must be the literal '*' or a list of replicas in the following format" in (
        response.error_message or ""
    )


# ----------------------------------------------------------------------------- catching up

# A parked fetch waits up to 500 ms and a held-back fetcher 1 s, so a fetch (8 KB) must carry more
# than that much time's worth for the rate to be reachable (as in Kafka: keep fetches large).
RATE = 6_000
BATCHES = 30  # ~62 KB: about 10 s at RATE


@pytest.mark.parametrize("side", ["leader", "follower", None])
async def test_a_late_replica_catches_up_at_about_the_throttled_rate(
    cluster: InProcessCluster, side: str | None
) -> None:
    await cluster.create_topic(TP.topic, REPLICAS)
    backlog = await fill_backlog(cluster, BATCHES)
    if side == "leader":
        await alter_ok(cluster, 1, ConfigResourceType.BROKER, "1", {LEADER_RATE: str(RATE)})
        await alter_ok(
            cluster, 1, ConfigResourceType.TOPIC, TP.topic, {"leader.replication.throttled.replicas": "*"}
        )
    elif side == "follower":
        await alter_ok(cluster, 1, ConfigResourceType.BROKER, "", {FOLLOWER_RATE: str(RATE)})
        await alter_ok(
            cluster, 1, ConfigResourceType.TOPIC, TP.topic, {"follower.replication.throttled.replicas": "0:3"}
        )
    sizes = await catch_up(cluster, within_s=60)
    seconds = len(sizes) - 1
    if side is None:
        assert seconds <= 2, sizes  # unthrottled: a few fetches
        return
    expected_s = backlog / RATE
    # Throttled: about backlog / rate, neither much faster (the bound holds) nor much slower.
    assert 0.8 * expected_s <= seconds <= 1.5 * expected_s + 2, (seconds, expected_s, sizes)
    # At no point above the bound: the quota allows one second's worth at once (its windows),
    # then the rate, give or take the fetch that crossed the line.
    for elapsed, size in enumerate(sizes):
        assert size - sizes[0] <= RATE * (elapsed + 1) + 2 * FETCH_MAX_BYTES, (elapsed, sizes)
    quotas = cluster.broker(1 if side == "leader" else 3).quotas
    quota = quotas.leader if side == "leader" else quotas.follower
    assert quota.bytes_total >= backlog - sizes[0]
    assert quota.throttle_time_ms_total > 0
    # Caught up, it rejoins the ISR.
    await cluster.wait_for_isr(TP, (1, 2, 3))


async def test_in_sync_replicas_are_never_throttled(cluster: InProcessCluster) -> None:
    """Both quotas far below the produce rate, every replica throttled: the in-sync follower
    keeps up (acks=all writes succeed, the ISR never shrinks) while the late one waits."""
    await cluster.create_topic(TP.topic, REPLICAS)
    await fill_backlog(cluster, 10)
    await alter_ok(cluster, 1, ConfigResourceType.BROKER, "", {LEADER_RATE: "2000", FOLLOWER_RATE: "2000"})
    await alter_ok(
        cluster,
        1,
        ConfigResourceType.TOPIC,
        TP.topic,
        {"leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "*"},
    )
    await cluster.start_broker(3)
    for _ in range(60):  # 30 s at ~8 KB/s, four times the quotas
        response = await cluster.complete(cluster.produce(1, TP, batch(*[RECORD] * RECORDS_PER_BATCH)))
        assert response.partitions[0].error_code is ErrorCode.NONE
        await cluster.advance(500)
        assert set(cluster.zk_partition_state(TP)[0].isr) >= {1, 2}
    leader = cluster.partition(1, TP).statistics()
    assert leader.isr_shrinks_total == 0
    assert cluster.log(2, TP).log_end_offset == cluster.log(1, TP).log_end_offset
    # The late replica was held back (only the first second's allowance got through).
    assert cluster.log(3, TP).size_in_bytes < cluster.log(1, TP).size_in_bytes // 2
    assert cluster.broker(1).quotas.leader.is_exceeded(cluster.clock.now_ms())
