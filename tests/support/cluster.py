"""An in-process cluster on virtual time: N broker nodes built by ``ops.wiring`` on memory adapters.

Brokers share one ManualClock, one Activity (so ``advance`` waits for the whole cluster to settle),
one MemoryNetwork (every message round-trips through the real codec), and one in-memory ZooKeeper;
each has its own MemoryFileSystem and ZooKeeper session. A client node (``client``) sends requests
to brokers, and until the controller exists ``make_leader`` plays its part: it writes the partition
state znode and sends LeaderAndIsr and UpdateMetadata, exactly what a controller would send.

Faults: ``stop_broker`` is a clean shutdown (the clean-shutdown marker is written);
``crash_broker`` is a power loss (``MemoryFileSystem.crash()``: whatever was not fsynced is gone,
no marker, so the next start recovers); ``network.partition``/``isolate`` cut links; and
``network.drop_replies_when`` loses the replies a predicate picks (a response lost on the way back,
after the broker acted on the request).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from actors.common.names import BROKER_ACTOR_NAME, broker_ref, partition_name
from actors.common.protocol import (
    BrokerEndpoint,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    OffsetForLeaderEpochPartition,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.broker import BrokerActor
from actors.server.config import BrokerConfig
from ops.codec import wire_codec
from ops.wiring import BrokerNode, NodeAdapters, broker_node_context
from runtime.activity import Activity
from runtime.clock import ManualClock
from runtime.coordination import MemoryCoordinator, MemoryZooKeeper, NodeExistsError
from runtime.errors import PeerUnavailableError
from runtime.ref import ActorRef
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import iterate_batches
from runtime.system import ActorSystem
from runtime.transport.addresses import AddressBook
from runtime.transport.memory import MemoryNetwork, MemoryTransport

CONTROLLER_ID = 1000
T = TypeVar("T")


def batch(*values: bytes, key: bytes | None = None) -> bytes:
    return build_batch([SimpleRecord(value=value, key=key) for value in values])


def values_of(records: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every complete batch's records."""
    return [
        (record.offset, record.value) for batch_ in iterate_batches(records) for record in batch_.records()
    ]


class FaultyNetwork(MemoryNetwork):
    """The memory network, plus lost replies: a reply ``drop_replies_when`` picks never arrives
    (the asker sees the peer as unavailable), though the request was handled; and a misbehaving
    peer: ``rewrite_replies`` may replace a reply on its way back."""

    def __init__(self, *, codec: Any, activity: Activity) -> None:
        super().__init__(codec=codec, activity=activity)
        self.drop_replies_when: Callable[[object], bool] | None = None
        self.dropped_replies: list[object] = []
        self.rewrite_replies: Callable[[object], object] | None = None

    def transfer_reply(self, reply: object) -> object:
        if self.drop_replies_when is not None and self.drop_replies_when(reply):
            self.dropped_replies.append(reply)
            raise PeerUnavailableError("?", "reply lost in the network")
        if self.rewrite_replies is not None:
            reply = self.rewrite_replies(reply)
        return super().transfer_reply(reply)


@dataclass
class BrokerHandle:
    broker_id: int
    fs: MemoryFileSystem
    coordinator: MemoryCoordinator
    node: BrokerNode | None = None
    stack: contextlib.AsyncExitStack | None = None

    @property
    def ref(self) -> ActorRef:
        return broker_ref(self.broker_id)


