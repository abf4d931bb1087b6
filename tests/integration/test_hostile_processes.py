"""The hostile-input suite on real broker processes (issue 23; docs/security.md).

An attacker holds what every client is given: a client user's name and password. This module
replays the attacks found against a 3-broker cluster and shows each gets a clear error while the
cluster notices nothing: no actor fails or restarts, no broker exits, nothing is written or deleted,
every broker stays ready with one active controller.

* a client credential never opens ``/internal/v1`` (401, nothing decoded);
* the controller's requests, a follower's fetch and a broker's ControlledShutdown sent with a client
  credential on ``/client/v1`` are refused (400) before any actor sees them;
* with the broker identity itself, every actor refuses kinds it does not take from another node, as
  a tell and as an ask (400), and an unknown actor is a 404;
* 10,000 garbage frames (random bytes, truncated and corrupted real frames) to every frame endpoint
  are 400/401/413, never a 5xx.
"""

from __future__ import annotations

import asyncio
import base64
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from actors.common.client_protocol import CreateTopicsRequest, DeleteTopicsRequest
from actors.common.names import (
    ADMIN_ACTOR_NAME,
    BROKER_ACTOR_NAME,
    CONTROLLER_ACTOR_NAME,
    REGISTRATION_ACTOR_NAME,
    TOPIC_CONFIGS_ACTOR_NAME,
    fetcher_name,
    partition_name,
)
from actors.common.protocol import (
    ControlledShutdownRequest,
    FetchPartition,
    FetchRequest,
    LeaderAndIsrRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceResponse,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from actors.common.types import TopicPartition
from ops.codec import wire_codec
from ops.security.users import UserStore
from runtime.clock import LoopClock
from runtime.codec import FRAME_CONTENT_TYPE, WireEnvelope
from runtime.transport.client_endpoint import CLIENT_ASK_PATH, CLIENT_TELL_PATH
from runtime.transport.http import ASK_PATH, TELL_PATH
from tests.support.process_cluster import SECRET, ProcessCluster, ProduceLoop

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk]

TP = TopicPartition("orders", 0)
USER, PASSWORD = "mallory", "a-client-password"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
BEARER = f"Bearer {SECRET}"
GARBAGE_FRAMES = 10_000


@pytest_asyncio.fixture
async def cluster(zk_connect_string: str, tmp_path: Path) -> AsyncIterator[ProcessCluster]:
    async with ProcessCluster(zk_connect_string, tmp_path, {"min.insync.replicas": "2"}) as cluster:
        await asyncio.gather(*(cluster.start(broker_id) for broker_id in (1, 2, 3)))
        await UserStore(cluster.admin, clock=LoopClock()).upsert(USER, PASSWORD)
        await cluster.create_topic(TP.topic, {0: (1, 2, 3)})
        yield cluster


def frame(target: str, message: object) -> bytes:
    return b"".join(wire_codec().encode_envelopes_parts([WireEnvelope(target, message, None, 5_000)]))


async def post(
    session: aiohttp.ClientSession, url: str, body: bytes, authorization: str | None
) -> tuple[int, dict[str, object]]:
    headers = {"Content-Type": FRAME_CONTENT_TYPE}
    if authorization is not None:
        headers["Authorization"] = authorization
    async with session.post(url, data=body, headers=headers) as response:
        status = response.status
        payload = await response.read()
    if status >= 300:
        assert response.content_type == "application/json", (url, status, payload[:200])
        parsed = orjson.loads(payload)
        assert {"error_code", "error", "message"} <= parsed.keys(), parsed
        return status, parsed
    return status, {}


async def scrape(session: aiohttp.ClientSession, base: str) -> dict[str, float]:
    async with session.get(base + "/metrics") as response:
        text = await response.text()
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in (
                "actorlog_actor_failures_total",
                "actorlog_actor_restarts_total",
                "kafka_controller_kafkacontroller_activecontrollercount",
                "kafka_server_replicamanager_underreplicatedpartitions",
            ):
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return values


