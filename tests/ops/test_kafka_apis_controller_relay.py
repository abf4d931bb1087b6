"""The Kafka APIs the admin actor relays to the active controller — ElectLeaders v0-v2,
AlterPartitionReassignments v0 and ListPartitionReassignments v0 (KIP-455/460; the last two, and
ElectLeaders v2, are flexible versions: v2 request header, v1 response header) — written and read
by kafka-python's ``kafka.protocol`` as ``tests/ops/test_kafka_apis.py`` does, on three in-process
brokers with the real controller."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from actors.common.types import TopicPartition
from ops.kafka import codec as k
from tests.ops.test_kafka_apis import KAFKA_PORT, RESPONSES, Kafka, error, versions
from tests.support.cluster import InProcessCluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.admin.topics import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        ElectLeadersRequest,
        ElectLeadersResponse,
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )

pytestmark = pytest.mark.asyncio

RESPONSES.update(
    {
        ElectLeadersRequest: ElectLeadersResponse,
        AlterPartitionReassignmentsRequest: AlterPartitionReassignmentsResponse,
        ListPartitionReassignmentsRequest: ListPartitionReassignmentsResponse,
    }
)
TOPIC = "moving"


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[Kafka]:
    async with InProcessCluster(kafka_port=KAFKA_PORT) as cluster:
        await cluster.start_brokers(1, 2, 3)
        await cluster.create_topic(TOPIC, {0: (1, 2), 1: (2, 3)})
        yield Kafka(cluster)


def elect_results(answer: Any) -> dict[tuple[str, int], str]:
    return {
        (t.topic, p.partition_id): error(p.error_code)
        for t in answer.replica_election_results
        for p in t.partition_result
    }


async def test_api_versions_advertise_the_relayed_apis(kafka: Kafka) -> None:
    assert k.API_VERSIONS[k.ApiKey.ELECT_LEADERS] == (0, 2)
    assert k.API_VERSIONS[k.ApiKey.ALTER_PARTITION_REASSIGNMENTS] == (0, 0)
    assert k.API_VERSIONS[k.ApiKey.LIST_PARTITION_REASSIGNMENTS] == (0, 0)


async def test_elect_leaders_every_version(kafka: Kafka) -> None:
    """v0 has no election type (preferred) and no top-level error; every partition named gets
    its answer; null partitions means all, and then the ones needing no election are left out."""
    for version in versions(k.ApiKey.ELECT_LEADERS):
        values: dict[str, Any] = {
            "topic_partitions": [
                {"topic": TOPIC, "partitions": [0, 1, 7]},
                {"topic": "nope", "partitions": [0]},
            ],
            "timeout_ms": 10_000,
        }
        if version >= 1:
            values["election_type"] = 0
        answer = await kafka.ask(ElectLeadersRequest, version, broker=3, **values)
        assert elect_results(answer) == {
            (TOPIC, 0): "ELECTION_NOT_NEEDED",
            (TOPIC, 1): "ELECTION_NOT_NEEDED",
            (TOPIC, 7): "UNKNOWN_TOPIC_OR_PARTITION",
            ("nope", 0): "UNKNOWN_TOPIC_OR_PARTITION",
        }
        if version >= 1:
            assert error(answer.error_code) == "NONE"
            everything = await kafka.ask(
                ElectLeadersRequest,
                version,
                broker=2,
                election_type=1,
                topic_partitions=None,
                timeout_ms=10_000,
            )
            assert elect_results(everything) == {}


async def test_reassignments_listed_altered_and_cancelled(kafka: Kafka) -> None:
    """An unknown partition, a replica list naming an unknown broker and a cancel of a partition
    not being reassigned are refused per partition; a listing of nothing ongoing is empty."""
    listing = await kafka.ask(ListPartitionReassignmentsRequest, 0, timeout_ms=10_000, topics=None)
    assert (error(listing.error_code), listing.topics) == ("NONE", [])
    answer = await kafka.ask(
        AlterPartitionReassignmentsRequest,
        0,
        broker=2,
        timeout_ms=10_000,
        topics=[
            {"name": TOPIC, "partitions": [{"partition_index": 5, "replicas": [1, 2]}]},
            {"name": TOPIC, "partitions": [{"partition_index": 1, "replicas": [2, 9]}]},
            {"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": None}]},
        ],
    )
    assert error(answer.error_code) == "NONE"
    codes = [(r.name, p.partition_index, error(p.error_code)) for r in answer.responses for p in r.partitions]
    assert codes == [
        (TOPIC, 5, "UNKNOWN_TOPIC_OR_PARTITION"),
        (TOPIC, 1, "INVALID_REPLICA_ASSIGNMENT"),
        (TOPIC, 0, "NO_REASSIGNMENT_IN_PROGRESS"),
    ]


async def test_a_reassignment_runs_to_completion(kafka: Kafka) -> None:
    cluster = kafka.cluster
    tp = TopicPartition(TOPIC, 0)
    answer = await kafka.ask(
        AlterPartitionReassignmentsRequest,
        0,
        timeout_ms=10_000,
        topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": [3, 2]}]}],
    )
    assert [error(p.error_code) for r in answer.responses for p in r.partitions] == ["NONE"]
    await cluster.wait_for(lambda: cluster.assignment(tp) == (3, 2), within_ms=30_000, step_ms=10)
    listing = await kafka.ask(
        ListPartitionReassignmentsRequest,
        0,
        timeout_ms=10_000,
        topics=[{"name": TOPIC, "partition_indexes": [0]}],
    )
    assert listing.topics == []
