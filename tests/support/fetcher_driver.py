"""A ReplicaFetcherActor under ``BehaviorTestKit`` against a mock leader: Kafka's
``AbstractFetcherThreadTest`` shape, with real logs on both sides.

* The **mock leader** (``MockLeader``) holds a real ``Log`` per partition and answers what a leader
  broker would: OffsetsForLeaderEpoch from its epoch cache, Fetch with **one batch per fetch** (as
  Kafka's ``MockFetcherThread`` does), ListOffsets LATEST/EARLIEST, every request fenced on the
  partition's leader epoch (KIP-320). A test may script a partition's next answer (an error, or a
  particular epoch/offset pair) or corrupt its next fetched batch.
* The **follower partitions** are real PartitionActors (``PartitionDriver``) on the follower's own
  memory disk: the fetcher's local asks (log state, truncation, appends) are answered by them.
* The fetcher's asks to the leader queue up (one is in flight at a time). ``run`` answers them in
  order; a fetch that would return nothing new is **parked**, as a real leader parks it, and is
  answered by a later ``run`` once the leader has something (data, a higher HW, an error).

Nothing runs by itself: the test moves time (``advance``) and answers the leader (``run``).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from actors.common.errors import ErrorCode
from actors.common.names import BROKER_ACTOR_NAME, fetcher_name
from actors.common.protocol import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_PARTITION_LEADER_EPOCH,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochResult,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from actors.common.types import TopicPartition
from actors.server.config import BrokerConfig
from actors.server.fetcher.replica_fetcher import (
    AddPartitions,
    FetchPhase,
    RemovePartitions,
    ReplicaFetcherActor,
)
from actors.server.replica.messages import BecomeFollower
from runtime.clock import ManualClock
from runtime.effects import Ask, Effect
from runtime.storage.config import LogConfig
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.log import Log
from runtime.storage.log_manager import LogManager
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.testkit import BehaviorTestKit
from tests.support.partition_driver import PartitionDriver, reply_to

LEADER_ID = 0
FOLLOWER_ID = 1


def batch(base_offset: int, count: int, epoch: int, *, tag: bytes = b"") -> bytes:
    """``count`` records at ``base_offset..`` stamped with leader ``epoch`` (values name both)."""
    return build_batch(
        [SimpleRecord(value=b"%s%d@%d" % (tag, base_offset + i, epoch)) for i in range(count)],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


def write(log: Log, *batches: bytes) -> None:
    """Put batches on a log with their own offsets and epochs (how a test seeds a disk)."""
    for data in batches:
        log.append_as_follower(data, now_ms=0)


def log_bytes(log: Log) -> bytes:
    """Everything from the log start to the LEO, as stored."""
    if log.log_end_offset == log.log_start_offset:
        return b""
    return bytes(log.read(log.log_start_offset, 1 << 30, None, True).records)


def epochs(log: Log) -> list[tuple[int, int]]:
    return [(entry.epoch, entry.start_offset) for entry in log.leader_epoch_cache.entries]


@dataclass
class MockLeader:
    """The leader side of the fetch protocol over real logs (see the module docstring)."""

    clock: ManualClock
    leader_epochs: dict[TopicPartition, int] = field(default_factory=dict)
    requests: list[Any] = field(default_factory=list)
    # Per (request kind, partition): answers to give instead of computing them, in order.
    scripted: dict[tuple[type, TopicPartition], deque[Any]] = field(default_factory=dict)
    corrupt_next_fetch: set[TopicPartition] = field(default_factory=set)
    last_sent_high_watermark: dict[TopicPartition, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.fs = MemoryFileSystem(self.clock.wall_clock_ms)
        self.log_manager = LogManager.open(self.fs, "/leader", now_ms=0, rng=random.Random(LEADER_ID))

    def add_partition(self, tp: TopicPartition, *, leader_epoch: int) -> Log:
        self.leader_epochs[tp] = leader_epoch
        return self.log(tp)

    def log(self, tp: TopicPartition) -> Log:
        return self.log_manager.get_or_create_log(tp, LogConfig(), now_ms=self.clock.now_ms())

    def become_leader(self, tp: TopicPartition, leader_epoch: int) -> None:
        """A new leader epoch: cached at the log end at once (KIP-279)."""
        self.leader_epochs[tp] = leader_epoch
        self.log(tp).maybe_assign_epoch_start_offset(leader_epoch, self.log(tp).log_end_offset)

    def script(self, kind: type, tp: TopicPartition, answer: Any) -> None:
        """The next ``kind`` request for ``tp`` gets ``answer`` (an ErrorCode or a full result)."""
        self.scripted.setdefault((kind, tp), deque()).append(answer)

    def count(self, kind: type) -> int:
        return sum(isinstance(r, kind) for r in self.requests)

    # ------------------------------------------------------------------------------ answers

    def _scripted(self, kind: type, tp: TopicPartition) -> Any:
        queue = self.scripted.get((kind, tp))
        return queue.popleft() if queue else None

    def _fence(self, tp: TopicPartition, current_leader_epoch: int) -> ErrorCode:
        epoch = self.leader_epochs.get(tp)
        if epoch is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if current_leader_epoch == NO_PARTITION_LEADER_EPOCH:
            return ErrorCode.NONE
        if current_leader_epoch < epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if current_leader_epoch > epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

    def answer(self, request: Any) -> Any | None:
        """The response to ``request``, or None for a fetch the leader would park."""
        if isinstance(request, OffsetsForLeaderEpochRequest):
            return OffsetsForLeaderEpochResponse(
                partitions=tuple(
                    self._epoch_end(p.tp, p.current_leader_epoch, p.leader_epoch) for p in request.partitions
                )
            )
        if isinstance(request, ListOffsetsRequest):
            return ListOffsetsResponse(
                partitions=tuple(
                    self._list_offset(p.tp, p.current_leader_epoch, p.timestamp) for p in request.partitions
                )
            )
        if isinstance(request, FetchRequest):
            partitions = tuple(
                self._fetch(p.tp, p.current_leader_epoch, p.fetch_offset, peek=True)
                for p in request.partitions
            )
            news = any(
                p.error_code is not ErrorCode.NONE
                or p.records
                or p.high_watermark > self.last_sent_high_watermark.get(p.tp, 0)
                for p in partitions
            )
            if not news:
                return None
            partitions = tuple(
                self._fetch(p.tp, p.current_leader_epoch, p.fetch_offset, peek=False)
                for p in request.partitions
            )
            for p in partitions:
                if p.error_code is ErrorCode.NONE:
                    self.last_sent_high_watermark[p.tp] = p.high_watermark
            return FetchResponse(error_code=ErrorCode.NONE, partitions=partitions)
        raise AssertionError(f"the mock leader does not answer {request!r}")

    def _epoch_end(self, tp: TopicPartition, current: int, requested: int) -> OffsetForLeaderEpochResult:
        scripted = self._scripted(OffsetsForLeaderEpochRequest, tp)
        error = scripted if isinstance(scripted, ErrorCode) else self._fence(tp, current)
        if isinstance(scripted, OffsetForLeaderEpochResult):
            return scripted
        if error is not ErrorCode.NONE:
            return OffsetForLeaderEpochResult(topic=tp.topic, partition=tp.partition, error_code=error)
        found = self.log(tp).end_offset_for_epoch(requested)
        epoch, offset = found if found is not None else (-1, -1)
        return OffsetForLeaderEpochResult(
            topic=tp.topic,
            partition=tp.partition,
            error_code=ErrorCode.NONE,
            leader_epoch=epoch,
            end_offset=offset,
        )

    def _list_offset(self, tp: TopicPartition, current: int, timestamp: int) -> ListOffsetsPartitionResponse:
        scripted = self._scripted(ListOffsetsRequest, tp)
        error = scripted if isinstance(scripted, ErrorCode) else self._fence(tp, current)
        if error is not ErrorCode.NONE:
            return ListOffsetsPartitionResponse(topic=tp.topic, partition=tp.partition, error_code=error)
        log = self.log(tp)
        assert timestamp in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP)
        offset = log.log_end_offset if timestamp == LATEST_TIMESTAMP else log.log_start_offset
        return ListOffsetsPartitionResponse(
            topic=tp.topic,
            partition=tp.partition,
            error_code=ErrorCode.NONE,
            offset=offset,
            leader_epoch=self.leader_epochs[tp],
        )

    def _fetch(self, tp: TopicPartition, current: int, offset: int, *, peek: bool) -> FetchPartitionResponse:
        queue = self.scripted.get((FetchRequest, tp))
        scripted = (queue[0] if peek else queue.popleft()) if queue else None
        error = scripted if isinstance(scripted, ErrorCode) else self._fence(tp, current)
        log = self.log(tp)
        if error is ErrorCode.NONE and not log.log_start_offset <= offset <= log.log_end_offset:
            error = ErrorCode.OFFSET_OUT_OF_RANGE
        if error is not ErrorCode.NONE:
            return FetchPartitionResponse(topic=tp.topic, partition=tp.partition, error_code=error)
        # One batch per fetch, like Kafka's MockFetcherThread.
        data = bytes(log.read(offset, 1, None, True).records)
        if data and tp in self.corrupt_next_fetch and not peek:
            self.corrupt_next_fetch.discard(tp)
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        return FetchPartitionResponse(
            topic=tp.topic,
            partition=tp.partition,
            error_code=ErrorCode.NONE,
            high_watermark=log.high_watermark,
            last_stable_offset=log.high_watermark,
            log_start_offset=log.log_start_offset,
            records=data,
        )


class FetcherDriver:
    """The fetcher of follower broker 1 for leader broker 0, its local partitions and the mock leader."""

    def __init__(self, *, replica_fetch_backoff_ms: int = 1_000) -> None:
        self.clock = ManualClock()
        self.leader = MockLeader(self.clock)
        self.config = BrokerConfig(broker_id=FOLLOWER_ID, replica_fetch_backoff_ms=replica_fetch_backoff_ms)
        self.fetcher = ReplicaFetcherActor(fetcher_id=0, source_broker_id=LEADER_ID, config=self.config)
        self.kit: BehaviorTestKit[Any] = BehaviorTestKit(
            self.fetcher, name=fetcher_name(0, LEADER_ID), node_id=str(FOLLOWER_ID), clock=self.clock
        )
        self.followers: dict[TopicPartition, PartitionDriver] = {}
        # Requests to the leader, oldest first, not answered yet (at most one: one in flight).
        self.to_leader: deque[Ask] = deque()
        self.sent_to_leader: list[Any] = []
        # The leader's answers, in order.
        self.leader_answers: list[Any] = []
        # What the fetcher asked its local partitions, with their answers, in order.
        self.local: list[tuple[Any, Any]] = []
        self.local_requests: dict[TopicPartition, list[Any]] = {}
        # Called with each leader request just before the leader answers it.
        self.before_leader_answers: Callable[[Any], None] | None = None
        # Called with each local request just before the local partition answers it.
        self.before_local_answers: Callable[[Any], None] | None = None

    # ------------------------------------------------------------------------------ set up

    async def follower(
        self, tp: TopicPartition, *, leader_epoch: int, seed: Callable[[Log], None] | None = None
    ) -> PartitionDriver:
        """A follower partition on broker 1 (seeded, then made follower of broker 0)."""
        driver = await PartitionDriver(broker_id=FOLLOWER_ID, tp=tp, clock=self.clock).start()
        if seed is not None:
            seed(driver.log)
        await driver.become_follower(
            leader=LEADER_ID,
            leader_epoch=leader_epoch,
            isr=(LEADER_ID, FOLLOWER_ID),
            replicas=(LEADER_ID, FOLLOWER_ID),
        )
        self.followers[tp] = driver
        return driver

    def new_epoch(self, tp: TopicPartition, leader_epoch: int) -> None:
        """What the broker does on a LeaderAndIsr with a higher epoch for a followed partition:
        tell the partition its new role, then remove it from the fetcher and add it back."""
        follower = self.followers[tp]
        state = follower.partition_state(
            leader=LEADER_ID,
            leader_epoch=leader_epoch,
            isr=(LEADER_ID, FOLLOWER_ID),
            replicas=(LEADER_ID, FOLLOWER_ID),
        )
        follower.kit.tell(BecomeFollower(state, follower.policy, LogConfig()))
        self.remove(tp)
        self.add((tp, leader_epoch))

    def add(self, *partitions: tuple[TopicPartition, int]) -> None:
        """AddPartitions (the broker's makeFollowers)."""
        self._route(self.kit.tell(AddPartitions(tuple(partitions))))

    def remove(self, *tps: TopicPartition) -> None:
        self._route(self.kit.tell(RemovePartitions(tuple(tps))))

    # ------------------------------------------------------------------------------ driving

    def _route(self, effects: list[Effect]) -> None:
        """Answer local asks at once (recursively); queue the leader's."""
        for effect in effects:
            if not isinstance(effect, Ask):
                continue
            if effect.target.name == BROKER_ACTOR_NAME:
                assert effect.target.node_id == str(LEADER_ID)
                assert not self.to_leader, "the fetcher has two requests in flight to the leader"
                self.to_leader.append(effect)
                self.sent_to_leader.append(effect.message)
                continue
            follower = next(d for d in self.followers.values() if effect.target.name == d.kit.ref.name)
            self.local_requests.setdefault(follower.tp, []).append(effect.message)
            if self.before_local_answers is not None:
                self.before_local_answers(effect.message)
            requester, replies = follower.kit.ask(effect.message)
            answer = reply_to(requester, replies)
            self.local.append((effect.message, answer))
            self._route(self.kit.tell(effect.on_reply(answer)))

    def run(self, *, max_leader_requests: int | None = None) -> int:
        """Answer leader requests in order until one is parked, none is left, or the limit is hit.
        Returns how many were answered."""
        answered = 0
        while self.to_leader and (max_leader_requests is None or answered < max_leader_requests):
            ask = self.to_leader[0]
            if self.before_leader_answers is not None:
                self.before_leader_answers(ask.message)
            response = self.leader.answer(ask.message)
            if response is None:
                break
            self.to_leader.popleft()
            self.leader.requests.append(ask.message)
            self.leader_answers.append(response)
            answered += 1
            self._route(self.kit.tell(ask.on_reply(response)))
        return answered

    def advance(self, delta_ms: int) -> None:
        """Move time (back-offs end), then answer the leader."""
        self._route(self.kit.advance(delta_ms))
        self.run()

    # ---------------------------------------------------------------------------- looking

    def epoch_answers(self) -> list[list[tuple[TopicPartition, int, int]]]:
        """Each OffsetsForLeaderEpoch answer: (partition, leader epoch, end offset) per partition."""
        return [
            [(p.tp, p.leader_epoch, p.end_offset) for p in answer.partitions]
            for answer in self.leader_answers
            if isinstance(answer, OffsetsForLeaderEpochResponse)
        ]

    def sent(self, kind: type) -> int:
        return sum(isinstance(r, kind) for r in self.sent_to_leader)

    def phase(self, tp: TopicPartition) -> FetchPhase | None:
        state = self.fetcher.partitions.get(tp)
        return state.phase if state is not None else None

    def fetch_offset(self, tp: TopicPartition) -> int:
        return self.fetcher.partitions[tp].fetch_offset

    def delayed(self, tp: TopicPartition) -> bool:
        state = self.fetcher.partitions[tp]
        return state.delayed_until_ms is not None and state.delayed_until_ms > self.clock.now_ms()

    def failed(self, tp: TopicPartition) -> bool:
        return tp in self.fetcher.failed and tp not in self.fetcher.partitions

    def log(self, tp: TopicPartition) -> Log:
        return self.followers[tp].log