@dataclass(frozen=True)
class Health:
    ready: dict[int, int]
    metrics: dict[int, dict[str, float]]
    state: tuple[int, int, tuple[int, ...], int]
    offsets: object
    topics: list[str]


async def health(cluster: ProcessCluster, session: aiohttp.ClientSession) -> Health:
    """What must not change: each broker's readiness and metrics, the partition's state and data."""
    state, version = await cluster.zk_partition_state(TP)
    response = await cluster.client.ask(
        cluster.brokers[state.leader].ref,
        ListOffsetsRequest(
            replica_id=-1, partitions=(ListOffsetsPartition(topic=TP.topic, partition=0, timestamp=-1),)
        ),
        timeout_ms=10_000,
    )
    ready: dict[int, int] = {}
    metrics: dict[int, dict[str, float]] = {}
    for broker_id, broker in cluster.brokers.items():
        assert broker.process is not None
        assert broker.process.returncode is None, f"broker {broker_id} exited"
        async with session.get(broker.url + "/readyz") as answer:
            ready[broker_id] = answer.status
        metrics[broker_id] = await scrape(session, broker.url)
    topics = await cluster.admin.get_children("/brokers/topics")
    return Health(
        ready=ready,
        metrics=metrics,
        state=(state.leader, state.leader_epoch, tuple(state.isr), version),
        offsets=response,
        topics=sorted(topics),
    )


