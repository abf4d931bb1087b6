"""A cluster of real broker processes (``python -m ops broker start``) on a real ZooKeeper.

Brokers listen on free loopback ports with their own log dirs under a temporary directory; their
output goes to ``broker-N.log`` there. Waiting is event-driven: a broker counts as started when its
``/brokers/ids/N`` znode appears (a ZooKeeper exists-watch), and processes are awaited with
``asyncio`` subprocess calls. ``make_leader`` plays the controller over HTTP, as in the in-process
harness.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from actors import zk_data
from actors.protocol import (
    BrokerEndpoint,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from actors.types import TopicPartition, broker_node
from ops.wiring import wire_codec
from runtime.coordination import NodeExistsError, WatchEvent
from runtime.coordination.zk import ZkCoordinator
from runtime.ref import ActorRef
from runtime.system import ActorSystem
from runtime.transport.addresses import AddressBook
from runtime.transport.http import HttpTransport

ROOT = Path(__file__).resolve().parents[2]
SECRET = "process-cluster-secret-0123456789"
CONTROLLER_ID = 1000


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
    controller_epoch: int = 1

    def __post_init__(self) -> None:
        self.address_book = AddressBook()
        self.client = ActorSystem(
            "client", transport=HttpTransport(wire_codec(), secret=SECRET, resolve=self.address_book.resolve)
        )
        self.admin = ZkCoordinator(self.zk_connect, session_timeout_ms=10_000)
        self.partition_states: dict[TopicPartition, LeaderAndIsrPartitionState] = {}

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

    # ------------------------------------------------------------------ stand-in controller

    async def make_leader(
        self, tp: TopicPartition, *, leader: int, isr: Sequence[int], replicas: Sequence[int]
    ) -> dict[int, LeaderAndIsrResponse]:
        previous = self.partition_states.get(tp)
        epoch = previous.leader_epoch + 1 if previous else 0
        path = zk_data.partition_state_path(tp.topic, tp.partition)
        data = zk_data.encode_partition_state(
            zk_data.PartitionState(
                leader=leader, leader_epoch=epoch, isr=tuple(isr), controller_epoch=self.controller_epoch
            )
        )
        await self.admin.ensure_path(zk_data.topic_partition_path(tp.topic, tp.partition))
        try:
            zk_version = (await self.admin.create(path, data)).stat.version
        except NodeExistsError:
            zk_version = (await self.admin.set(path, data, version=-1)).version
        state = LeaderAndIsrPartitionState(
            topic=tp.topic, partition=tp.partition, controller_epoch=self.controller_epoch, leader=leader,
            leader_epoch=epoch, isr=tuple(isr), zk_version=zk_version, replicas=tuple(replicas),
            is_new=previous is None,
        )  # fmt: skip
        self.partition_states[tp] = state
        await self.update_metadata()
        endpoints = self.live_endpoints()
        responses: dict[int, LeaderAndIsrResponse] = {}
        for broker_id in replicas:
            broker = self.brokers.get(broker_id)
            if broker is None or broker.process is None:
                continue
            responses[broker_id] = await self.client.ask(
                broker.ref,
                LeaderAndIsrRequest(
                    controller_id=CONTROLLER_ID, controller_epoch=self.controller_epoch, broker_epoch=-1,
                    partition_states=(state,),
                    live_leaders=tuple(e for e in endpoints if e.broker_id == leader),
                ),
                timeout_ms=30_000,
            )  # fmt: skip
        return responses

    async def update_metadata(self) -> None:
        states = tuple(
            UpdateMetadataPartitionState(
                topic=s.topic, partition=s.partition, controller_epoch=s.controller_epoch, leader=s.leader,
                leader_epoch=s.leader_epoch, isr=s.isr, zk_version=s.zk_version, replicas=s.replicas,
            )
            for s in self.partition_states.values()
        )  # fmt: skip
        endpoints = self.live_endpoints()
        for endpoint in endpoints:
            await self.client.ask(
                self.brokers[endpoint.broker_id].ref,
                UpdateMetadataRequest(
                    controller_id=CONTROLLER_ID, controller_epoch=self.controller_epoch, broker_epoch=-1,
                    partition_states=states, live_brokers=endpoints,
                ),
                timeout_ms=30_000,
            )  # fmt: skip

    async def zk_partition_state(self, tp: TopicPartition) -> tuple[zk_data.PartitionState, int]:
        path = zk_data.partition_state_path(tp.topic, tp.partition)
        data, stat = await self.admin.get(path)
        return zk_data.decode_partition_state(data, path=path), stat.version

    async def wait_for_state_change(self, tp: TopicPartition, *, timeout_s: float) -> zk_data.PartitionState:
        """Wait (a ZooKeeper data watch, no polling) for the next write to the partition's state znode."""
        changed = asyncio.get_running_loop().create_future()
        path = zk_data.partition_state_path(tp.topic, tp.partition)

        def on_event(event: WatchEvent) -> None:
            if not changed.done():
                changed.set_result(None)

        await self.admin.get(path, watch=on_event)
        await asyncio.wait_for(changed, timeout=timeout_s)
        state, _ = await self.zk_partition_state(tp)
        return state
