"""One PartitionActor under ``BehaviorTestKit``: Kafka's ``PartitionTest``, with real stores.

Where Kafka's PartitionTest mocks the log and the ZooKeeper state store, this driver gives the actor
a real ``Log`` on a ``MemoryFileSystem`` and runs its conditional ISR writes against an in-memory
ZooKeeper. A failed ISR write is therefore produced the way it happens in a cluster: the "controller"
(``controller_writes_state``) changes the partition state znode, so the leader's cached zkVersion
is stale. Time is a ``ManualClock``; nothing runs unless the test says so.

The driver answers the actor's pipes (the ZooKeeper writes) by awaiting them, unless the test asks
to hold them (``hold_pipes``), which keeps an ISR change in flight.
"""

from __future__ import annotations

import random
from typing import Any

from actors.common.errors import ErrorCode
from actors.common.names import broker_ref, partition_name
from actors.common.protocol import LeaderAndIsrPartitionState, OffsetForLeaderEpochResult
from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.config import BrokerConfig, TopicPolicy
from actors.server.replica.messages import (
    AppendAsFollower,
    AppendRecords,
    BecomeFollower,
    BecomeLeader,
    FollowerAppendResult,
    LastOffsetForLeaderEpoch,
    MaybeShrinkIsr,
    PartitionAppendResult,
    PartitionReadResult,
    ReadRecords,
)
from actors.server.replica.partition import PartitionActor
from runtime.clock import ManualClock
from runtime.coordination import MemoryCoordinator, MemoryZooKeeper, NodeExistsError
from runtime.effects import Effect, Pipe, Reply
from runtime.messages import Requester
from runtime.storage.config import LogConfig
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.log import Log
from runtime.storage.log_manager import LogManager
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.testkit import BehaviorTestKit

TP = TopicPartition("t", 0)
CONTROLLER_EPOCH = 1