async def test_attacks_with_a_client_credential_get_clear_errors_and_change_nothing(
    cluster: ProcessCluster,
) -> None:
    loop = ProduceLoop(cluster, TP)
    loop.start()
    await loop.wait_for_acks(20, timeout_s=30)
    await loop.stop()
    async with aiohttp.ClientSession() as session:
        before = await health(cluster, session)
        assert set(before.ready.values()) == {200}
        controller, epoch = await cluster.controller()
        victim = cluster.brokers[2].url
        forged = [
            (BROKER_ACTOR_NAME, StopReplicaRequest(
                controller_id=controller, controller_epoch=epoch, broker_epoch=-1,
                delete_partitions=True, partitions=(TP,),
            )),
            (BROKER_ACTOR_NAME, UpdateMetadataRequest(
                controller_id=controller, controller_epoch=2**31 - 1, broker_epoch=-1,
                partition_states=(), live_brokers=(),
            )),
            (BROKER_ACTOR_NAME, LeaderAndIsrRequest(
                controller_id=controller, controller_epoch=epoch + 1, broker_epoch=-1,
                partition_states=(), live_leaders=(),
            )),
            (CONTROLLER_ACTOR_NAME, ControlledShutdownRequest(broker_id=2, broker_epoch=-1)),
            # A fetch naming a replica id would count as a follower's and move the ISR and HW.
            (BROKER_ACTOR_NAME, FetchRequest(
                replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                partitions=(
                    FetchPartition(topic=TP.topic, partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                ),
            )),
        ]  # fmt: skip
        for target, message in forged:
            # The client credential does not open the internal endpoint at all...
            for path in (ASK_PATH, TELL_PATH):
                status, body = await post(session, victim + path, frame(target, message), BASIC)
                assert (status, body["error"]) == (401, "SASL_AUTHENTICATION_FAILED"), (path, message)
            # ...and the client endpoint takes no request that needs the broker identity.
            for path in (CLIENT_ASK_PATH, CLIENT_TELL_PATH):
                status, body = await post(session, victim + path, frame(target, message), BASIC)
                assert (status, body["error"]) == (400, "INVALID_REQUEST"), (path, message, body)
        # The client endpoint does serve a client: a Metadata ask with the same credential.
        status, _ = await post(
            session, victim + CLIENT_ASK_PATH, frame(BROKER_ACTOR_NAME, MetadataRequest(topics=None)), BASIC
        )
        assert status == 200

        # With the broker identity: every actor refuses the kinds it does not take from another node.
        leader = before.state[0]
        follower = next(b for b in (1, 2, 3) if b != leader)
        stray = [
            (BROKER_ACTOR_NAME, MetadataRequest(topics=None), TELL_PATH),  # an ask kind as a tell
            (BROKER_ACTOR_NAME, ProduceResponse(partitions=()), TELL_PATH),  # a reply kind
            (BROKER_ACTOR_NAME, ProduceResponse(partitions=()), ASK_PATH),
            (BROKER_ACTOR_NAME, CreateTopicsRequest(topics=(), timeout_ms=1_000), ASK_PATH),
            (ADMIN_ACTOR_NAME, MetadataRequest(topics=None), ASK_PATH),
            (ADMIN_ACTOR_NAME, DeleteTopicsRequest(topic_names=(TP.topic,), timeout_ms=1_000), TELL_PATH),
            (CONTROLLER_ACTOR_NAME, MetadataRequest(topics=None), ASK_PATH),
            (CONTROLLER_ACTOR_NAME, ControlledShutdownRequest(broker_id=2, broker_epoch=-1), TELL_PATH),
            (CONTROLLER_ACTOR_NAME, MetadataResponse(brokers=(), topics=(), controller_id=1), TELL_PATH),
            (REGISTRATION_ACTOR_NAME, MetadataRequest(topics=None), ASK_PATH),
            (TOPIC_CONFIGS_ACTOR_NAME, MetadataRequest(topics=None), TELL_PATH),
            (partition_name(TP), MetadataRequest(topics=None), ASK_PATH),
            (partition_name(TP), MetadataRequest(topics=None), TELL_PATH),
            (fetcher_name(0, leader), MetadataRequest(topics=None), TELL_PATH),
        ]
        for broker_id in (leader, follower):
            base = cluster.brokers[broker_id].url
            for target, message, path in stray:
                if target.startswith("replica-fetcher") and broker_id == leader:
                    continue
                status, body = await post(session, base + path, frame(target, message), BEARER)
                assert (status, body.get("error")) == (400, "INVALID_REQUEST"), (
                    broker_id,
                    target,
                    message,
                    body,
                )
            status, _ = await post(
                session, base + ASK_PATH, frame("nobody", MetadataRequest(topics=None)), BEARER
            )
            assert status == 404

        # 10,000 garbage frames over every frame endpoint, with and without credentials.
        rng = random.Random(23)
        genuine = frame(BROKER_ACTOR_NAME, MetadataRequest(topics=None))
        endpoints = [
            (ASK_PATH, BEARER), (TELL_PATH, BEARER), (CLIENT_ASK_PATH, BASIC), (CLIENT_TELL_PATH, BASIC),
            (ASK_PATH, None), (CLIENT_ASK_PATH, "Basic Z2FyYmFnZQ=="),
        ]  # fmt: skip
        statuses: dict[int, int] = {}

        def garbage(index: int) -> bytes:
            match index % 4:
                case 0:
                    return rng.randbytes(rng.randrange(0, 300))
                case 1:
                    return genuine[: rng.randrange(0, len(genuine))]
                case 2:
                    data = bytearray(genuine)
                    for _ in range(rng.randrange(1, 6)):
                        data[rng.randrange(len(data))] = rng.randrange(256)
                    return bytes(data)
                case _:
                    return rng.randbytes(4) + genuine[4:]

        bodies = [
            (garbage(i), endpoints[i % len(endpoints)], cluster.brokers[1 + i % 3].url)
            for i in range(GARBAGE_FRAMES)
        ]
        semaphore = asyncio.Semaphore(16)

        async def send(body: bytes, endpoint: tuple[str, str | None], base: str) -> None:
            async with semaphore:
                status, _ = await post(session, base + endpoint[0], body, endpoint[1])
            statuses[status] = statuses.get(status, 0) + 1

        await asyncio.gather(*(send(*item) for item in bodies))
        assert sum(statuses.values()) == GARBAGE_FRAMES
        # A mutated frame may still decode into a valid Metadata ask (200): anything else is refused.
        assert set(statuses) <= {200, 202, 400, 401, 404, 413}, statuses
        assert max(statuses) < 500

        after = await health(cluster, session)
    assert after == before
