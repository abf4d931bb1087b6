"""A whole cluster in one process on virtual time: brokers built by ``ops.wiring`` with the real
controller, on memory adapters, one shared ManualClock, the in-memory ZooKeeper and the simulated
network, plus client nodes.

What is shared and what each broker owns
----------------------------------------
Brokers share the clock, one ``Activity`` (so ``settle()`` waits for the whole cluster), one
``SimNetwork`` (every message crosses the real codec) and one ``MemoryZooKeeper`` whose sessions
expire on the shared clock. Each broker has its own ``MemoryFileSystem`` (its disk, which
outlives the process), its own ZooKeeper client per incarnation, and an rng derived from the
cluster seed and its id. Every node is deterministic (blocking pipes run inline), so a seed and
the calls made decide everything.

Lifecycles (a broker is ``down``, ``up``, or in between while its start or stop runs):
* ``start``: the broker node starts (log recovery, registration, controller election).
* ``stop``: a clean stop with Kafka's controlled shutdown first; it needs virtual time to pass, so
  it runs in the background (``run_in_background``) while the driver advances the clock.
* ``kill``: SIGKILL. The process stops at once and sends nothing more; its disk keeps every byte
  written (page cache); its ZooKeeper session lives until it times out.
* ``power_loss``: a kill that also loses whatever was not fsynced (``MemoryFileSystem.crash``).
  For both, the dead process's cancelled tasks still unwind, and its shutdown path would write
  checkpoints and the clean-shutdown marker: every disk write and fsync fails from the moment of
  death (``DiskFault.PROCESS_DEAD``), so the next start sees the disk a dead process leaves.
* ``stall``/``unstall``: SIGSTOP/SIGCONT. No handler runs; the ZooKeeper connection drops, so the
  session expires if the stall outlasts it.
* ZooKeeper: ``expire_session`` (the server expires one broker's session), ``disconnect`` and
  ``reconnect`` (one broker cut from ZooKeeper), ``zookeeper_outage``/``zookeeper_back`` (the
  ensemble is down: nobody reaches it and no session expires meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from actors.common.names import BROKER_ACTOR_NAME, CONTROLLER_ACTOR_NAME, broker_node, partition_name
from actors.common.types import TopicPartition
from actors.controller.controller import ControllerActor
from actors.server import zk_data
from actors.server.broker import BrokerActor
from actors.server.config import BrokerConfig
from actors.server.replica.partition import PartitionActor
from ops.codec import wire_codec
from ops.wiring import BrokerNode, NodeAdapters, broker_node_context
from runtime.activity import Activity
from runtime.clock import ManualClock
from runtime.coordination import MemoryCoordinator, MemoryZooKeeper
from runtime.coordination.session import SessionState
from runtime.ref import ActorRef
from runtime.rng import node_rng
from runtime.storage.config import LogConfig
from runtime.storage.fs import DiskFault, MemoryFileSystem
from runtime.storage.log import Log
from runtime.system import ActorSystem
from runtime.transport.addresses import AddressBook
from runtime.transport.sim import LinkBehaviour, SimNetwork, SimTransport

__all__ = ["BrokerState", "SimBroker", "SimCluster"]

T = TypeVar("T")
_log = logging.getLogger("actorlog.sim")

LOG_DIR = "/data"


class BrokerState:
    DOWN = "down"
    STARTING = "starting"
    UP = "up"
    STOPPING = "stopping"


@dataclass
class SimBroker:
    """One broker's process (while up) and its disk (always)."""

    broker_id: int
    fs: MemoryFileSystem
    state: str = BrokerState.DOWN
    coordinator: MemoryCoordinator | None = None
    transport: SimTransport | None = None
    node: BrokerNode | None = None
    incarnation: int = 0
    stalled: bool = False
    zookeeper_cut: bool = False
    # The process task (the broker node runs inside it) and the event that ends it cleanly.
    process: asyncio.Task[None] | None = None
    leave: asyncio.Event | None = None
    killed: bool = False
    # Why the process ended on its own (a node failure), if it did.
    exit_reason: str | None = None
    # When it last began to go down (stop, kill, exit): -1 if never.
    went_down_ms: int = -1

    @property
    def up(self) -> bool:
        return self.state == BrokerState.UP and self.node is not None

    @property
    def system(self) -> ActorSystem | None:
        return self.node.system if self.node is not None else None

    @property
    def ref(self) -> ActorRef:
        return ActorRef(node_id=broker_node(self.broker_id), name=BROKER_ACTOR_NAME)


