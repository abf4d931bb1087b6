"""The ConsumerActor against real in-process brokers on virtual time: resets, polls, seeks, leader
changes and the high watermark (tests/support/cluster.py: the brokers run the real controller)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from actors.clients.consumer.config import ConsumerConfig
from actors.clients.consumer.consumer import (
    Assign,
    ConsumerActor,
    Poll,
    PollResult,
    Position,
    PositionResult,
    Seek,
    SeekToEnd,
)
from actors.common.errors import ErrorCode
from actors.common.names import broker_ref
from actors.common.types import TopicPartition
from runtime.ref import ActorRef
from tests.support.cluster import InProcessCluster, batch

pytestmark = pytest.mark.asyncio

TP = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[InProcessCluster]:
    async with InProcessCluster() as cluster:
        await cluster.start_brokers(1, 2, 3)
        # The controller elects the first replica of each: broker 1 leads TP, broker 2 TP1.
        await cluster.create_topic(TP.topic, {TP.partition: (1, 2, 3), TP1.partition: (2, 3, 1)})
        yield cluster


def consumer(cluster: InProcessCluster, name: str = "consumer", **config: object) -> ActorRef:
    settings = ConsumerConfig.from_properties({"fetch.max.wait.ms": "100", **config})
    bootstrap = [broker_ref(3)]
    return cluster.client_node.spawn(name, lambda: ConsumerActor(config=settings, bootstrap=bootstrap))


async def poll(cluster: InProcessCluster, ref: ActorRef, timeout_ms: int = 1_000) -> PollResult:
    result = await cluster.complete(
        cluster.client_node.ask(ref, Poll(timeout_ms), timeout_ms=timeout_ms + 60_000)
    )
    assert isinstance(result, PollResult)
    return result


async def poll_values(
    cluster: InProcessCluster, ref: ActorRef, count: int
) -> list[tuple[int, int, bytes | None]]:
    """Poll until ``count`` records came back (each poll is bounded in virtual time)."""
    got: list[tuple[int, int, bytes | None]] = []
    for _ in range(50):
        result = await poll(cluster, ref)
        assert result.error is None, result.error
        got += [(r.partition, r.offset, r.value) for r in result.records]
        if len(got) >= count:
            return got
    raise AssertionError(f"only {len(got)} of {count} records")


async def position(cluster: InProcessCluster, ref: ActorRef, tp: TopicPartition) -> PositionResult:
    result = await cluster.complete(cluster.client_node.ask(ref, Position(tp, 10_000), timeout_ms=60_000))
    assert isinstance(result, PositionResult)
    return result


async def produce(cluster: InProcessCluster, leader: int, tp: TopicPartition, *values: bytes) -> None:
    response = await cluster.complete(cluster.produce(leader, tp, batch(*values)))
    assert response.partitions[0].error_code is ErrorCode.NONE


async def test_earliest_reads_everything_in_order_per_partition(cluster: InProcessCluster) -> None:
    await produce(cluster, 1, TP, b"a", b"b")
    await produce(cluster, 2, TP1, b"x")
    await produce(cluster, 1, TP, b"c")
    ref = consumer(cluster, **{"auto.offset.reset": "earliest"})
    cluster.client_node.tell(ref, Assign((TP, TP1)))
    got = await poll_values(cluster, ref, 4)
    assert [(o, v) for p, o, v in got if p == 0] == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert [(o, v) for p, o, v in got if p == 1] == [(0, b"x")]
    assert (await position(cluster, ref, TP)).offset == 3
    assert (await position(cluster, ref, TP1)).offset == 1
    # Nothing more: a poll waits its timeout and answers empty.
    assert (await poll(cluster, ref, timeout_ms=500)).records == ()


async def test_latest_starts_at_the_high_watermark_and_sees_new_records(cluster: InProcessCluster) -> None:
    await produce(cluster, 1, TP, b"old")
    ref = consumer(cluster)  # auto.offset.reset=latest, Kafka's default
    cluster.client_node.tell(ref, Assign((TP,)))
    assert (await position(cluster, ref, TP)).offset == 1
    await produce(cluster, 1, TP, b"new")
    assert await poll_values(cluster, ref, 1) == [(0, 1, b"new")]


async def test_only_records_below_the_high_watermark_are_returned(cluster: InProcessCluster) -> None:
    ref = consumer(cluster, **{"auto.offset.reset": "earliest"})
    cluster.client_node.tell(ref, Assign((TP,)))
    assert (await position(cluster, ref, TP)).offset == 0
    cluster.cut(1, 3)  # broker 3 stays in the ISR but cannot fetch: the HW cannot pass 0
    response = await cluster.complete(cluster.produce(1, TP, batch(b"uncommitted"), acks=1))
    assert response.partitions[0].error_code is ErrorCode.NONE
    assert (await poll(cluster, ref, timeout_ms=2_000)).records == ()
    # Broker 3 leaves the ISR after replica.lag.time.max.ms: the HW moves, the record is readable.
    await cluster.advance(15_000)
    assert await poll_values(cluster, ref, 1) == [(0, 0, b"uncommitted")]


async def test_the_consumer_follows_a_leader_change(cluster: InProcessCluster) -> None:
    await produce(cluster, 1, TP, b"before")
    ref = consumer(cluster, **{"auto.offset.reset": "earliest"})
    cluster.client_node.tell(ref, Assign((TP,)))
    assert await poll_values(cluster, ref, 1) == [(0, 0, b"before")]
    # Broker 1 stops cleanly: its controlled shutdown moves the leadership to broker 2.
    await cluster.stop_broker(1)
    await cluster.wait_for_leader(TP, 2)
    await produce(cluster, 2, TP, b"after")
    assert await poll_values(cluster, ref, 1) == [(0, 1, b"after")]


async def test_out_of_range_positions_reset_or_fail_as_configured(cluster: InProcessCluster) -> None:
    await produce(cluster, 1, TP, b"a", b"b")
    earliest = consumer(cluster, "earliest", **{"auto.offset.reset": "earliest"})
    cluster.client_node.tell(earliest, Assign((TP,)))
    cluster.client_node.tell(earliest, Seek(TP, 1_000))
    assert await poll_values(cluster, earliest, 2) == [(0, 0, b"a"), (0, 1, b"b")]

    strict = consumer(cluster, "strict", **{"auto.offset.reset": "none"})
    cluster.client_node.tell(strict, Assign((TP,)))
    cluster.client_node.tell(strict, Seek(TP, 1_000))
    result = await poll(cluster, strict)
    assert result.error is not None
    assert result.error.error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    # Without a reset policy an assigned partition has no position until the application seeks.
    unsought = consumer(cluster, "unsought", **{"auto.offset.reset": "none"})
    cluster.client_node.tell(unsought, Assign((TP,)))
    missing = await position(cluster, unsought, TP)
    assert missing.error is not None


async def test_seek_to_end_and_back(cluster: InProcessCluster) -> None:
    await produce(cluster, 1, TP, b"a", b"b", b"c")
    ref = consumer(cluster, **{"auto.offset.reset": "earliest"})
    cluster.client_node.tell(ref, Assign((TP,)))
    cluster.client_node.tell(ref, SeekToEnd())
    assert (await position(cluster, ref, TP)).offset == 3
    cluster.client_node.tell(ref, Seek(TP, 1))
    assert await poll_values(cluster, ref, 2) == [(0, 1, b"b"), (0, 2, b"c")]


async def test_commands_for_unassigned_partitions_change_nothing(cluster: InProcessCluster) -> None:
    ref = consumer(cluster)
    cluster.client_node.tell(ref, Assign((TP,)))
    cluster.client_node.tell(ref, Seek(TopicPartition("other", 0), 5))
    result = await position(cluster, ref, TopicPartition("other", 0))
    assert result.error is not None
    assert "not assigned" in str(result.error)
    assert (await position(cluster, ref, TP)).offset == 0


async def test_a_fetch_held_at_the_log_end_does_not_hold_back_its_leaders_other_partitions(
    cluster: InProcessCluster,
) -> None:
    quiet, busy = TopicPartition("pair", 0), TopicPartition("pair", 1)
    await cluster.create_topic("pair", {0: (1, 2, 3), 1: (1, 2, 3)})  # broker 1 leads both
    for value in (b"a", b"b", b"c"):  # three batches: one per fetch with a 1-byte partition limit
        await produce(cluster, 1, busy, value)
    ref = consumer(
        cluster,
        **{"auto.offset.reset": "earliest", "fetch.max.wait.ms": "20000", "max.partition.fetch.bytes": "1"},
    )
    cluster.client_node.tell(ref, Assign((quiet, busy)))
    # Before any poll, two fetches buffer a and b; the quiet partition is then fetched alone, at
    # its log end, and broker 1 holds that fetch for 20 s. Once a is handed out, c is fetched
    # meanwhile, not after it.
    await cluster.advance(1_000)
    started_ms = cluster.clock.now_ms()
    assert [v for _, _, v in await poll_values(cluster, ref, 3)] == [b"a", b"b", b"c"]
    assert cluster.clock.now_ms() - started_ms < 5_000
