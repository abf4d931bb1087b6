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
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from actors import zk_data
from actors.protocol import BrokerEndpoint, MetadataRequest, MetadataResponse
from actors.types import TopicPartition, broker_node
from ops.wiring import wire_codec
from runtime.coordination import NoNodeError, WatchEvent
from runtime.coordination.zk import ZkCoordinator
from runtime.ref import ActorRef
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
        return ActorRef(node_id=broker_node(self.broker_id), name="broker")

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
        registered = asyncio.get_running_loop().create_future()
        path = zk_data.broker_id_path(broker_id)

        def on_event(event: WatchEvent) -> None:
            if not registered.done():
                registered.set_result(None)

        output = broker.output_path.open("ab")
        try:
            broker.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "ops", "broker", "start", "--config", str(broker.config_path),
                "--log-format", "console", cwd=ROOT, stdout=output, stderr=output,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )  # fmt: skip
        finally:
            output.close()
        if await self.admin.exists(path, watch=on_event) is None:
            exited = asyncio.ensure_future(broker.process.wait())
            done, _ = await asyncio.wait(
                {registered, exited}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
            exited.cancel()
            if registered not in done:
                raise AssertionError(
                    f"broker {broker_id} did not register: see {broker.output_path}\n{self.output(broker_id)}"
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
        """What an admin client does in ZooKeeper mode: write the assignment (and config); the
        controller's topic watch does the rest."""
        if config:
            await self.admin.ensure_path(zk_data.CONFIG_TOPICS_PATH)
            await self.admin.create(zk_data.topic_config_path(topic), zk_data.encode_topic_config(config))
        await self.admin.create(
            zk_data.topic_path(topic),
            zk_data.encode_topic_assignment(
                zk_data.TopicAssignment(partitions={p: tuple(r) for p, r in assignment.items()})
            ),
        )

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

        async def wait() -> bytes | None:
            while True:
                changed = asyncio.get_running_loop().create_future()

                def on_event(event: WatchEvent, changed: asyncio.Future[None] = changed) -> None:
                    if not changed.done():
                        changed.set_result(None)

                if await self.admin.exists(path, watch=on_event) is None:
                    data: bytes | None = None
                else:
                    try:
                        data, _ = await self.admin.get(path, watch=on_event)
                    except NoNodeError:
                        data = None
                if predicate(data):
                    return data
                await changed

        return await asyncio.wait_for(wait(), timeout=timeout_s)

    async def wait_for_partition_state(
        self, tp: TopicPartition, predicate: Callable[[zk_data.PartitionState], bool], *, timeout_s: float
    ) -> zk_data.PartitionState:
        path = zk_data.partition_state_path(tp.topic, tp.partition)

        def matches(data: bytes | None) -> bool:
            return data is not None and predicate(zk_data.decode_partition_state(data, path=path))

        data = await self.wait_for_znode(path, matches, timeout_s=timeout_s)
        assert data is not None
        return zk_data.decode_partition_state(data, path=path)

    async def metadata(self, broker_id: int, topics: tuple[str, ...] | None = None) -> MetadataResponse:
        response = await self.client.ask(
            self.brokers[broker_id].ref, MetadataRequest(topics=topics), timeout_ms=10_000
        )
        assert isinstance(response, MetadataResponse)
        return response

    async def zk_partition_state(self, tp: TopicPartition) -> tuple[zk_data.PartitionState, int]:
        path = zk_data.partition_state_path(tp.topic, tp.partition)
        data, stat = await self.admin.get(path)
        return zk_data.decode_partition_state(data, path=path), stat.version