@dataclass
class SimCluster:
    """See the module docstring. Use as ``async with SimCluster(...) as cluster:``."""

    broker_ids: tuple[int, ...] = (1, 2, 3)
    seed: int = 0
    config_overrides: dict[str, Any] = field(default_factory=dict)
    link: LinkBehaviour = field(default_factory=LinkBehaviour)
    session_timeout_ms: int = 6_000
    default_log_config: LogConfig | None = None
    clock: ManualClock = field(default_factory=ManualClock)
    activity: Activity = field(default_factory=Activity)
    # Each broker registers a KAFKA listener on ``broker-N`` at this port (None: none), so its
    # metadata names them, as a broker started with ``listeners=...,KAFKA://...`` does.
    kafka_port: int | None = None
    # ``broker.rack`` per broker id (absent: none); read at each start, so a test may move a broker
    # to another rack between incarnations.
    racks: dict[int, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.zookeeper = MemoryZooKeeper(clock=self.clock)
        self.network = SimNetwork(
            clock=self.clock,
            rng=node_rng(self.seed, "network"),
            codec=wire_codec(),
            activity=self.activity,
        )
        self.network.default = self.link
        self.brokers: dict[int, SimBroker] = {
            broker_id: SimBroker(broker_id, MemoryFileSystem(self.clock.wall_clock_ms))
            for broker_id in self.broker_ids
        }
        self.clients: dict[str, ActorSystem] = {}
        self._stack = contextlib.AsyncExitStack()
        self._background: set[asyncio.Task[Any]] = set()
        self.background_failures: list[BaseException] = []
        # Called after every settled step of virtual time (the simulation's invariant checks).
        self.on_step: Callable[[], None] | None = None
        # Called when a broker process ends on its own (broker id, why).
        self.on_exit: Callable[[int, str], None] | None = None

    # ------------------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> SimCluster:
        await self._stack.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.on_step = None
        for task in list(self._background):
            task.cancel()
        for broker in self.brokers.values():
            if broker.process is not None:
                await self._kill_now(broker)
        await self._stack.aclose()

    def config(self, broker_id: int) -> BrokerConfig:
        settings: dict[str, Any] = {
            "broker_id": broker_id,
            "zookeeper_session_timeout_ms": self.session_timeout_ms,
        }
        settings.update(self.config_overrides)
        return BrokerConfig(**settings)

    async def client(self, name: str = "client") -> ActorSystem:
        """A client node on the network (producers, consumers, admin requests live there)."""
        system = self.clients.get(name)
        if system is None:
            system = ActorSystem(
                name,
                clock=self.clock,
                rng=node_rng(self.seed, name),
                transport=SimTransport(self.network),
                activity=self.activity,
                deterministic=True,
            )
            await self._stack.enter_async_context(system)
            self.clients[name] = system
        return system

    # -------------------------------------------------------------------------------- brokers

    async def start(self, broker_id: int) -> SimBroker:
        """Start a broker process. It runs in a task of its own, so that a node that fails (an
        error escalating past a top-level actor) ends that process, not the simulation. Raises
        what the start-up raised (a disk that fails, ZooKeeper gone)."""
        broker = self.brokers[broker_id]
        if broker.state != BrokerState.DOWN:
            raise RuntimeError(f"broker {broker_id} is {broker.state}")
        broker.state = BrokerState.STARTING
        broker.incarnation += 1
        broker.exit_reason = None
        broker.coordinator = MemoryCoordinator(self.zookeeper, session_timeout_ms=self.session_timeout_ms)
        broker.transport = SimTransport(self.network)
        adapters = NodeAdapters(
            clock=self.clock,
            fs=broker.fs,
            coordinator=broker.coordinator,
            transport=broker.transport,
            address_book=AddressBook(),
            rng=node_rng(self.seed, f"broker-{broker_id}-{broker.incarnation}"),
            activity=self.activity,
            run_controller=True,
            deterministic=True,
        )
        started: asyncio.Future[BrokerNode] = asyncio.get_running_loop().create_future()
        broker.leave = asyncio.Event()
        leave = broker.leave

        async def process() -> None:
            async with broker_node_context(
                self.config(broker_id),
                adapters=adapters,
                log_dir=LOG_DIR,
                host=f"broker-{broker_id}",
                port=9092,
                default_log_config=self.default_log_config,
                rack=self.racks.get(broker_id),
                extra_endpoints=self._kafka_endpoints(broker_id),
            ) as node:
                broker.node = node
                started.set_result(node)
                await leave.wait()

        task = asyncio.ensure_future(process())
        broker.process = task
        task.add_done_callback(lambda finished: self._process_ended(broker, finished, started))
        waiting: list[asyncio.Future[Any]] = [started, task]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not started.done():
            error = task.exception() if not task.cancelled() else asyncio.CancelledError()
            assert error is not None
            raise error
        if not task.done():
            broker.state = BrokerState.UP
        # else: it failed at once; _process_ended marked it down and reported the exit
        return broker

    def _kafka_endpoints(self, broker_id: int) -> tuple[zk_data.EndPoint, ...]:
        if self.kafka_port is None:
            return ()
        return (
            zk_data.EndPoint(
                listener_name=zk_data.KAFKA_LISTENER_NAME,
                host=f"broker-{broker_id}",
                port=self.kafka_port,
                security_protocol="SASL_PLAINTEXT",
            ),
        )

    def _process_ended(
        self, broker: SimBroker, task: asyncio.Task[None], started: asyncio.Future[BrokerNode]
    ) -> None:
        if broker.process is not task:
            return
        error = None if task.cancelled() else task.exception()
        broker.went_down_ms = self.clock.now_ms()
        # Whatever way the process ended, it is gone: its files are closed, its connection to
        # ZooKeeper drops (the session, if still open, times out), nothing reaches it any more.
        broker.fs.process_exit()
        if broker.coordinator is not None:
            broker.coordinator.abandon()
        self.network.detach(broker_node(broker.broker_id))
        if broker.state in (BrokerState.UP, BrokerState.STARTING) and not broker.killed:
            # It ended on its own: a node failure, or a failed start.
            broker.exit_reason = repr(error) if error is not None else "exited"
            _log.warning("broker %d exited: %s", broker.broker_id, broker.exit_reason)
            if self.on_exit is not None and started.done():
                self.on_exit(broker.broker_id, broker.exit_reason)
        broker.process = None
        broker.node = None
        broker.stalled = False
        broker.zookeeper_cut = False
        broker.killed = False
        broker.state = BrokerState.DOWN
        if not started.done():
            started.cancel()

    async def stop(self, broker_id: int) -> None:
        """A clean stop: controlled shutdown, actors stop, logs close, the session closes."""
        broker = self.brokers[broker_id]
        if broker.state != BrokerState.UP or broker.process is None:
            return
        broker.state = BrokerState.STOPPING
        broker.went_down_ms = self.clock.now_ms()
        process = broker.process
        assert broker.leave is not None
        broker.leave.set()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.shield(process)

    async def kill(self, broker_id: int, *, power_loss: bool = False) -> None:
        broker = self.brokers[broker_id]
        if broker.state not in (BrokerState.UP, BrokerState.STOPPING):
            return
        await self._kill_now(broker, power_loss=power_loss)

    async def _kill_now(self, broker: SimBroker, *, power_loss: bool = False) -> None:
        # Nothing leaves a dead process: cut it from the network before its actors stop.
        broker.killed = True
        broker.went_down_ms = self.clock.now_ms()
        if broker.transport is not None:
            await broker.transport.stop()
        system = broker.system
        if system is not None:
            system.stall()
        # The dead process's cancelled tasks still run its shutdown path below; none of it may reach
        # the disk (a clean-shutdown marker written after a power loss would skip the recovery).
        injected = broker.fs.fault
        broker.fs.inject_fault(DiskFault.PROCESS_DEAD)
        if power_loss:
            broker.fs.crash()
        else:
            broker.fs.process_exit()
        if broker.coordinator is not None:
            broker.coordinator.abandon()
        if broker.node is not None:
            broker.node.controlled_shutdown_enable = False
        process = broker.process
        if process is not None:
            process.cancel()
            # Closing the logs fails on the dead files: that is the point.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await process
        if injected is None:
            broker.fs.clear_fault()
        else:
            broker.fs.inject_fault(injected)
        broker.state = BrokerState.DOWN

    def stall(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        if not broker.up or broker.stalled:
            return
        assert broker.system is not None
        broker.system.stall()
        broker.stalled = True
        coordinator = broker.coordinator
        if coordinator is not None and coordinator.session_state is SessionState.CONNECTED:
            coordinator.disconnect()

    def unstall(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        if not broker.stalled:
            return
        broker.stalled = False
        if broker.system is not None:
            broker.system.unstall()
        self._maybe_reconnect(broker)

    # ------------------------------------------------------------------------------ ZooKeeper

    def expire_session(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        coordinator = broker.coordinator
        if broker.up and coordinator is not None and coordinator.session_id is not None:
            self.zookeeper.expire_session(coordinator.session_id)
            # A connected client learns at once and, like aiozk, opens a new session.
            self._maybe_reconnect(broker)

    def disconnect(self, broker_id: int) -> None:
        """Cut one broker from ZooKeeper (not from the other brokers)."""
        broker = self.brokers[broker_id]
        broker.zookeeper_cut = True
        coordinator = broker.coordinator
        if broker.up and coordinator is not None and coordinator.session_state is SessionState.CONNECTED:
            coordinator.disconnect()

    def reconnect(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        broker.zookeeper_cut = False
        self._maybe_reconnect(broker)

    def zookeeper_outage(self) -> None:
        self.zookeeper.stop_serving()
        for broker in self.brokers.values():
            coordinator = broker.coordinator
            if broker.up and coordinator is not None and coordinator.session_state is SessionState.CONNECTED:
                coordinator.disconnect()

    def zookeeper_back(self) -> None:
        self.zookeeper.resume_serving()
        for broker in self.brokers.values():
            self._maybe_reconnect(broker)

    def _maybe_reconnect(self, broker: SimBroker) -> None:
        coordinator = broker.coordinator
        if (
            broker.up
            and not broker.stalled
            and not broker.zookeeper_cut
            and self.zookeeper.serving
            and coordinator is not None
            and coordinator.session_state in (SessionState.SUSPENDED, SessionState.LOST)
        ):
            coordinator.reconnect()

    # ----------------------------------------------------------------------------------- time

    def run_in_background(self, work: Coroutine[Any, Any, T], *, name: str = "") -> asyncio.Task[T]:
        """Run ``work`` while the driver moves time (a stop, a client request); a failure is kept
        in ``background_failures`` (the simulation reports it)."""
        task = asyncio.ensure_future(work)
        self._background.add(task)

        def done(finished: asyncio.Task[T]) -> None:
            self._background.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                error = finished.exception()
                assert error is not None
                _log.warning("background work %s failed: %r", name, error)
                self.background_failures.append(error)

        task.add_done_callback(done)
        return task

    async def settle(self) -> None:
        await self.activity.wait_idle()

    async def advance(self, delta_ms: int) -> None:
        """Move virtual time forward one due timer at a time, settling (and calling ``on_step``)
        after each."""
        target = self.clock.now_ms() + delta_ms
        await self.settle()
        while True:
            due = self.clock.next_due_ms()
            if due is None or due > target:
                break
            self.clock.advance_to(due)
            await self.settle()
            if self.on_step is not None:
                self.on_step()
        self.clock.advance_to(target)
        await self.settle()
        if self.on_step is not None:
            self.on_step()

    async def complete(self, awaitable: Awaitable[T], *, within_ms: int = 60_000, step_ms: int = 100) -> T:
        """Run ``awaitable`` while virtual time moves ``step_ms`` at a time; fail after ``within_ms``."""
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

    async def wait_for(
        self, condition: Callable[[], bool], *, within_ms: int = 60_000, step_ms: int = 100
    ) -> int:
        """Advance until ``condition()`` holds; the virtual ms it took. Fails after ``within_ms``."""
        waited = 0
        await self.settle()
        while not condition():
            if waited >= within_ms:
                raise AssertionError(f"condition not met within {within_ms} ms of virtual time")
            await self.advance(step_ms)
            waited += step_ms
        return waited

    # -------------------------------------------------------------------------------- peeking

    def up_brokers(self) -> list[SimBroker]:
        return [broker for broker in self.brokers.values() if broker.up]

    def broker_actor(self, broker_id: int) -> BrokerActor | None:
        system = self.brokers[broker_id].system
        if system is None:
            return None
        for ref, actor in system.actor_instances():
            if ref.name == BROKER_ACTOR_NAME and isinstance(actor, BrokerActor):
                return actor
        return None

    def controller_actor(self, broker_id: int) -> ControllerActor | None:
        system = self.brokers[broker_id].system
        if system is None:
            return None
        for ref, actor in system.actor_instances():
            if ref.name == CONTROLLER_ACTOR_NAME and isinstance(actor, ControllerActor):
                return actor
        return None

    def active_controllers(self) -> list[tuple[int, ControllerActor]]:
        found = []
        for broker_id in self.brokers:
            controller = self.controller_actor(broker_id)
            if controller is not None and controller.active:
                found.append((broker_id, controller))
        return found

    def partition_actor(self, broker_id: int, tp: TopicPartition) -> PartitionActor | None:
        system = self.brokers[broker_id].system
        if system is None:
            return None
        for ref, actor in system.actor_instances():
            if ref.name == partition_name(tp) and isinstance(actor, PartitionActor):
                return actor
        return None

    def partition_actors(self) -> Iterator[tuple[int, PartitionActor]]:
        for broker_id, broker in self.brokers.items():
            system = broker.system
            if system is None or not broker.up:
                continue
            for _, actor in system.actor_instances():
                if isinstance(actor, PartitionActor):
                    yield broker_id, actor

    def log(self, broker_id: int, tp: TopicPartition) -> Log | None:
        node = self.brokers[broker_id].node
        if node is None:
            return None
        return node.log_manager.get_log(tp)
