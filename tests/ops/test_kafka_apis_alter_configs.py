"""AlterConfigs v0-v1 and IncrementalAlterConfigs v0 on the Kafka listener: topic overrides and
dynamic broker configs (the replication throttle rates), written and read by kafka-python's
``kafka.protocol`` as ``tests/ops/test_kafka_apis.py`` does, on three in-process brokers."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from actors.server.replication_quota import UNBOUNDED_RATE
from ops.kafka import codec as k
from tests.ops.test_kafka_apis import KAFKA_PORT, RESPONSES, Kafka, error, versions
from tests.support.cluster import InProcessCluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.admin.configs import (
        AlterConfigsRequest,
        AlterConfigsResponse,
        DescribeConfigsRequest,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )

pytestmark = pytest.mark.asyncio

RESPONSES.update(
    {
        AlterConfigsRequest: AlterConfigsResponse,
        IncrementalAlterConfigsRequest: IncrementalAlterConfigsResponse,
    }
)
TOPIC_TYPE, BROKER_TYPE = 2, 4
SET, DELETE, APPEND = 0, 1, 2
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[Kafka]:
    async with InProcessCluster(kafka_port=KAFKA_PORT) as cluster:
        await cluster.start_brokers(1, 2, 3)
        await cluster.create_topic("tuned", {0: (1, 2, 3)})
        yield Kafka(cluster)


async def incremental(
    kafka: Kafka, kind: int, name: str, *changes: tuple[str, int, str | None], broker: int = 1
) -> tuple[str, str | None]:
    answer = await kafka.ask(
        IncrementalAlterConfigsRequest,
        0,
        broker=broker,
        resources=[
            {
                "resource_type": kind,
                "resource_name": name,
                "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in changes],
            }
        ],
        validate_only=False,
    )
    (result,) = answer.responses
    assert (result.resource_type, result.resource_name) == (kind, name)
    await kafka.cluster.advance(100)  # the change notification reaches the brokers
    return error(result.error_code), result.error_message


async def dynamic(kafka: Kafka, kind: int, name: str, *, broker: int = 1) -> dict[str, tuple[str, int]]:
    answer = await kafka.ask(
        DescribeConfigsRequest,
        1,
        broker=broker,
        resources=[{"resource_type": kind, "resource_name": name, "configuration_keys": None}],
        include_synonyms=False,
    )
    (result,) = answer.results
    assert error(result.error_code) == "NONE", result
    dynamic_sources = (DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG)
    return {c.name: (c.value, c.config_source) for c in result.configs if c.config_source in dynamic_sources}


async def test_api_versions_advertise_alter_configs(kafka: Kafka) -> None:
    assert list(versions(k.ApiKey.ALTER_CONFIGS)) == [0, 1]
    assert list(versions(k.ApiKey.INCREMENTAL_ALTER_CONFIGS)) == [0]


async def test_incremental_alter_configs_of_brokers_and_topics(kafka: Kafka) -> None:
    quotas = {b: kafka.cluster.broker(b).quotas for b in (1, 2, 3)}
    assert await incremental(kafka, BROKER_TYPE, "", (FOLLOWER_RATE, SET, "4000")) == ("NONE", None)
    assert await incremental(kafka, BROKER_TYPE, "2", (LEADER_RATE, SET, "3000"), broker=2) == ("NONE", None)
    assert [q.follower.bound for q in quotas.values()] == [4_000] * 3
    assert [q.leader.bound for q in quotas.values()] == [UNBOUNDED_RATE, 3_000, UNBOUNDED_RATE]
    assert await dynamic(kafka, BROKER_TYPE, "2", broker=2) == {
        LEADER_RATE: ("3000", DYNAMIC_BROKER_CONFIG),
        FOLLOWER_RATE: ("4000", DYNAMIC_DEFAULT_BROKER_CONFIG),
    }
    # Refusals: a static key, another broker's id, an operation for list configs.
    code, message = await incremental(kafka, BROKER_TYPE, "1", ("num.io.threads", SET, "4"))
    assert code == "INVALID_REQUEST"
    assert message is not None
    assert message.endswith("Cannot update these configs dynamically: Set(num.io.threads)")
    code, message = await incremental(kafka, BROKER_TYPE, "3", (LEADER_RATE, SET, "1"))
    assert (code, message) == ("INVALID_REQUEST", "Unexpected broker id, expected 1, but received 3")
    code, _ = await incremental(kafka, BROKER_TYPE, "1", (LEADER_RATE, APPEND, "1"))
    assert code == "INVALID_REQUEST"
    # Topics: the throttled-replica lists, validated as Kafka validates them.
    assert await incremental(
        kafka, TOPIC_TYPE, "tuned", ("leader.replication.throttled.replicas", SET, "0:1")
    ) == ("NONE", None)
    assert await dynamic(kafka, TOPIC_TYPE, "tuned") == {
        "leader.replication.throttled.replicas": ("0:1", DYNAMIC_TOPIC_CONFIG)
    }
    code, _ = await incremental(
        kafka, TOPIC_TYPE, "tuned", ("follower.replication.throttled.replicas", SET, "x")
    )
    assert code == "INVALID_CONFIG"
    assert await incremental(kafka, BROKER_TYPE, "", (FOLLOWER_RATE, DELETE, None)) == ("NONE", None)
    assert [q.follower.bound for q in quotas.values()] == [UNBOUNDED_RATE] * 3


@pytest.mark.parametrize("version", [0, 1])
async def test_alter_configs_replaces_the_dynamic_configs(kafka: Kafka, version: int) -> None:
    async def alter(kind: int, name: str, configs: dict[str, str]) -> tuple[str, Any]:
        answer = await kafka.ask(
            AlterConfigsRequest,
            version,
            resources=[
                {
                    "resource_type": kind,
                    "resource_name": name,
                    "configs": [{"name": n, "value": v} for n, v in configs.items()],
                }
            ],
            validate_only=False,
        )
        (result,) = answer.responses
        await kafka.cluster.advance(100)
        return error(result.error_code), result.error_message

    assert await alter(BROKER_TYPE, "1", {LEADER_RATE: "1000", FOLLOWER_RATE: "2000"}) == ("NONE", None)
    assert await dynamic(kafka, BROKER_TYPE, "1") == {
        LEADER_RATE: ("1000", DYNAMIC_BROKER_CONFIG),
        FOLLOWER_RATE: ("2000", DYNAMIC_BROKER_CONFIG),
    }
    # What is not given any more is removed.
    assert await alter(BROKER_TYPE, "1", {FOLLOWER_RATE: "2500"}) == ("NONE", None)
    assert await dynamic(kafka, BROKER_TYPE, "1") == {FOLLOWER_RATE: ("2500", DYNAMIC_BROKER_CONFIG)}
    assert kafka.cluster.broker(1).quotas.leader.bound == UNBOUNDED_RATE
    assert kafka.cluster.broker(1).quotas.follower.bound == 2_500
    assert await alter(TOPIC_TYPE, "tuned", {"retention.ms": "60000"}) == ("NONE", None)
    assert await dynamic(kafka, TOPIC_TYPE, "tuned") == {"retention.ms": ("60000", DYNAMIC_TOPIC_CONFIG)}
    code, _ = await alter(8, "1", {"kafka": "DEBUG"})  # BROKER_LOGGER: not served
    assert code == "INVALID_REQUEST"
