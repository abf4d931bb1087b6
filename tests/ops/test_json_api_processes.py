"""The JSON API served by real broker processes (``actorlog broker start``) on a real ZooKeeper.

Each broker's own listener serves the API; requests sent to one broker are forwarded to the leaders
on the others, and reads follow the leader when it is killed. Answers are validated against the
OpenAPI document. Waits are ZooKeeper watches and replies, bounded by timeouts; the one bounded
retry without an event is the wait for a broker's metadata cache to learn a new topic (the
controller's UpdateMetadata follows its partition-state writes by milliseconds).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import pytest_asyncio

from actors.clients.producer.partitioner import keyed_partition
from actors.common.types import TopicPartition
from ops.json_api.schema import openapi_document
from tests.ops.test_json_api import DOCUMENTED, documented_operations
from tests.support.process_cluster import SECRET, ProcessCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk]

AUTH = {"Authorization": f"Bearer {SECRET}"}
PROPERTIES = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "controlled.shutdown.enable": "false",
    "min.insync.replicas": "2",
    # An acks=all produce the leader keeps refusing is answered after timeout_ms + this.
    "request.timeout.ms": "5000",
}


class Brokers:
    """HTTP calls to the brokers' JSON APIs, each answer checked against the document."""

    def __init__(self, cluster: ProcessCluster, session: aiohttp.ClientSession) -> None:
        self.cluster = cluster
        self.session = session

    async def call(
        self, broker_id: int, method: str, template: str, *, json: Any = None, auth: bool = True, **path: Any
    ) -> tuple[int, Any]:
        query = path.pop("query", None)
        url = self.cluster.brokers[broker_id].url + template.format(**path)
        headers = {**(AUTH if auth else {})}
        async with self.session.request(method, url, json=json, params=query, headers=headers) as response:
            body = orjson.loads(await response.read())
            status = response.status
        DOCUMENTED.check(template, method, status, body)
        return status, body

    async def produce(
        self, broker_id: int, topic: str, records: list[dict[str, Any]], **fields: Any
    ) -> tuple[int, Any]:
        return await self.call(
            broker_id, "POST", "/v1/topics/{topic}/records", topic=topic, json={"records": records, **fields}
        )

    async def read(self, broker_id: int, topic: str, partition: int, **query: Any) -> tuple[int, Any]:
        return await self.call(
            broker_id, "GET", "/v1/topics/{topic}/partitions/{partition}/records",
            topic=topic, partition=partition, query={k: str(v) for k, v in query.items()},
        )  # fmt: skip

    async def wait_for_topic(self, topic: str, partitions: int, *, timeout_s: float = 30) -> None:
        """Until every broker's metadata names a leader for each partition (bounded retries)."""

        async def known_everywhere() -> None:
            for broker_id in self.cluster.brokers:
                while True:
                    status, body = await self.call(broker_id, "GET", "/v1/topics/{topic}", topic=topic)
                    if status == 200 and sum(p["leader"] >= 0 for p in body["partitions"]) == partitions:
                        break

        await asyncio.wait_for(known_everywhere(), timeout=timeout_s)


@pytest_asyncio.fixture
async def brokers(zk_connect_string: str, tmp_path: Path) -> AsyncIterator[Brokers]:
    async with ProcessCluster(zk_connect_string, tmp_path, dict(PROPERTIES)) as cluster:
        await asyncio.gather(*(cluster.start(broker_id) for broker_id in (1, 2, 3)))
        async with aiohttp.ClientSession() as session:
            yield Brokers(cluster, session)


async def create_topic(brokers: Brokers, topic: str, assignment: dict[int, Sequence[int]]) -> None:
    await brokers.cluster.create_topic(topic, assignment)
    for partition in assignment:
        await brokers.cluster.wait_for_partition_state(
            TopicPartition(topic, partition), lambda state: state.leader >= 0, timeout_s=30
        )
    await brokers.wait_for_topic(topic, len(assignment))


