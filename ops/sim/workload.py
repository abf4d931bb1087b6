"""The simulation's clients: real producer and consumer actors on client nodes, and the admin
requests a person would make, each keeping the history the invariants are checked against.

Every record value is unique and says where it belongs: ``<topic>/<generation>/<producer>/<seq>``
(a topic deleted and created again is a new generation). A producer is Kafka's: idempotent,
acks=all, retries until ``delivery.timeout.ms``; each value's outcome is kept: acknowledged at an
offset, failed with an error, or unknown while in flight.

A consumer reads every partition of one topic generation from the beginning, below the high
watermark, and keeps what it saw: each (partition, offset, value) must still be there at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from actors.clients.consumer.config import ConsumerConfig, OffsetResetStrategy
from actors.clients.consumer.consumer import Assign, ConsumerActor, Poll, PollResult, SeekToBeginning
from actors.clients.producer.config import ProducerConfig
from actors.clients.producer.producer import ProducerActor
from actors.clients.producer.protocol import OutgoingRecord, ProducerResults, RecordMetadata, SendRecords
from actors.common.names import CONSUMER_ACTOR_NAME, broker_ref
from actors.common.types import TopicPartition
from ops.sim.cluster import SimCluster
from runtime.actor import Actor
from runtime.context import Context
from runtime.errors import TransportError
from runtime.ref import ActorRef
from runtime.supervision import SupervisorStrategy

__all__ = ["ConsumerClient", "Outcome", "ProducerClient", "parse_value"]


def value_of(topic: str, generation: int, producer: str, sequence: int) -> bytes:
    return f"{topic}/{generation}/{producer}/{sequence}".encode()


def parse_value(value: bytes | None) -> tuple[str, int, str, int] | None:
    """(topic, generation, producer, sequence) of a simulation value; None if it is not one."""
    if value is None:
        return None
    parts = value.decode(errors="replace").split("/")
    if len(parts) != 4 or not parts[1].isdigit() or not parts[3].isdigit():
        return None
    return parts[0], int(parts[1]), parts[2], int(parts[3])


@dataclass(slots=True)
class Outcome:
    """What became of one sent value: acknowledged at (partition, offset), failed, or pending."""

    value: bytes
    sent_ms: int
    partition: int | None = None
    offset: int | None = None
    error: str | None = None
    acked_ms: int | None = None

    @property
    def acked(self) -> bool:
        return self.offset is not None


class _Results(Actor[Any]):
    """Receives a producer's outcomes on its client node."""

    def __init__(self, client: ProducerClient) -> None:
        self.client = client

    def receive(self, ctx: Context[Any], message: Any) -> None:
        if isinstance(message, ProducerResults):
            for batch in message.outcomes:
                for completion, result in batch.results():
                    self.client.record(completion, result, ctx.now_ms)


@dataclass
class ProducerClient:
    """One idempotent acks=all producer writing to one topic generation."""

    cluster: SimCluster
    name: str
    topic: str
    generation: int
    delivery_timeout_ms: int = 120_000
    outcomes: dict[bytes, Outcome] = field(default_factory=dict)
    sequence: int = 0
    ref: ActorRef | None = None
    node: str = ""
    # Acknowledged since the checker last looked (it drains this list).
    newly_acked: list[Outcome] = field(default_factory=list)

    async def start(self) -> None:
        self.node = f"client-{self.name}"
        system = await self.cluster.client(self.node)
        results = system.spawn(f"results-{self.name}", lambda: _Results(self))
        config = ProducerConfig(
            bootstrap_servers=tuple(f"broker-{b}:9092" for b in self.cluster.broker_ids),
            client_id=self.name,
            acks=-1,
            linger_ms=5,
            enable_idempotence=True,
            request_timeout_ms=10_000,
            delivery_timeout_ms=self.delivery_timeout_ms,
            retry_backoff_ms=100,
            max_block_ms=30_000,
        )
        bootstrap = [broker_ref(b) for b in self.cluster.broker_ids]
        self.ref = system.spawn(
            f"producer-{self.name}",
            lambda: ProducerActor(config, bootstrap=bootstrap, results=results),
            supervision=SupervisorStrategy.stop(),
        )

    def send(self, count: int, now_ms: int, wall_clock_ms: int) -> None:
        assert self.ref is not None
        records = []
        for _ in range(count):
            value = value_of(self.topic, self.generation, self.name, self.sequence)
            self.sequence += 1
            self.outcomes[value] = Outcome(value, now_ms)
            records.append(OutgoingRecord(self.topic, -1, None, value, (), wall_clock_ms, value))
        self.cluster.clients[self.node].tell(self.ref, SendRecords(records=records))

    def record(self, completion: object, result: RecordMetadata | Exception, now_ms: int) -> None:
        assert isinstance(completion, bytes)
        outcome = self.outcomes[completion]
        if isinstance(result, RecordMetadata):
            outcome.partition, outcome.offset, outcome.acked_ms = result.partition, result.offset, now_ms
            self.newly_acked.append(outcome)
        else:
            outcome.error = type(result).__name__

    def stop(self) -> None:
        if self.ref is not None:
            system = self.cluster.clients.get(self.node)
            if system is not None and system.has_actor(self.ref.name):
                system.stop_actor(self.ref)
            self.ref = None

    def acked(self) -> list[Outcome]:
        return [o for o in self.outcomes.values() if o.acked]


@dataclass
class ConsumerClient:
    """Reads every partition of one topic generation from the beginning."""

    cluster: SimCluster
    name: str
    topic: str
    generation: int
    partitions: int
    seen: dict[tuple[int, int], bytes | None] = field(default_factory=dict)
    ref: ActorRef | None = None
    node: str = ""
    polling: bool = False

    async def start(self) -> None:
        self.node = f"client-{self.name}"
        system = await self.cluster.client(self.node)
        config = ConsumerConfig(
            client_id=self.name,
            auto_offset_reset=OffsetResetStrategy.EARLIEST,
            fetch_max_wait_ms=200,
            retry_backoff_ms=100,
        )
        bootstrap = [broker_ref(b) for b in self.cluster.broker_ids]
        self.ref = system.spawn(
            f"{CONSUMER_ACTOR_NAME}-{self.name}", lambda: ConsumerActor(config=config, bootstrap=bootstrap)
        )
        tps = tuple(TopicPartition(self.topic, p) for p in range(self.partitions))
        system.tell(self.ref, Assign(tps))
        system.tell(self.ref, SeekToBeginning())

    def poll(self) -> None:
        """Ask for whatever is buffered (in the background; one poll at a time)."""
        if self.ref is None or self.polling:
            return
        system = self.cluster.clients[self.node]
        ref = self.ref
        self.polling = True

        async def poll_once() -> None:
            try:
                result = await system.ask(ref, Poll(timeout_ms=0), timeout_ms=5_000)
                if isinstance(result, PollResult):
                    for record in result.records:
                        self.seen[(record.partition, record.offset)] = record.value
            except TransportError:
                pass  # the consumer was stopped meanwhile
            finally:
                self.polling = False

        _ = self.cluster.run_in_background(poll_once(), name=f"poll {self.name}")

    def stop(self) -> None:
        if self.ref is not None:
            system = self.cluster.clients.get(self.node)
            if system is not None and system.has_actor(self.ref.name):
                system.stop_actor(self.ref)
            self.ref = None
