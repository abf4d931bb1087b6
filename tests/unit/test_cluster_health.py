"""The cluster health decision (``ops/cluster_health.py``): each category, the restart rule and its
min ISR edges, the shapes (JSON and lines), and the gathering through an ``ask``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import pytest

from actors.common.client_protocol import (
    ConfigResourceType,
    ConfigSource,
    DescribeConfigsEntry,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from actors.common.errors import ErrorCode
from actors.common.names import ADMIN_ACTOR_NAME, BROKER_ACTOR_NAME
from actors.common.protocol import (
    BrokerEndpoint,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from ops.cluster_health import (
    PartitionHealth,
    assess,
    gather_cluster_health,
    health_body,
    health_lines,
    restart_check,
)

Parts = Sequence[tuple[int, Sequence[int], Sequence[int]]]  # (leader, replicas, isr) per partition


def metadata(
    topics: Mapping[str, Parts], *, brokers: Sequence[int] = (1, 2, 3), racks: Mapping[int, str] | None = None
) -> MetadataResponse:
    return MetadataResponse(
        brokers=tuple(
            BrokerEndpoint(broker_id=b, host=f"b{b}", port=9092, rack=(racks or {}).get(b)) for b in brokers
        ),
        controller_id=brokers[0] if brokers else -1,
        topics=tuple(
            TopicMetadata(
                name=name,
                error_code=ErrorCode.NONE,
                partitions=tuple(
                    PartitionMetadata(
                        partition=i,
                        error_code=ErrorCode.NONE,
                        leader=leader,
                        leader_epoch=0,
                        replicas=tuple(replicas),
                        isr=tuple(isr),
                    )
                    for i, (leader, replicas, isr) in enumerate(parts)
                ),
            )
            for name, parts in topics.items()
        ),
    )


def partition(replicas: Sequence[int], isr: Sequence[int], min_isr: int, leader: int = 1) -> PartitionHealth:
    return PartitionHealth(
        topic="t",
        partition=0,
        leader=leader,
        replicas=tuple(replicas),
        isr=tuple(isr),
        min_insync_replicas=min_isr,
    )


def names(partitions: Sequence[PartitionHealth]) -> list[str]:
    return [f"{p.topic}-{p.partition}" for p in partitions]


# --- the categories --------------------------------------------------------------------------


def test_a_fully_replicated_cluster_is_healthy() -> None:
    health = assess(metadata({"t": [(1, (1, 2, 3), (1, 2, 3)), (2, (2, 3, 1), (2, 3, 1))]}), {"t": 2})
    assert health.healthy
    assert health.ok
    assert (health.topic_count, health.partition_count, health.brokers) == (1, 2, (1, 2, 3))
    assert not (health.under_replicated)
    assert not (health.under_min_isr)
    assert not (health.offline)
    assert health.restart is None


def test_under_replicated_partitions_name_the_replicas_out_of_the_isr() -> None:
    health = assess(
        metadata({"t": [(1, (1, 2, 3), (1, 2)), (2, (2, 3, 1), (2, 3, 1)), (1, (3, 1, 2), (1,))]}), {"t": 2}
    )
    assert names(health.under_replicated) == ["t-0", "t-2"]
    assert [p.out_of_isr for p in health.under_replicated] == [(3,), (3, 2)]
    # ISR 1 of min 2: under min ISR too; ISR 2 of min 2 is not.
    assert names(health.under_min_isr) == ["t-2"]
    assert not health.healthy
    assert not health.ok


def test_under_min_isr_follows_each_topics_own_setting() -> None:
    topics = {"a": [(1, (1, 2, 3), (1, 2))], "b": [(1, (1, 2, 3), (1, 2))]}
    health = assess(metadata(topics), {"a": 2, "b": 3})
    assert names(health.under_min_isr) == ["b-0"]
    assert [p.min_insync_replicas for p in health.under_replicated] == [2, 3]


def test_leaderless_partitions_are_offline() -> None:
    health = assess(metadata({"t": [(-1, (3,), (3,)), (1, (1, 2), (1, 2))]}, brokers=(1, 2)), {"t": 1})
    assert names(health.offline) == ["t-0"]
    assert health.offline[0].leader == -1
    assert "Leader: none" in "\n".join(health_lines(health))


def test_rack_constraint_uses_the_shared_predicate() -> None:
    racks = {1: "a", 2: "a", 3: "b"}
    topics = {"t": [(1, (1, 2), (1, 2)), (1, (1, 3), (1, 3)), (1, (1, 2, 3), (1, 2, 3))]}
    health = assess(metadata(topics, racks=racks), {"t": 1})
    # Two replicas on rack a only, where two racks exist: broken; (1, 3) and (1, 2, 3) span both.
    assert names(health.rack_constraint_broken) == ["t-0"]
    assert health.rack_constraint_broken[0].replica_racks == ("a", "a")
    # Without racks nothing is broken.
    assert not assess(metadata(topics), {"t": 1}).rack_constraint_broken


def test_topics_without_a_min_isr_answer_and_failed_topics_are_left_out() -> None:
    response = metadata({"kept": [(1, (1,), (1,))], "deleted": [(1, (1, 2), (1,))]})
    failed = TopicMetadata(name="failed", error_code=ErrorCode.LEADER_NOT_AVAILABLE, partitions=())
    response = MetadataResponse(
        brokers=response.brokers, controller_id=1, topics=(*response.topics, failed)
    )  # fmt: skip
    health = assess(response, {"kept": 1, "failed": 1})
    assert (health.topic_count, health.partition_count, health.healthy) == (1, 1, True)


# --- the restart rule ------------------------------------------------------------------------


def test_a_broker_may_restart_when_every_isr_it_is_in_keeps_min_isr_without_it() -> None:
    check = restart_check([partition((1, 2, 3), (1, 2, 3), 2)], 2, live=True)
    assert check.allowed
    assert check.hosted_partitions == 1
    assert not check.blocking


def test_at_min_isr_with_the_broker_in_the_isr_blocks() -> None:
    blocked = partition((1, 2, 3), (1, 2), 2)
    check = restart_check([blocked, partition((1, 2, 3), (1, 2, 3), 2)], 2, live=True)
    assert not check.allowed
    assert check.blocking == (blocked,)
    assert "1 partition(s)" in check.reason


def test_at_min_isr_without_the_broker_in_the_isr_does_not_block() -> None:
    # Broker 3 is already out of the ISR: restarting it takes nothing from it.
    assert restart_check([partition((1, 2, 3), (1, 2), 2)], 3, live=True).allowed


def test_already_under_min_isr_blocks_a_broker_in_its_isr_only() -> None:
    under = partition((1, 2, 3), (1,), 2)
    assert not restart_check([under], 1, live=True).allowed
    assert restart_check([under], 2, live=True).allowed


def test_one_above_min_isr_allows_and_min_isr_one_blocks_only_the_last_replica() -> None:
    assert restart_check([partition((1, 2, 3, 4), (1, 2, 3), 2)], 3, live=True).allowed
    assert restart_check([partition((1, 2), (1, 2), 1)], 1, live=True).allowed
    assert not restart_check([partition((1, 2), (1,), 1)], 1, live=True).allowed


def test_a_replication_factor_not_above_min_isr_always_blocks_its_isr_members() -> None:
    assert not restart_check([partition((1,), (1,), 1)], 1, live=True).allowed
    assert not restart_check([partition((1, 2), (1, 2), 2)], 2, live=True).allowed


def test_a_broker_that_hosts_nothing_or_is_not_live_may_restart() -> None:
    assert restart_check([partition((1, 2, 3), (1, 2), 2)], 7, live=True).hosted_partitions == 0
    assert restart_check([partition((1, 2, 3), (1, 2), 2)], 7, live=True).allowed
    # A dead broker still the last ISR member of an offline partition: restarting it is the fix.
    dead = restart_check([partition((3,), (3,), 1, leader=-1)], 3, live=False)
    assert dead.allowed
    assert "not live" in dead.reason


def test_the_restart_answer_decides_ok_whatever_else_is_unhealthy() -> None:
    topics = {"t": [(1, (1, 2, 3), (1, 2)), (1, (1, 2, 3), (1, 2, 3))]}
    refused = assess(metadata(topics), {"t": 2}, broker=2)
    assert refused.restart is not None
    assert not refused.restart.allowed
    assert not refused.ok
    allowed = assess(metadata(topics), {"t": 2}, broker=3)
    assert allowed.restart is not None
    assert allowed.restart.allowed
    assert allowed.ok
    assert not allowed.healthy
    dead = assess(metadata(topics, brokers=(1, 2)), {"t": 2}, broker=3)
    assert dead.restart is not None
    assert not dead.restart.live
    assert dead.ok


# --- shapes ----------------------------------------------------------------------------------


def test_body_and_lines_name_the_blocking_partitions() -> None:
    health = assess(metadata({"t": [(1, (1, 2, 3), (1, 2))]}), {"t": 2}, broker=2)
    body = health_body(health)
    assert body["healthy"] is False
    assert body["under_replicated_partitions"] == [
        {
            "topic": "t", "partition": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 2],
            "out_of_isr": [3], "min_insync_replicas": 2, "replica_racks": [None, None, None],
        }
    ]  # fmt: skip
    assert body["restart"]["allowed"] is False
    assert [p["partition"] for p in body["restart"]["blocking_partitions"]] == [0]
    lines = health_lines(health)
    assert "Under-replicated partitions: 1" in lines
    assert "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2\tMinIsr: 2\tOutOfIsr: 3" in lines
    assert lines[-2].startswith("Restart of broker 2: REFUSED")
    assert lines[-1].endswith("IsrWithout2: 1")
    assert any(line.startswith("Cluster: NOT HEALTHY (1 under-replicated partitions") for line in lines)
    assert health_body(assess(metadata({}), {}))["restart"] is None


# --- gathering -------------------------------------------------------------------------------


def test_gathering_asks_metadata_then_every_topics_min_isr_in_one_request() -> None:
    asked: list[tuple[str, object]] = []
    response = metadata({"a": [(1, (1, 2, 3), (1, 2))], "gone": [(1, (1,), (1,))]})

    async def ask(actor: str, message: object) -> object:
        asked.append((actor, message))
        if isinstance(message, MetadataRequest):
            return response
        assert isinstance(message, DescribeConfigsRequest)
        results = []
        for resource in message.resources:
            assert resource.resource_type is ConfigResourceType.TOPIC
            assert resource.configuration_keys == ("min.insync.replicas",)
            if resource.resource_name == "gone":
                results.append(DescribeConfigsResult(
                    resource_type=resource.resource_type, resource_name="gone",
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ))  # fmt: skip
                continue
            entry = DescribeConfigsEntry(
                name="min.insync.replicas", value="3", read_only=False, is_default=False,
                source=ConfigSource.DYNAMIC_TOPIC_CONFIG,
            )  # fmt: skip
            results.append(DescribeConfigsResult(
                resource_type=resource.resource_type, resource_name=resource.resource_name,
                error_code=ErrorCode.NONE, configs=(entry,),
            ))  # fmt: skip
        return DescribeConfigsResponse(results=tuple(results))

    health = asyncio.run(gather_cluster_health(ask, broker=1))
    assert [actor for actor, _ in asked] == [BROKER_ACTOR_NAME, ADMIN_ACTOR_NAME]
    assert health.topic_count == 1  # "gone" was deleted between the two requests
    assert [p.min_insync_replicas for p in health.under_min_isr] == [3]
    assert health.restart is not None
    assert not health.restart.allowed


def test_gathering_refuses_an_unexpected_answer() -> None:
    async def ask(actor: str, message: object) -> object:
        return "nonsense"

    with pytest.raises(TypeError, match="MetadataResponse"):
        asyncio.run(gather_cluster_health(ask))