async def test_any_broker_produces_to_the_leaders_and_reads_from_them(brokers: Brokers) -> None:
    await create_topic(brokers, "events", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    for broker_id in (1, 2, 3):
        status, cluster = await brokers.call(broker_id, "GET", "/v1/cluster")
        assert status == 200
        assert [b["broker_id"] for b in cluster["brokers"]] == [1, 2, 3]
        assert cluster["controller_id"] in (1, 2, 3)
    keys = [f"device-{n % 11}" for n in range(40)]
    status, produced = await brokers.produce(
        1, "events", [{"key": k, "value": {"n": n}} for n, k in enumerate(keys)]
    )
    assert status == 200
    assert [r["partition"] for r in produced["records"]] == [
        keyed_partition(orjson.dumps(k), 3) for k in keys
    ]
    for partition in range(3):
        expected = [n for n, k in enumerate(keys) if keyed_partition(orjson.dumps(k), 3) == partition]
        for reader in (2, 3):
            status, read = await brokers.read(reader, "events", partition, offset=0)
            assert status == 200
            assert [r["value"]["n"] for r in read["records"]] == expected
            assert read["high_watermark"] == len(expected)
        status, offsets = await brokers.call(
            3, "GET", "/v1/topics/{topic}/partitions/{partition}/offsets", topic="events", partition=partition
        )
        assert (status, offsets["log_start_offset"], offsets["high_watermark"]) == (200, 0, len(expected))
    status, topics = await brokers.call(2, "GET", "/v1/topics")
    assert (status, topics) == (200, {"topics": ["events"]})


async def test_a_real_broker_serves_every_documented_route_behind_the_secret(brokers: Brokers) -> None:
    await create_topic(brokers, "docs", {0: [1, 2, 3]})
    url = brokers.cluster.brokers[2].url
    async with brokers.session.get(url + "/openapi.json") as response:
        assert (response.status, orjson.loads(await response.read())) == (200, openapi_document())
    for template, method in sorted(documented_operations(openapi_document())):
        if not template.startswith("/v1/"):
            continue
        body = {"records": [{"value": template}]} if method == "POST" else None
        query = {"offset": "0"} if method == "GET" and template.endswith("/records") else None
        status, answer = await brokers.call(
            2, method, template, json=body, auth=False, topic="docs", partition=0, query=query
        )
        assert (status, answer["error"]) == (401, "SASL_AUTHENTICATION_FAILED")
        status, answer = await brokers.call(
            2, method, template, json=body, topic="docs", partition=0, query=query
        )
        assert status == 200, (method, template, answer)
    # A body above socket.request.max.bytes (100 MiB by default) is refused from its Content-Length,
    # before it is sent.
    reader, writer = await asyncio.open_connection("127.0.0.1", brokers.cluster.brokers[2].port)
    writer.write(
        b"POST /v1/topics/docs/records HTTP/1.1\r\nHost: broker\r\n"
        + f"Authorization: Bearer {SECRET}\r\n".encode()
        + b"Content-Type: application/json\r\nContent-Length: 200000000\r\nConnection: close\r\n\r\n"
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=30)
    assert head.startswith(b"HTTP/1.1 413"), head
    (length,) = [
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    ]
    payload = await asyncio.wait_for(reader.readexactly(length), timeout=30)
    writer.close()
    assert orjson.loads(payload)["error"] == "MESSAGE_TOO_LARGE"


async def test_acks_variants_and_too_few_in_sync_replicas_on_real_brokers(brokers: Brokers) -> None:
    tp = TopicPartition("durable", 0)
    await create_topic(brokers, tp.topic, {0: [1, 2, 3]})
    status, zero = await brokers.produce(2, tp.topic, [{"value": "zero"}], acks="0")
    assert (status, zero["records"][0]["offset"]) == (200, -1)
    # A long poll from another broker: answered when the acks=0 record is committed.
    status, read = await brokers.read(3, tp.topic, 0, offset=0, timeout_ms=20_000)
    assert [r["value"] for r in read["records"]] == ["zero"]
    status, one = await brokers.produce(3, tp.topic, [{"value": "one"}], acks="1")
    assert (status, one["records"][0]["offset"]) == (200, 1)
    status, every = await brokers.produce(2, tp.topic, [{"value": "all"}])
    assert (status, every["records"][0]["offset"]) == (200, 2)

    await asyncio.gather(brokers.cluster.kill(2, signal.SIGKILL), brokers.cluster.kill(3, signal.SIGKILL))
    await brokers.cluster.wait_for_partition_state(tp, lambda state: state.isr == (1,), timeout_s=30)
    # Too few in-sync replicas: the leader refuses acks=all NOT_ENOUGH_REPLICAS (or, in the window
    # before it applies the ISR the controller shrank, appends it and answers
    # NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka does). Both are retriable: the broker's idempotent
    # producer retries, as Kafka's does, past the request's deadline (timeout_ms + request.timeout.ms).
    status, refused = await brokers.produce(1, tp.topic, [{"value": "maybe appended"}], timeout_ms=0)
    assert (status, refused["error"], refused["records"][0]["error"]) == (
        503, "REQUEST_TIMED_OUT", "REQUEST_TIMED_OUT",
    )  # fmt: skip
    assert "may or may not have been written" in refused["records"][0]["message"]
    status, offsets = await brokers.call(
        1, "GET", "/v1/topics/{topic}/partitions/{partition}/offsets", topic=tp.topic, partition=0
    )
    assert (status, offsets["high_watermark"]) in {(200, 3), (200, 4)}  # 4: appended in the window
    status, accepted = await brokers.produce(1, tp.topic, [{"value": "leader only"}], acks="1")
    assert (status, accepted["records"][0]["offset"]) == (200, offsets["high_watermark"])


async def test_reads_and_writes_follow_the_leader_when_it_is_killed(brokers: Brokers) -> None:
    tp = TopicPartition("moving", 0)
    await create_topic(brokers, tp.topic, {0: [2, 1, 3]})
    state, _ = await brokers.cluster.zk_partition_state(tp)
    assert state.leader == 2
    status, produced = await brokers.produce(1, tp.topic, [{"value": n} for n in range(5)])
    assert (status, [r["offset"] for r in produced["records"]]) == (200, [0, 1, 2, 3, 4])
    await brokers.cluster.kill(2, signal.SIGKILL)
    await brokers.cluster.wait_for_partition_state(
        tp, lambda s: s.leader in (1, 3) and s.leader_epoch > state.leader_epoch, timeout_s=30
    )
    # Broker 1 may still name broker 2 in its metadata for a moment: the read retries until it
    # learns the new leader, within its deadline. The new leader's high watermark may trail the
    # records it has (until the other follower fetches from it): the long poll waits for it.
    status, read = await brokers.read(1, tp.topic, 0, offset=0, timeout_ms=20_000)
    assert (status, [r["value"] for r in read["records"]]) == (200, [0, 1, 2, 3, 4])
    status, more = await brokers.produce(1, tp.topic, [{"value": 5}])
    assert (status, more["records"][0]["offset"]) == (200, 5)
