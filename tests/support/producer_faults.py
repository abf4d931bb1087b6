"""Test-only helpers for the producer: a log-backed stand-in leader, lost replies, reading back.

* ``LogBackedLeader`` answers ProduceRequests the way a partition leader does, by appending to real
  ``Log``s (on a memory file system) — so duplicates of an idempotent producer's retries are
  recognised and sequence gaps rejected by the storage engine's own producer state, not by a script.
  A test can make it refuse appends for a partition (``refuse``: an error code, nothing written).
* ``ReplyDroppingTransport`` wraps a client node's transport: a seeded fraction of the answers to
  ProduceRequests the broker fully wrote is discarded, and the asker sees a network error — the
  classic way a non-idempotent retry writes a record twice.
* ``read_partition`` reads a partition back through the broker's consumer fetch path.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from actors.common.errors import ErrorCode
from actors.common.protocol import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
)
from actors.common.types import TopicPartition
from runtime.clock import ManualClock
from runtime.codec import WireEnvelope
from runtime.errors import PeerUnavailableError, StorageError
from runtime.ref import ActorRef
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.log_manager import LogManager
from runtime.storage.records import iterate_batches
from runtime.system import ActorSystem
from runtime.transport.base import InboundHandler, TaskSpawner, Transport

__all__ = ["LogBackedLeader", "ReplyDroppingTransport", "read_partition"]


class LogBackedLeader:
    """A leader's produce path over real logs (see the module docstring)."""

    def __init__(self, clock: ManualClock, *, leader_epoch: int = 0) -> None:
        self.clock = clock
        self.leader_epoch = leader_epoch
        self.fs = MemoryFileSystem(clock.wall_clock_ms)
        self.logs = LogManager.open(self.fs, "/data", now_ms=clock.now_ms(), rng=random.Random(0))
        self.refuse: dict[TopicPartition, ErrorCode] = {}
        self.requests: list[ProduceRequest] = []

    def handle(self, request: ProduceRequest) -> ProduceResponse:
        self.requests.append(request)
        answers = []
        for data in request.partitions:
            tp = data.tp
            refusal = self.refuse.get(tp)
            if refusal is not None:
                answers.append(
                    ProducePartitionResponse(topic=tp.topic, partition=tp.partition, error_code=refusal)
                )
                continue
            log = self.logs.get_or_create_log(tp, now_ms=self.clock.now_ms())
            try:
                info = log.append_as_leader(
                    data.records,
                    self.leader_epoch,
                    now_ms=self.clock.now_ms(),
                    wall_clock_ms=self.clock.wall_clock_ms(),
                )
            except StorageError as error:
                code = ErrorCode[getattr(error, "error_name", "UNKNOWN_SERVER_ERROR")]
                answers.append(
                    ProducePartitionResponse(
                        topic=tp.topic,
                        partition=tp.partition,
                        error_code=code,
                        log_start_offset=log.log_start_offset,
                        error_message=str(error),
                    )
                )
                continue
            answers.append(
                ProducePartitionResponse(
                    topic=tp.topic,
                    partition=tp.partition,
                    error_code=ErrorCode.NONE,
                    base_offset=info.first_offset,
                    log_start_offset=info.log_start_offset,
                )
            )
        return ProduceResponse(partitions=tuple(answers))

    def values(self, tp: TopicPartition) -> list[bytes | None]:
        """Every record value of the partition, in offset order."""
        log = self.logs.get_log(tp)
        if log is None:
            return []
        data = log.read(log.log_start_offset, 1 << 30, max_offset=None).records if log.log_end_offset else b""
        return [record.value for batch in iterate_batches(data) for record in batch.records()]


@dataclass
class DropStats:
    answered: int = 0
    dropped: int = 0
    dropped_requests: list[ProduceRequest] = field(default_factory=list)


class ReplyDroppingTransport:
    """A transport that loses a fraction of ProduceRequest answers after the broker handled them."""

    def __init__(
        self,
        inner: Transport,
        *,
        fraction: float,
        seed: int,
        should_drop: Callable[[ProduceRequest], bool] | None = None,
    ) -> None:
        if not 0 <= fraction < 1:
            raise ValueError("fraction must be in [0, 1)")
        self.inner = inner
        self.fraction = fraction
        self.rng = random.Random(seed)
        self.should_drop = should_drop
        self.stats = DropStats()
        self.enabled = True

    async def start(self, inbound: InboundHandler, spawn: TaskSpawner) -> None:
        await self.inner.start(inbound, spawn)

    def send(self, node_id: str, envelope: WireEnvelope) -> None:
        self.inner.send(node_id, envelope)

    async def ask(
        self, node_id: str, envelope: WireEnvelope, timeout_ms: int, on_sent: Callable[[], None] | None = None
    ) -> object:
        reply = await self.inner.ask(node_id, envelope, timeout_ms, on_sent)
        request = envelope.message
        if isinstance(request, ProduceRequest) and self.enabled:
            # Only the answers of requests the broker fully wrote are lost: then a retry that writes
            # again is exactly one duplicate per record, which a test can count.
            written = isinstance(reply, ProduceResponse) and all(
                p.error_code is ErrorCode.NONE for p in reply.partitions
            )
            wanted = written and (self.should_drop is None or self.should_drop(request))
            if wanted and self.rng.random() < self.fraction:
                self.stats.dropped += 1
                self.stats.dropped_requests.append(request)
                raise PeerUnavailableError(node_id, "reply lost (test fault injection)")
            self.stats.answered += 1
        return reply

    async def stop(self) -> None:
        await self.inner.stop()


async def read_partition(
    system: ActorSystem, broker: ActorRef, tp: TopicPartition, *, timeout_ms: int = 10_000
) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record below the high watermark, through consumer fetches."""
    records: list[tuple[int, bytes | None]] = []
    offset = 0
    while True:
        wanted = FetchPartition(
            topic=tp.topic, partition=tp.partition, fetch_offset=offset, partition_max_bytes=1 << 20
        )
        response = await system.ask(
            broker,
            FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, partitions=(wanted,)),
            timeout_ms=timeout_ms,
        )
        assert isinstance(response, FetchResponse)
        data = response.partitions[0]
        assert data.error_code is ErrorCode.NONE, data
        batch = [
            (r.offset, r.value)
            for b in iterate_batches(data.records)
            for r in b.records()
            if r.offset >= offset
        ]
        if not batch:
            return records
        records += batch
        offset = batch[-1][0] + 1