@dataclass
class InProcessCluster:
    config_overrides: dict[str, Any] = field(default_factory=dict)
    clock: ManualClock = field(default_factory=ManualClock)
    activity: Activity = field(default_factory=Activity)
    zookeeper: MemoryZooKeeper = field(default_factory=MemoryZooKeeper)
    brokers: dict[int, BrokerHandle] = field(default_factory=dict)
    controller_epoch: int = 1

    def __post_init__(self) -> None:
        self.network = FaultyNetwork(codec=wire_codec(), activity=self.activity)
        self.client = ActorSystem(
            "client", clock=self.clock, transport=MemoryTransport(self.network), activity=self.activity
        )
        self._stack = contextlib.AsyncExitStack()
        # The stand-in controller's own ZooKeeper session (brokers come and go).
        self.admin = MemoryCoordinator(self.zookeeper, session_timeout_ms=6_000)
        # (tp) -> (leader epoch, zk version, replicas) as the stand-in controller last decided.
        self.partition_states: dict[TopicPartition, LeaderAndIsrPartitionState] = {}

    def config(self, broker_id: int) -> BrokerConfig:
        settings: dict[str, Any] = {
            "broker_id": broker_id,
            "replica_lag_time_max_ms": 10_000,
            "replica_fetch_wait_max_ms": 500,
            "replica_fetch_backoff_ms": 1_000,
            "min_insync_replicas": 2,
        }
        settings.update(self.config_overrides)
        return BrokerConfig(**settings)

    async def __aenter__(self) -> InProcessCluster:
        await self._stack.enter_async_context(self.client)
        await self.admin.start()
        self._stack.push_async_callback(self.admin.close)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for broker_id in list(self.brokers):
            await self.stop_broker(broker_id)
        await self._stack.aclose()

    # ------------------------------------------------------------------------------ brokers

    async def start_broker(self, broker_id: int, *, keep_disk: bool = True) -> BrokerHandle:
        handle = self.brokers.get(broker_id)
        if handle is None or not keep_disk:
            handle = BrokerHandle(
                broker_id,
                MemoryFileSystem(self.clock.wall_clock_ms),
                MemoryCoordinator(self.zookeeper, session_timeout_ms=6_000),
            )
            self.brokers[broker_id] = handle
        else:
            handle.coordinator = MemoryCoordinator(self.zookeeper, session_timeout_ms=6_000)
        adapters = NodeAdapters(
            clock=self.clock,
            fs=handle.fs,
            coordinator=handle.coordinator,
            transport=MemoryTransport(self.network),
            address_book=AddressBook(),
            rng=random.Random(broker_id),
            activity=self.activity,
        )
        stack = contextlib.AsyncExitStack()
        handle.node = await stack.enter_async_context(
            broker_node_context(
                self.config(broker_id),
                adapters=adapters,
                log_dir="/data",
                host=f"broker-{broker_id}",
                port=9092,
            )
        )
        handle.stack = stack
        await self.settle()
        return handle

    async def stop_broker(self, broker_id: int) -> None:
        """A clean stop: actors stop, logs close with the clean-shutdown marker, session closes."""
        handle = self.brokers[broker_id]
        if handle.stack is not None:
            await handle.stack.aclose()
        handle.stack = None
        handle.node = None
        await self.settle()

    async def crash_broker(self, broker_id: int) -> None:
        """A power loss: the disk keeps only what was fsynced, the broker's files become unusable,
        its actors stop, no clean-shutdown marker is written (the next start recovers the logs),
        and its ZooKeeper session ends (as it would when the session times out)."""
        handle = self.brokers[broker_id]
        await self.settle()
        handle.fs.crash()
        if handle.stack is not None:
            # Closing the logs fails on the dead files: that is the point.
            with contextlib.suppress(OSError):
                await handle.stack.aclose()
        await handle.coordinator.close()
        handle.stack = None
        handle.node = None
        await self.settle()

    def live_endpoints(self) -> tuple[BrokerEndpoint, ...]:
        return tuple(
            BrokerEndpoint(broker_id=b, host=f"broker-{b}", port=9092)
            for b, handle in sorted(self.brokers.items())
            if handle.node is not None
        )

    # ------------------------------------------------------------------------------ time

    async def settle(self) -> None:
        """Wait until the whole cluster is quiet (answers in flight between nodes count as
        activity until the asker has them, so one wait is enough)."""
        await self.activity.wait_idle()

    async def advance(self, delta_ms: int) -> None:
        """Move virtual time forward one due timer at a time, settling after each (as
        ``runtime.testkit.advance`` does, with this class's ``settle``)."""
        target = self.clock.now_ms() + delta_ms
        await self.settle()
        while True:
            due = self.clock.next_due_ms()
            if due is None or due > target:
                break
            self.clock.advance_to(due)
            await self.settle()
        self.clock.advance_to(target)
        await self.settle()

    async def complete(self, awaitable: Awaitable[T], *, within_ms: int = 60_000, step_ms: int = 100) -> T:
        """Run ``awaitable`` while virtual time moves forward ``step_ms`` at a time; fail if it
        needs more than ``within_ms``."""
        task = asyncio.ensure_future(awaitable)
        waited = 0
        await self.settle()
        while not task.done() and waited < within_ms:
            await self.advance(step_ms)
            waited += step_ms
        if not task.done():
            task.cancel()
            raise AssertionError(f"not complete after {within_ms} ms of virtual time")
        return task.result()

    # ------------------------------------------------------------------ stand-in controller

    async def make_leader(
        self,
        tp: TopicPartition,
        *,
        leader: int,
        isr: Sequence[int],
        replicas: Sequence[int],
        leader_epoch: int | None = None,
        recipients: Sequence[int] | None = None,
    ) -> dict[int, LeaderAndIsrResponse]:
        """Write the partition state znode and send LeaderAndIsr to the live replicas."""
        previous = self.partition_states.get(tp)
        epoch = leader_epoch if leader_epoch is not None else (previous.leader_epoch + 1 if previous else 0)
        admin = self.admin
        path = zk_data.partition_state_path(tp.topic, tp.partition)
        data = zk_data.encode_partition_state(
            zk_data.PartitionState(
                leader=leader, leader_epoch=epoch, isr=tuple(isr), controller_epoch=self.controller_epoch
            )
        )
        await admin.ensure_path(zk_data.topic_partition_path(tp.topic, tp.partition))
        try:
            created = await admin.create(path, data)
            zk_version = created.stat.version
        except NodeExistsError:
            zk_version = (await admin.set(path, data, version=-1)).version
        state = LeaderAndIsrPartitionState(
            topic=tp.topic,
            partition=tp.partition,
            controller_epoch=self.controller_epoch,
            leader=leader,
            leader_epoch=epoch,
            isr=tuple(isr),
            zk_version=zk_version,
            replicas=tuple(replicas),
            is_new=previous is None,
        )
        self.partition_states[tp] = state
        await self.update_metadata()
        endpoints = self.live_endpoints()
        responses: dict[int, LeaderAndIsrResponse] = {}
        for broker_id in recipients if recipients is not None else replicas:
            handle = self.brokers.get(broker_id)
            if handle is None or handle.node is None:
                continue
            responses[broker_id] = await self.client.ask(
                handle.ref,
                LeaderAndIsrRequest(
                    controller_id=CONTROLLER_ID,
                    controller_epoch=self.controller_epoch,
                    broker_epoch=-1,
                    partition_states=(state,),
                    live_leaders=tuple(e for e in endpoints if e.broker_id == leader),
                ),
                timeout_ms=30_000,
            )
        await self.settle()
        return responses

    async def send_current_state(self, tp: TopicPartition, recipients: Sequence[int]) -> None:
        """What the controller does for a broker that starts (onBrokerStartup, docs/controller.md §3): send it
        the partition's current state, as ZooKeeper holds it, without bumping the leader epoch."""
        zk_state, zk_version = await self.zk_partition_state(tp)
        previous = self.partition_states[tp]
        state = LeaderAndIsrPartitionState(
            topic=tp.topic, partition=tp.partition, controller_epoch=zk_state.controller_epoch,
            leader=zk_state.leader, leader_epoch=zk_state.leader_epoch, isr=zk_state.isr,
            zk_version=zk_version, replicas=previous.replicas,
        )  # fmt: skip
        self.partition_states[tp] = state
        await self.update_metadata()
        endpoints = self.live_endpoints()
        for broker_id in recipients:
            await self.client.ask(
                self.brokers[broker_id].ref,
                LeaderAndIsrRequest(
                    controller_id=CONTROLLER_ID, controller_epoch=self.controller_epoch, broker_epoch=-1,
                    partition_states=(state,),
                    live_leaders=tuple(e for e in endpoints if e.broker_id == state.leader),
                ),
                timeout_ms=30_000,
            )  # fmt: skip
        await self.settle()

    async def update_metadata(self) -> None:
        states = tuple(
            UpdateMetadataPartitionState(
                topic=s.topic,
                partition=s.partition,
                controller_epoch=s.controller_epoch,
                leader=s.leader,
                leader_epoch=s.leader_epoch,
                isr=s.isr,
                zk_version=s.zk_version,
                replicas=s.replicas,
            )
            for s in self.partition_states.values()
        )
        endpoints = self.live_endpoints()
        for endpoint in endpoints:
            await self.client.ask(
                self.brokers[endpoint.broker_id].ref,
                UpdateMetadataRequest(
                    controller_id=CONTROLLER_ID,
                    controller_epoch=self.controller_epoch,
                    broker_epoch=-1,
                    partition_states=states,
                    live_brokers=endpoints,
                ),
                timeout_ms=30_000,
            )

    async def stop_replica(
        self, broker_id: int, tps: Sequence[TopicPartition], *, delete: bool = False
    ) -> None:
        await self.client.ask(
            self.brokers[broker_id].ref,
            StopReplicaRequest(
                controller_id=CONTROLLER_ID,
                controller_epoch=self.controller_epoch,
                broker_epoch=-1,
                delete_partitions=delete,
                partitions=tuple(tps),
            ),
            timeout_ms=30_000,
        )
        await self.settle()

    # ------------------------------------------------------------------------------ clients

    def produce_request(
        self, tp: TopicPartition, records: bytes, *, acks: int = -1, timeout_ms: int = 30_000
    ) -> ProduceRequest:
        return ProduceRequest(
            acks=acks,
            timeout_ms=timeout_ms,
            partitions=(ProducePartitionData(topic=tp.topic, partition=tp.partition, records=records),),
        )

    async def produce(
        self, broker_id: int, tp: TopicPartition, records: bytes, *, acks: int = -1, timeout_ms: int = 30_000
    ) -> ProduceResponse:
        response = await self.client.ask(
            self.brokers[broker_id].ref,
            self.produce_request(tp, records, acks=acks, timeout_ms=timeout_ms),
            timeout_ms=timeout_ms + 60_000,
        )
        assert isinstance(response, ProduceResponse)
        return response

    async def fetch(
        self, broker_id: int, tp: TopicPartition, offset: int, *, max_wait_ms: int = 0, leader_epoch: int = -1
    ) -> FetchResponse:
        response = await self.client.ask(
            self.brokers[broker_id].ref,
            FetchRequest(
                replica_id=-1,
                max_wait_ms=max_wait_ms,
                min_bytes=1,
                max_bytes=10 << 20,
                partitions=(
                    FetchPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        fetch_offset=offset,
                        partition_max_bytes=1 << 20,
                        current_leader_epoch=leader_epoch,
                    ),
                ),
            ),
            timeout_ms=max_wait_ms + 30_000,
        )
        assert isinstance(response, FetchResponse)
        return response

    async def follower_fetch(
        self,
        broker_id: int,
        tp: TopicPartition,
        offset: int,
        *,
        replica_id: int,
        leader_epoch: int = -1,
        log_start_offset: int = 0,
    ) -> FetchResponse:
        """A fetch as follower ``replica_id`` would send it (a test playing a follower by hand)."""
        response = await self.client.ask(
            self.brokers[broker_id].ref,
            FetchRequest(
                replica_id=replica_id,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=10 << 20,
                partitions=(
                    FetchPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        fetch_offset=offset,
                        partition_max_bytes=1 << 20,
                        log_start_offset=log_start_offset,
                        current_leader_epoch=leader_epoch,
                    ),
                ),
            ),
            timeout_ms=30_000,
        )
        assert isinstance(response, FetchResponse)
        return response

    async def offsets_for_leader_epoch(
        self, broker_id: int, tp: TopicPartition, leader_epoch: int, *, current_leader_epoch: int = -1
    ) -> OffsetsForLeaderEpochResponse:
        response = await self.client.ask(
            self.brokers[broker_id].ref,
            OffsetsForLeaderEpochRequest(
                replica_id=-1,
                partitions=(
                    OffsetForLeaderEpochPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        current_leader_epoch=current_leader_epoch,
                        leader_epoch=leader_epoch,
                    ),
                ),
            ),
            timeout_ms=30_000,
        )
        assert isinstance(response, OffsetsForLeaderEpochResponse)
        return response

    async def send_leader_and_isr(
        self,
        broker_id: int,
        *states: LeaderAndIsrPartitionState,
        controller_epoch: int | None = None,
    ) -> LeaderAndIsrResponse:
        """A raw LeaderAndIsr (no znode write): what a controller, maybe a stale one, sends."""
        leaders = {state.leader for state in states}
        response = await self.client.ask(
            self.brokers[broker_id].ref,
            LeaderAndIsrRequest(
                controller_id=CONTROLLER_ID,
                controller_epoch=self.controller_epoch if controller_epoch is None else controller_epoch,
                broker_epoch=-1,
                partition_states=states,
                live_leaders=tuple(e for e in self.live_endpoints() if e.broker_id in leaders),
            ),
            timeout_ms=30_000,
        )
        assert isinstance(response, LeaderAndIsrResponse)
        await self.settle()
        return response

    # ------------------------------------------------------------------------------ peeking

    def broker(self, broker_id: int) -> BrokerActor:
        """The live BrokerActor instance (its statistics)."""
        node = self.brokers[broker_id].node
        assert node is not None
        for ref, actor in node.system.actor_instances():
            if ref.name == BROKER_ACTOR_NAME:
                assert isinstance(actor, BrokerActor)
                return actor
        raise KeyError(f"broker {broker_id} has no broker actor")

    async def isr_change_notifications(self) -> list[tuple[str, bytes]]:
        """Every ``/isr_change_notification/isr_change_NNNNNNNNNN`` znode: (name, raw data)."""
        found: list[tuple[str, bytes]] = []
        for name in sorted(await self.admin.get_children(zk_data.ISR_CHANGE_NOTIFICATION_PATH)):
            data, _ = await self.admin.get(f"{zk_data.ISR_CHANGE_NOTIFICATION_PATH}/{name}")
            found.append((name, data))
        return found

    def partition(self, broker_id: int, tp: TopicPartition) -> Any:
        """The live PartitionActor instance (white-box checks)."""
        node = self.brokers[broker_id].node
        assert node is not None
        for ref, actor in node.system.actor_instances():
            if ref.name == partition_name(tp):
                return actor
        raise KeyError(f"broker {broker_id} hosts no {tp}")

    def log(self, broker_id: int, tp: TopicPartition) -> Any:
        node = self.brokers[broker_id].node
        assert node is not None
        log = node.log_manager.get_log(tp)
        assert log is not None
        return log

    async def zk_partition_state(self, tp: TopicPartition) -> tuple[zk_data.PartitionState, int]:
        path = zk_data.partition_state_path(tp.topic, tp.partition)
        data, stat = await self.admin.get(path)
        return zk_data.decode_partition_state(data, path=path), stat.version
