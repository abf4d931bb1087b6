"""A cluster of real broker processes (``python -m ops broker start``) on a real ZooKeeper.

Brokers listen on free loopback ports with their own log dirs under a temporary directory; their
output goes to ``broker-N.log`` there. Waiting is event-driven: a broker counts as started when its
``/brokers/ids/N`` znode appears (a ZooKeeper exists-watch), and processes are awaited with
``asyncio`` subprocess calls. Every broker runs the real controller; topics are created as an
admin client does in ZooKeeper mode, by writing their assignment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from actors.common.client_protocol import (
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    TopicConfigEntry,
)
from actors.common.errors import ErrorCode
from actors.common.names import ADMIN_ACTOR_NAME, broker_node, broker_ref
from actors.common.protocol import (
    BrokerEndpoint,
    MetadataRequest,
    MetadataResponse,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
)
from actors.common.types import TopicPartition
from actors.server import zk_data
from ops.codec import wire_codec
from ops.local.cluster import launch_broker
from ops.local.zk_waits import read_partition_state, wait_for_partition_state, wait_for_znode
from runtime.coordination.zk import ZkCoordinator
from runtime.ref import ActorRef
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.system import ActorSystem
from runtime.transport.addresses import AddressBook
from runtime.transport.http import HttpTransport

ROOT = Path(__file__).resolve().parents[2]
SECRET = "process-cluster-secret-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    log_dir: Path
    config_path: Path
    output_path: Path
    process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ref(self) -> ActorRef:
        return broker_ref(self.broker_id)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid


@dataclass
class ProcessCluster:
    zk_connect: str
    base_dir: Path
    properties: dict[str, str] = field(default_factory=dict)
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)
    # One broker's own keys, over ``properties`` (its listeners, what it advertises...).
    broker_properties: Callable[[BrokerProcess], dict[str, str]] | None = None

    def __post_init__(self) -> None:
        self.address_book = AddressBook()
        self.client = ActorSystem(
            "client", transport=HttpTransport(wire_codec(), secret=SECRET, resolve=self.address_book.resolve)
        )
        self.admin = ZkCoordinator(self.zk_connect, session_timeout_ms=10_000)

    async def __aenter__(self) -> ProcessCluster:
        await self.client.__aenter__()
        await self.admin.start()
        for path in zk_data.PERSISTENT_ZK_PATHS:
            await self.admin.ensure_path(path)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for broker in self.brokers.values():
            await self.kill(broker.broker_id, signal.SIGKILL if broker.process else signal.SIGTERM)
        await self.admin.close()
        await self.client.__aexit__(None, None, None)

    # ------------------------------------------------------------------------------ brokers

    def _write_config(self, broker: BrokerProcess) -> None:
        properties = {
            "broker.id": str(broker.broker_id),
            "listeners": f"HTTP://127.0.0.1:{broker.port}",
            "log.dirs": str(broker.log_dir),
            "zookeeper.connect": self.zk_connect,
            "internal.auth.secret": SECRET,
            "zookeeper.session.timeout.ms": "6000",
        }
        properties.update(self.properties)
        if self.broker_properties is not None:
            properties.update(self.broker_properties(broker))
        broker.config_path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))

    async def start(self, broker_id: int, *, timeout_s: float = 60) -> BrokerProcess:
        broker = self.brokers.get(broker_id)
        if broker is None:
            broker = BrokerProcess(
                broker_id,
                free_port(),
                self.base_dir / f"broker-{broker_id}" / "logs",
                self.base_dir / f"broker-{broker_id}.properties",
                self.base_dir / f"broker-{broker_id}.log",
            )
            self.brokers[broker_id] = broker
        self._write_config(broker)
        self.address_book.set(broker_node(broker_id), broker.url)
        broker.process = await launch_broker(
            broker_id,
            broker.config_path,
            broker.output_path,
            self.admin,
            timeout_s=timeout_s,
            extra_args=("--log-format", "console"),
        )
        return broker

    def output(self, broker_id: int) -> str:
        return self.brokers[broker_id].output_path.read_text(errors="replace")[-4000:]

    async def kill(
        self, broker_id: int, sig: signal.Signals = signal.SIGKILL, *, timeout_s: float = 30
    ) -> int | None:
        broker = self.brokers[broker_id]
        process = broker.process
        if process is None or process.returncode is not None:
            broker.process = None
            return None if process is None else process.returncode
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGCONT)
            process.send_signal(sig)
        try:
            code = await asyncio.wait_for(process.wait(), timeout=timeout_s)
        except TimeoutError:
            process.kill()
            code = await process.wait()
        broker.process = None
        return code

    def pause(self, broker_id: int) -> None:
        os.kill(self.brokers[broker_id].pid, signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        os.kill(self.brokers[broker_id].pid, signal.SIGCONT)

    def live_endpoints(self) -> tuple[BrokerEndpoint, ...]:
        return tuple(
            BrokerEndpoint(broker_id=b.broker_id, host="127.0.0.1", port=b.port)
            for b in sorted(self.brokers.values(), key=lambda b: b.broker_id)
            if b.process is not None
        )

    # --------------------------------------------------------------------------- admin

    async def create_topic(
        self, topic: str, assignment: dict[int, Sequence[int]], config: dict[str, str] | None = None
    ) -> None:
        """Create the topic through the admin actor of partition 0's preferred leader, which
        answers once its own metadata names a leader for every partition: the controller sends a
        broker its LeaderAndIsr before the UpdateMetadata, so the leader is then serving."""
        leader = assignment[0][0]
        request = CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=topic,
                    assignments=tuple((p, tuple(r)) for p, r in sorted(assignment.items())),
                    configs=tuple(TopicConfigEntry(name=k, value=v) for k, v in (config or {}).items()),
                ),
            ),
            timeout_ms=30_000,
        )
        response = await self.client.ask(
            ActorRef(node_id=broker_node(leader), name=ADMIN_ACTOR_NAME), request, timeout_ms=60_000
        )
        assert isinstance(response, CreateTopicsResponse)
        (result,) = response.topics
        assert result.error_code is ErrorCode.NONE, result

    async def controller(self) -> tuple[int, int]:
        """(active controller broker id, controller epoch) as ZooKeeper says."""
        data, _ = await self.admin.get(zk_data.CONTROLLER_PATH)
        epoch_data, _ = await self.admin.get(zk_data.CONTROLLER_EPOCH_PATH)
        return zk_data.decode_controller(data).broker_id, zk_data.decode_controller_epoch(epoch_data)

    async def wait_for_znode(
        self, path: str, predicate: Callable[[bytes | None], bool], *, timeout_s: float
    ) -> bytes | None:
        """Wait until ``predicate(data)`` holds for ``path`` (None: missing), re-checking at each
        ZooKeeper watch event — no polling."""
        return await wait_for_znode(self.admin, path, predicate, timeout_s=timeout_s)

    async def wait_for_partition_state(
        self, tp: TopicPartition, predicate: Callable[[zk_data.PartitionState], bool], *, timeout_s: float
    ) -> zk_data.PartitionState:
        return await wait_for_partition_state(self.admin, tp, predicate, timeout_s=timeout_s)

    async def metadata(self, broker_id: int, topics: tuple[str, ...] | None = None) -> MetadataResponse:
        response = await self.client.ask(
            self.brokers[broker_id].ref, MetadataRequest(topics=topics), timeout_ms=10_000
        )
        assert isinstance(response, MetadataResponse)
        return response

    async def zk_partition_state(self, tp: TopicPartition) -> tuple[zk_data.PartitionState, int]:
        return await read_partition_state(self.admin, tp)


@dataclass
class ProduceLoop:
    """Writes one acks=all record at a time to a partition's leader and keeps what was acknowledged
    (value → loop time of the acknowledgement).

    The batches carry no producer id (no idempotence), so a value whose attempt failed without an
    answer (the leader killed after its followers copied the batch) may be in the log once per
    attempt: at-least-once, as Kafka's non-idempotent producer. ``attempts`` counts them so a test
    can tell such a retry from a replication duplicate.

    The leader comes from the partition state znode; after a failure the loop waits on a ZooKeeper
    watch for a higher leader epoch (the controller's decision). The one retry without an event is
    when the new leader has not applied its LeaderAndIsr yet (a few milliseconds): bounded.
    """

    cluster: ProcessCluster
    tp: TopicPartition
    acknowledged: dict[bytes, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    attempts: dict[bytes, int] = field(default_factory=dict)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _progress: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _not_yet_leader_budget: int = 500

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def wait_for_acks(self, count: int, *, timeout_s: float) -> None:
        """Wait until ``count`` records have been acknowledged (an event per acknowledgement)."""

        async def wait() -> None:
            while len(self.acknowledged) < count:
                if self._task is not None and self._task.done():
                    self._task.result()
                    raise AssertionError("the produce loop stopped")
                self._progress.clear()
                await self._progress.wait()

        await asyncio.wait_for(wait(), timeout=timeout_s)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _leadership(self, above_epoch: int) -> zk_data.PartitionState | None:
        """The partition state once its leader epoch exceeds ``above_epoch`` with a leader; None
        if the loop is stopped first."""
        waiting = asyncio.ensure_future(
            self.cluster.wait_for_partition_state(
                self.tp, lambda s: s.leader_epoch > above_epoch and s.leader >= 0, timeout_s=60
            )
        )
        stopping = asyncio.ensure_future(self._stop.wait())
        done, _ = await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        for task in (waiting, stopping):
            if task not in done:
                task.cancel()
        return waiting.result() if waiting in done else None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        number = 0
        state = await self._leadership(-1)
        retries_at_this_epoch = 0
        while state is not None and not self._stop.is_set():
            value = f"record-{number}".encode()
            request = ProduceRequest(
                acks=-1,
                timeout_ms=5_000,
                partitions=(
                    ProducePartitionData(
                        topic=self.tp.topic,
                        partition=self.tp.partition,
                        records=build_batch([SimpleRecord(value)]),
                    ),
                ),
            )
            broker = self.cluster.brokers[state.leader]
            error: str | None = None
            self.attempts[value] = self.attempts.get(value, 0) + 1
            try:
                response = await self.cluster.client.ask(broker.ref, request, timeout_ms=10_000)
            except Exception as failure:  # noqa: BLE001 - the broker may be killed mid-request
                error = f"{type(failure).__name__}: {failure}"
            else:
                assert isinstance(response, ProduceResponse)
                result = response.partitions[0]
                if result.error_code is ErrorCode.NONE:
                    self.acknowledged[value] = loop.time()
                    self._progress.set()
                    number += 1
                    retries_at_this_epoch = 0
                    continue
                error = result.error_code.name
                # The partition state znode is written before the LeaderAndIsr is sent: until the
                # named leader has applied it, it answers as a follower or as a stranger.
                if result.error_code in (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ):
                    retries_at_this_epoch += 1
                    if retries_at_this_epoch < self._not_yet_leader_budget:
                        current, _ = await self.cluster.zk_partition_state(self.tp)
                        if current.leader_epoch == state.leader_epoch:
                            continue  # the leader ZooKeeper names has not applied LeaderAndIsr yet
            self.errors.append(error)
            retries_at_this_epoch = 0
            state = await self._leadership(state.leader_epoch)
