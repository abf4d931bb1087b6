"""The asyncio ``Consumer``: assign partitions, seek, poll records, ask positions.

A thin façade over the ``ConsumerActor`` (``actors/clients/consumer/consumer.py``), which
fetches in the background (one fetch per leader, bounded by what is buffered). There are no
consumer groups: the application assigns partitions, as with Kafka's ``KafkaConsumer.assign``.

    async with Consumer("localhost:9092", config={"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition("orders", 0)])
        for record in await consumer.poll(timeout_ms=1000): ...

Errors come out of ``poll``/``position`` as ``KafkaError`` (e.g. OFFSET_OUT_OF_RANGE with
``auto.offset.reset=none``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import NamedTuple

from actors.clients.consumer.config import ConsumerConfig, ConsumerConfigError
from actors.clients.consumer.consumer import (
    Assign,
    ConsumerActor,
    Pause,
    Poll,
    PollResult,
    Position,
    PositionResult,
    Seek,
    SeekToBeginning,
    SeekToEnd,
)
from actors.clients.consumer.state import ConsumerRecord
from actors.common.errors import ErrorCode, KafkaError
from actors.common.names import CONSUMER_ACTOR_NAME, broker_ref
from actors.common.protocol import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
)
from actors.common.types import TopicPartition
from ops.clients.connection import (
    ClientCredential,
    ClientNode,
    load_client_properties,
    resolve_credential,
    resolve_ssl_context,
    split_connection_properties,
)
from ops.properties import ConfigError
from runtime.ref import ActorRef

__all__ = ["Consumer", "ConsumerRecord", "OffsetAndTimestamp"]

# ListOffsets' answer when no record has a timestamp at or after the one asked for.
UNKNOWN_OFFSET = -1


class OffsetAndTimestamp(NamedTuple):
    """What ``offsets_for_times`` finds for a partition (kafka-python's ``OffsetAndTimestamp``, Kafka's
    ``org.apache.kafka.clients.consumer.OffsetAndTimestamp``): the offset, the record's timestamp and
    the leader epoch of its batch (-1 when it has none)."""

    offset: int
    timestamp: int
    leader_epoch: int


class Consumer:
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        secret: str | ClientCredential | None = None,
        config: Mapping[str, object] | None = None,
        config_file: str | os.PathLike[str] | None = None,
    ) -> None:
        properties: dict[str, object] = {**load_client_properties(config_file), **(config or {})}
        connection, consumer_properties = split_connection_properties(properties)
        try:
            self.config = ConsumerConfig.from_properties(consumer_properties)
        except ConsumerConfigError as error:
            raise ConfigError(str(error)) from None
        self._node = ClientNode(
            bootstrap_servers,
            secret=secret or resolve_credential({k: str(v) for k, v in properties.items()}),
            client_id=self.config.client_id,
            ssl_context=resolve_ssl_context(connection),
        )
        self._ref: ActorRef | None = None

    async def __aenter__(self) -> Consumer:
        await self._node.__aenter__()
        node = self._node
        self._ref = node.system.spawn(
            CONSUMER_ACTOR_NAME,
            lambda: ConsumerActor(
                config=self.config, bootstrap=node.bootstrap_refs, address_book=node.address_book
            ),
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self._node.__aexit__(exc_type, exc, traceback)

    @property
    def _actor(self) -> ActorRef:
        if self._ref is None:
            raise RuntimeError("use the Consumer as `async with Consumer(...) as consumer:`")
        return self._ref

    # ----------------------------------------------------------------------------- commands

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._node.system.tell(self._actor, Assign(tuple(partitions)))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._node.system.tell(self._actor, Seek(tp, offset))

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._node.system.tell(
            self._actor, SeekToBeginning(None if partitions is None else tuple(partitions))
        )

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._node.system.tell(self._actor, SeekToEnd(None if partitions is None else tuple(partitions)))

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self._node.system.tell(self._actor, Pause(tuple(partitions), paused=True))

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._node.system.tell(self._actor, Pause(tuple(partitions), paused=False))

    # -------------------------------------------------------------------------------- queries

    async def poll(self, timeout_ms: int = 1000) -> list[ConsumerRecord]:
        """Records as soon as any are available (up to ``max.poll.records``), else [] after
        ``timeout_ms``."""
        result = await self._node.system.ask(
            self._actor, Poll(timeout_ms), timeout_ms=timeout_ms + self.config.request_timeout_ms
        )
        assert isinstance(result, PollResult)
        if result.error is not None and not result.records:
            raise result.error
        return list(result.records)

    async def position(self, tp: TopicPartition, *, timeout_ms: int | None = None) -> int:
        wait_ms = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        result = await self._node.system.ask(self._actor, Position(tp, wait_ms), timeout_ms=wait_ms + 1000)
        if isinstance(result, KafkaError):
            raise result
        assert isinstance(result, PositionResult)
        if result.error is not None:
            raise result.error
        assert result.offset is not None
        return result.offset

    async def partitions_for(self, topic: str) -> list[TopicPartition]:
        """The topic's partitions, from a broker's metadata (UNKNOWN_TOPIC_OR_PARTITION if none)."""
        response = await self._ask_any(MetadataRequest(topics=(topic,)))
        assert isinstance(response, MetadataResponse)
        self._node.learn(response.brokers)
        (found,) = response.topics
        if found.error_code is not ErrorCode.NONE:
            raise KafkaError(found.error_code, f"topic {topic!r}: {found.error_code.name}")
        return [
            TopicPartition(topic, p.partition) for p in sorted(found.partitions, key=lambda p: p.partition)
        ]

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._list_offsets(partitions, EARLIEST_TIMESTAMP)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark of each partition (what a consumer can read up to)."""
        return await self._list_offsets(partitions, LATEST_TIMESTAMP)

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first offset whose record has a timestamp >= the one given (ms
        since the epoch), with that record's timestamp and leader epoch; None when no record below
        the high watermark has one (kafka-python's and Kafka's ``offsetsForTimes``; the broker's
        rule is docs/log.md §11). The partitions need not be assigned and positions do not move.
        ``ValueError`` for a negative timestamp, ``KafkaError`` for a partition the leader could
        not answer."""
        wanted: dict[TopicPartition, int] = {}
        for tp, timestamp in timestamps.items():
            if timestamp < 0:
                raise ValueError(
                    f"The target time for partition {tp} is {timestamp}. The target time cannot be negative."
                )
            wanted[tp] = int(timestamp)
        answers = await self._list_offsets_for(wanted)
        return {
            tp: None
            if answer.offset == UNKNOWN_OFFSET
            else OffsetAndTimestamp(answer.offset, answer.timestamp, answer.leader_epoch)
            for tp, answer in answers.items()
        }

    async def _list_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        answers = await self._list_offsets_for(dict.fromkeys(partitions, timestamp))
        return {tp: answer.offset for tp, answer in answers.items()}

    async def _list_offsets_for(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, ListOffsetsPartitionResponse]:
        """ListOffsets at each partition's leader, one request per leader, as a consumer (replica
        id -1); an error in any answer raises ``KafkaError``."""
        if not timestamps:
            return {}
        metadata = await self._ask_any(
            MetadataRequest(topics=tuple(dict.fromkeys(tp.topic for tp in timestamps)))
        )
        assert isinstance(metadata, MetadataResponse)
        self._node.learn(metadata.brokers)
        leaders = {
            TopicPartition(t.name, p.partition): p.leader
            for t in metadata.topics
            for p in t.partitions
            if p.leader >= 0
        }
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in timestamps:
            if tp not in leaders:
                raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp} has no leader (or does not exist)")
            by_leader.setdefault(leaders[tp], []).append(tp)
        answers: dict[TopicPartition, ListOffsetsPartitionResponse] = {}
        for leader, tps in by_leader.items():
            response = await self._node.system.ask(
                broker_ref(leader),
                ListOffsetsRequest(
                    replica_id=CONSUMER_REPLICA_ID,
                    partitions=tuple(
                        ListOffsetsPartition(topic=tp.topic, partition=tp.partition, timestamp=timestamps[tp])
                        for tp in tps
                    ),
                ),
                timeout_ms=self.config.request_timeout_ms,
            )
            assert isinstance(response, ListOffsetsResponse)
            for answer in response.partitions:
                if answer.error_code is not ErrorCode.NONE:
                    raise KafkaError(answer.error_code, f"{answer.tp}: {answer.error_code.name}")
                answers[answer.tp] = answer
        return {tp: answers[tp] for tp in timestamps}

    async def _ask_any(self, message: object) -> object:
        return await self._node.ask_first(
            [broker_ref(b) for b in self._node.known_brokers] + list(self._node.bootstrap_refs),
            message,
            timeout_ms=self.config.request_timeout_ms,
        )