def records(count: int, *, epoch: int = -1, base_offset: int = 0, prefix: bytes = b"r") -> bytes:
    """One batch of ``count`` records (offsets ``base_offset..``), stamped with ``epoch``."""
    return build_batch(
        [SimpleRecord(value=prefix + str(base_offset + i).encode()) for i in range(count)],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


class PartitionDriver:
    """A PartitionActor on broker ``broker_id`` with its log, ZooKeeper and clock."""

    def __init__(
        self,
        *,
        broker_id: int = 0,
        tp: TopicPartition = TP,
        replica_lag_time_max_ms: int = 10_000,
        min_insync_replicas: int = 1,
        clock: ManualClock | None = None,
        zookeeper: MemoryZooKeeper | None = None,
    ) -> None:
        self.tp = tp
        self.broker_id = broker_id
        self.clock = clock if clock is not None else ManualClock()
        self.fs = MemoryFileSystem(self.clock.wall_clock_ms)
        self.log_manager = LogManager.open(
            self.fs, "/data", now_ms=self.clock.now_ms(), rng=random.Random(broker_id)
        )
        self.zookeeper = zookeeper if zookeeper is not None else MemoryZooKeeper()
        self.coordinator = MemoryCoordinator(self.zookeeper)
        self.broker = broker_ref(broker_id)
        self.policy = TopicPolicy(min_insync_replicas=min_insync_replicas)
        self.config = BrokerConfig(
            broker_id=broker_id,
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            min_insync_replicas=min_insync_replicas,
        )
        self.actor = PartitionActor(
            tp=tp,
            config=self.config,
            log_manager=self.log_manager,
            coordinator=self.coordinator,
            broker=self.broker,
        )
        self.kit: BehaviorTestKit[Any] = BehaviorTestKit(
            self.actor, name=partition_name(tp), node_id=str(broker_id), clock=self.clock
        )
        self.hold_pipes = False
        self.held_pipes: list[Pipe] = []
        self.effects: list[Effect] = []

    async def start(self) -> PartitionDriver:
        await self.coordinator.start()
        await self.coordinator.ensure_path(zk_data.topic_partition_path(self.tp.topic, self.tp.partition))
        return self

    # ------------------------------------------------------------------------------ the disk

    @property
    def log(self) -> Log:
        log = self.log_manager.get_or_create_log(self.tp, LogConfig(), now_ms=self.clock.now_ms())
        return log

    def seed_log(self, count: int, *, epoch: int = 0) -> None:
        """Records already on disk before the scenario starts (Kafka's ``seedLogData``)."""
        self.log.append_as_leader(records(count), epoch, now_ms=self.clock.now_ms(), wall_clock_ms=0)

    @property
    def state(self) -> Any:
        return self.actor.state

    # ---------------------------------------------------------------------------- ZooKeeper

    async def controller_writes_state(self, *, leader: int, leader_epoch: int, isr: tuple[int, ...]) -> int:
        """What a controller does before LeaderAndIsr: write the partition state znode. Returns
        the znode's new version (the zkVersion the LeaderAndIsr carries)."""
        path = zk_data.partition_state_path(self.tp.topic, self.tp.partition)
        data = zk_data.encode_partition_state(
            zk_data.PartitionState(
                leader=leader, leader_epoch=leader_epoch, isr=isr, controller_epoch=CONTROLLER_EPOCH
            )
        )
        try:
            return (await self.coordinator.create(path, data)).stat.version
        except NodeExistsError:
            return (await self.coordinator.set(path, data, version=-1)).version

    async def zk_state(self) -> tuple[zk_data.PartitionState, int]:
        path = zk_data.partition_state_path(self.tp.topic, self.tp.partition)
        data, stat = await self.coordinator.get(path)
        return zk_data.decode_partition_state(data, path=path), stat.version

    # ------------------------------------------------------------------------------ driving

    async def _settle(self, effects: list[Effect]) -> list[Effect]:
        """Run the pipes the effects started (unless held), feeding their outcomes back."""
        done: list[Effect] = []
        queue = list(effects)
        while queue:
            effect = queue.pop(0)
            done.append(effect)
            if not isinstance(effect, Pipe):
                continue
            if self.hold_pipes:
                self.held_pipes.append(effect)
                continue
            queue.extend(await self._run_pipe(effect))
        self.effects.extend(done)
        return done

    async def _run_pipe(self, pipe: Pipe) -> list[Effect]:
        try:
            result = await pipe.operation()
        except Exception as error:  # noqa: BLE001 - the actor decides what a failure means
            return self.kit.fail_pipe(pipe, error)
        return self.kit.complete_pipe(pipe, result)

    async def release_pipes(self) -> list[Effect]:
        """Run the pipes held so far (the in-flight ISR write lands now)."""
        held, self.held_pipes = self.held_pipes, []
        effects: list[Effect] = []
        for pipe in held:
            effects.extend(await self._settle(await self._run_pipe(pipe)))
        return effects

    async def tell(self, message: Any) -> list[Effect]:
        return await self._settle(self.kit.tell(message))

    async def ask(self, message: Any) -> tuple[Requester, list[Effect]]:
        requester, effects = self.kit.ask(message)
        return requester, await self._settle(effects)

    async def ask_reply(self, message: Any) -> Any:
        requester, effects = await self.ask(message)
        return reply_to(requester, effects)

    async def advance(self, delta_ms: int) -> list[Effect]:
        return await self._settle(self.kit.advance(delta_ms))

    # ---------------------------------------------------------------------- role changes

    def partition_state(
        self,
        *,
        leader: int,
        leader_epoch: int,
        isr: tuple[int, ...],
        replicas: tuple[int, ...],
        zk_version: int = 0,
    ) -> LeaderAndIsrPartitionState:
        return LeaderAndIsrPartitionState(
            topic=self.tp.topic,
            partition=self.tp.partition,
            controller_epoch=CONTROLLER_EPOCH,
            leader=leader,
            leader_epoch=leader_epoch,
            isr=isr,
            zk_version=zk_version,
            replicas=replicas,
        )

    async def become_leader(
        self,
        *,
        leader_epoch: int,
        isr: tuple[int, ...],
        replicas: tuple[int, ...],
        zk_version: int | None = None,
    ) -> list[Effect]:
        """The controller writes the znode and sends LeaderAndIsr naming this broker leader."""
        if zk_version is None:
            zk_version = await self.controller_writes_state(
                leader=self.broker_id, leader_epoch=leader_epoch, isr=isr
            )
        state = self.partition_state(
            leader=self.broker_id,
            leader_epoch=leader_epoch,
            isr=isr,
            replicas=replicas,
            zk_version=zk_version,
        )
        return await self.tell(BecomeLeader(state, self.policy, LogConfig()))

    async def become_follower(
        self, *, leader: int, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...]
    ) -> list[Effect]:
        zk_version = await self.controller_writes_state(leader=leader, leader_epoch=leader_epoch, isr=isr)
        state = self.partition_state(
            leader=leader, leader_epoch=leader_epoch, isr=isr, replicas=replicas, zk_version=zk_version
        )
        return await self.tell(BecomeFollower(state, self.policy, LogConfig()))

    # ---------------------------------------------------------------------------- requests

    async def produce(
        self, data: bytes, *, acks: int = 1, timeout_ms: int = 30_000
    ) -> tuple[Requester, list[Effect]]:
        return await self.ask(AppendRecords(data, acks, timeout_ms))

    async def produce_reply(self, data: bytes, *, acks: int = 1) -> PartitionAppendResult:
        reply = await self.ask_reply(AppendRecords(data, acks, 30_000))
        assert isinstance(reply, PartitionAppendResult)
        return reply

    async def follower_fetch(
        self, replica_id: int, fetch_offset: int, *, log_start_offset: int = 0, current_leader_epoch: int = -1
    ) -> PartitionReadResult:
        reply = await self.ask_reply(
            ReadRecords(
                replica_id=replica_id,
                fetch_offset=fetch_offset,
                follower_log_start_offset=log_start_offset,
                max_bytes=1 << 20,
                current_leader_epoch=current_leader_epoch,
                min_one_message=True,
                update_follower_state=True,
            )
        )
        assert isinstance(reply, PartitionReadResult)
        return reply

    async def consumer_fetch(
        self, fetch_offset: int, *, current_leader_epoch: int = -1
    ) -> PartitionReadResult:
        reply = await self.ask_reply(
            ReadRecords(
                replica_id=-1,
                fetch_offset=fetch_offset,
                follower_log_start_offset=-1,
                max_bytes=1 << 20,
                current_leader_epoch=current_leader_epoch,
                min_one_message=True,
                update_follower_state=True,
            )
        )
        assert isinstance(reply, PartitionReadResult)
        return reply

    async def offsets_for_leader_epoch(
        self, leader_epoch: int, *, current_leader_epoch: int = -1, replica_id: int = 1
    ) -> OffsetForLeaderEpochResult:
        reply = await self.ask_reply(LastOffsetForLeaderEpoch(replica_id, current_leader_epoch, leader_epoch))
        assert isinstance(reply, OffsetForLeaderEpochResult)
        return reply

    async def append_as_follower(
        self, data: bytes, *, leader_high_watermark: int = 0
    ) -> FollowerAppendResult:
        reply = await self.ask_reply(
            AppendAsFollower(self.state.leader_epoch, self.log.log_end_offset, data, leader_high_watermark, 0)
        )
        assert isinstance(reply, FollowerAppendResult)
        return reply

    async def maybe_shrink_isr(self) -> list[Effect]:
        return await self.tell(MaybeShrinkIsr())

    def statistics(self) -> Any:
        return self.actor.statistics()


def reply_to(requester: Requester, effects: list[Effect]) -> Any:
    """The one reply the actor sent ``requester`` among ``effects``."""
    replies = [e.message for e in effects if isinstance(e, Reply) and e.requester == requester]
    assert len(replies) == 1, f"expected one reply, got {replies!r}"
    return replies[0]


def replies_to(requester: Requester, effects: list[Effect]) -> list[Any]:
    return [e.message for e in effects if isinstance(e, Reply) and e.requester == requester]


def error_of(result: Any) -> ErrorCode:
    response = getattr(result, "response", result)
    error = response.error_code
    assert isinstance(error, ErrorCode)
    return error
