"""The composition root: the one place where a broker node is assembled from its adapters.

A node is an actor system whose actors run on five ports (Clock, Rng, Transport, FileSystem,
Coordinator). Production passes the loop clock, the OS file system, the aiozk coordinator and the
HTTP transport; tests pass virtual time, the memory file system, the in-memory ZooKeeper and the
memory network. Everything else is identical, so a test cluster exercises the code a real broker
runs.

Start-up order: open the log dir (recovery runs here, in a worker thread for the OS file system),
open the ZooKeeper session, start the actor system, the broker actor (which registers the broker
and starts its tasks), the group coordinator (the groups of the ``__consumer_offsets`` partitions
this broker leads, appending and loading through this broker's own partition actors), the admin actor
(topic administration, producer ids) and the controller.
Shutdown is the reverse: a controlled shutdown first (leaderships move away), then stop the actors
(children first), close the logs cleanly (flush, checkpoints, clean-shutdown marker), close the
session (the registration vanishes).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from actors.common.client_protocol import DescribeConfigsEntry
from actors.common.errors import ErrorCode
from actors.common.names import (
    ADMIN_ACTOR_NAME,
    BROKER_ACTOR_NAME,
    CONTROLLER_ACTOR_NAME,
    GROUP_COORDINATOR_ACTOR_NAME,
    broker_node,
)
from actors.common.protocol import ControlledShutdownRequest, ControlledShutdownResponse
from actors.controller.controller import ControllerActor
from actors.group.coordinator_actor import GroupCoordinatorActor
from actors.group.coordinator_logic import GroupConfig
from actors.server import zk_data
from actors.server.admin.manager import AdminManagerActor
from actors.server.broker import BrokerActor
from actors.server.config import BrokerConfig
from actors.server.offsets_log import PartitionOffsetsLog
from actors.server.state_changes import StateChangeLog
from runtime.activity import Activity
from runtime.clock import Clock, wait_ms
from runtime.coordination.base import Coordinator
from runtime.coordination.errors import NodeExistsError, NoNodeError
from runtime.errors import RuntimeFailure
from runtime.ref import ActorRef
from runtime.storage.config import LogConfig
from runtime.storage.fs import FileSystem
from runtime.storage.log_manager import LogManager
from runtime.supervision import SupervisorStrategy
from runtime.system import ActorSystem
from runtime.transport.addresses import AddressBook
from runtime.transport.base import Transport

__all__ = ["BrokerNode", "NodeAdapters", "broker_node_context", "group_config"]


def group_config(config: BrokerConfig) -> GroupConfig:
    """The group coordinator's settings from the broker's (docs/consumer-groups.md §8)."""
    return GroupConfig(
        group_min_session_timeout_ms=config.group_min_session_timeout_ms,
        group_max_session_timeout_ms=config.group_max_session_timeout_ms,
        group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        group_max_size=config.group_max_size,
        offsets_topic_num_partitions=config.offsets_topic_num_partitions,
        offsets_retention_ms=config.offsets_retention_minutes * 60 * 1000,
        offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
        offset_metadata_max_bytes=config.offset_metadata_max_bytes,
    )


async def controlled_shutdown(node: BrokerNode, clock: Clock) -> bool:
    """Kafka's ``KafkaServer.controlledShutdown``: ask the active controller to move this broker's
    leaderships away, up to ``controlled.shutdown.max.retries`` times with
    ``controlled.shutdown.retry.backoff.ms`` between attempts; True when it says nothing remains."""
    config = node.config
    log = logging.getLogger("actorlog.broker")
    for attempt in range(1, config.controlled_shutdown_max_retries + 1):
        try:
            data, _ = await node.coordinator.get(zk_data.CONTROLLER_PATH)
            controller_id = zk_data.decode_controller(data).broker_id
            broker_epoch = _broker_epoch(node)
            response = await node.system.ask(
                ActorRef(node_id=broker_node(controller_id), name=CONTROLLER_ACTOR_NAME),
                ControlledShutdownRequest(broker_id=config.broker_id, broker_epoch=broker_epoch),
                timeout_ms=config.controller_socket_timeout_ms,
            )
        except (RuntimeFailure, zk_data.ZkDataError) as error:
            log.warning("controlled shutdown attempt %d failed: %s", attempt, error)
        else:
            if isinstance(response, ControlledShutdownResponse):
                if response.error_code is ErrorCode.NONE and not response.remaining_partitions:
                    log.info("controlled shutdown succeeded on attempt %d", attempt)
                    return True
                log.warning(
                    "controlled shutdown attempt %d: %s, %d partition(s) still led here",
                    attempt, response.error_code.name, len(response.remaining_partitions),
                )  # fmt: skip
        if attempt < config.controlled_shutdown_max_retries:
            await wait_ms(clock, config.controlled_shutdown_retry_backoff_ms)
    log.warning("controlled shutdown did not complete; shutting down anyway")
    return False


def _broker_epoch(node: BrokerNode) -> int:
    for _, actor in node.system.actor_instances():
        if isinstance(actor, BrokerActor):
            return actor.statistics().broker_epoch
    return -1


async def get_or_create_cluster_id(
    coordinator: Coordinator, configured: str | None, *, rng: random.Random
) -> str:
    """Kafka's ``getOrGenerateClusterId``: the id in ``/cluster/id``, created by the first broker
    (22 characters of URL-safe base64, as Kafka's ``Uuid``). A broker configured with a different
    ``cluster.id`` refuses to join (it belongs to another cluster)."""
    try:
        data, _ = await coordinator.get(zk_data.CLUSTER_ID_PATH)
        existing = zk_data.decode_cluster_id(data)
    except NoNodeError:
        proposed = (
            configured or base64.urlsafe_b64encode(rng.getrandbits(128).to_bytes(16, "big")).decode()[:22]
        )
        await coordinator.ensure_path("/cluster")
        try:
            await coordinator.create(zk_data.CLUSTER_ID_PATH, zk_data.encode_cluster_id(proposed))
            return proposed
        except NodeExistsError:
            data, _ = await coordinator.get(zk_data.CLUSTER_ID_PATH)  # another broker won the race
            existing = zk_data.decode_cluster_id(data)
    if configured is not None and configured != existing:
        raise RuntimeFailure(
            f"cluster.id {configured!r} does not match the cluster's id {existing!r} in ZooKeeper: "
            "this broker belongs to another cluster"
        )
    return existing


@dataclass(frozen=True, slots=True)
class NodeAdapters:
    clock: Clock
    fs: FileSystem
    coordinator: Coordinator
    transport: Transport
    address_book: AddressBook
    rng: random.Random
    activity: Activity | None = None
    # Load logs in a worker thread (the OS file system); the memory one is loaded inline.
    load_logs_in_thread: bool = False
    # Every real broker runs a controller (one is active at a time). Tests that play the
    # controller themselves, sending LeaderAndIsr by hand, leave it off.
    run_controller: bool = False
    # The simulation: blocking pipes run inline, so that only the seed decides what happens.
    deterministic: bool = False
    # Handler work per event-loop iteration (runtime/system.py); None runs every ready handler.
    turn_budget_ms: float | None = None


@dataclass(slots=True)
class BrokerNode:
    config: BrokerConfig
    system: ActorSystem
    log_manager: LogManager
    coordinator: Coordinator
    broker: ActorRef
    admin: ActorRef
    # Where every broker is reached (this one's own address included), as the broker actor learns
    # them; the node's own clients (the JSON API's producer) share it.
    address_book: AddressBook
    controller: ActorRef | None = None
    # Whether leaving runs Kafka's controlled shutdown first (config, unless the process is being
    # killed: a killed process asks nobody for anything).
    controlled_shutdown_enable: bool = True
    # This process's ISR state-change events (GET /v1/state-changes, the snapshot files).
    state_changes: StateChangeLog | None = None


@contextlib.asynccontextmanager
async def broker_node_context(
    config: BrokerConfig,
    *,
    adapters: NodeAdapters,
    log_dir: str,
    host: str,
    port: int,
    default_log_config: LogConfig | None = None,
    rack: str | None = None,
    static_properties: Mapping[str, str] | None = None,
    broker_config_entries: tuple[DescribeConfigsEntry, ...] = (),
    cluster_id: str | None = None,
    tls: bool = False,
    extra_endpoints: tuple[zk_data.EndPoint, ...] = (),
) -> AsyncIterator[BrokerNode]:
    """Run one broker node for the duration of the ``async with`` block (``tls``: its advertised
    listener is HTTPS, registered as Kafka's SSL security protocol; ``extra_endpoints``: further
    listeners its registration names, the Kafka protocol's among them)."""
    clock = adapters.clock

    def open_logs() -> LogManager:
        return LogManager.open(
            adapters.fs,
            log_dir,
            now_ms=clock.now_ms(),
            wall_clock_ms=clock.wall_clock_ms(),
            rng=adapters.rng,
            default_config=default_log_config,
        )

    log_manager = await asyncio.to_thread(open_logs) if adapters.load_logs_in_thread else open_logs()
    coordinator = adapters.coordinator
    await coordinator.start()
    for path in zk_data.PERSISTENT_ZK_PATHS:
        await coordinator.ensure_path(path)
    effective_cluster_id = await get_or_create_cluster_id(coordinator, cluster_id, rng=adapters.rng)
    registration = zk_data.http_broker_registration(
        config.broker_id,
        host,
        port,
        timestamp_ms=clock.wall_clock_ms(),
        rack=rack,
        # An unclean start may have cost what was not flushed: until a controller has seen this
        # process, the next one treats it as bounced if an older ISR names it (docs/controller.md §2).
        unclean_start=log_manager.unclean_start,
        tls=tls,
        extra_endpoints=extra_endpoints,
    )
    adapters.address_book.set(broker_node(config.broker_id), f"{'https' if tls else 'http'}://{host}:{port}")
    state_changes = StateChangeLog(config.broker_id, incarnation=clock.wall_clock_ms())
    system = ActorSystem(
        broker_node(config.broker_id),
        clock=clock,
        rng=adapters.rng,
        transport=adapters.transport,
        activity=adapters.activity,
        deterministic=adapters.deterministic,
        turn_budget_ms=adapters.turn_budget_ms,
    )
    group_coordinator = ActorRef(node_id=system.node_id, name=GROUP_COORDINATOR_ACTOR_NAME)
    try:
        async with system:
            broker = system.spawn(
                BROKER_ACTOR_NAME,
                lambda: BrokerActor(
                    config=config,
                    log_manager=log_manager,
                    coordinator=coordinator,
                    registration=registration,
                    address_book=adapters.address_book,
                    cluster_id=effective_cluster_id,
                    state_changes=state_changes,
                    group_coordinator=group_coordinator,
                ),
                # The broker actor holds what this broker hosts, its registration and its epochs:
                # restarted empty it would serve nothing while ZooKeeper still names it leader.
                # A crash there ends the node (its supervisor restarts the process) instead.
                supervision=SupervisorStrategy.escalate(),
            )
            offsets_log = PartitionOffsetsLog(
                commit_timeout_ms=config.offsets_commit_timeout_ms,
                request_timeout_ms=config.request_timeout_ms,
            )
            system.spawn(
                GROUP_COORDINATOR_ACTOR_NAME,
                lambda: GroupCoordinatorActor(
                    config=group_config(config),
                    writer=offsets_log,
                    reader=offsets_log,
                    broker=broker,
                ),
                # Restarted, it owns nothing and tells the broker, which elects it again for the
                # offsets partitions led here: it reloads them from the log, never serving what it lost.
                supervision=SupervisorStrategy.restart(),
            )
            admin = system.spawn(
                ADMIN_ACTOR_NAME,
                lambda: AdminManagerActor(
                    config=config,
                    coordinator=coordinator,
                    broker=broker,
                    default_log_config=default_log_config or LogConfig(),
                    static_broker_properties=static_properties,
                    broker_config_entries=broker_config_entries,
                ),
            )
            controller = None
            if adapters.run_controller:
                controller = system.spawn(
                    CONTROLLER_ACTOR_NAME,
                    lambda: ControllerActor(
                        config=config,
                        coordinator=coordinator,
                        address_book=adapters.address_book,
                        state_changes=state_changes,
                    ),
                )
            node = BrokerNode(
                config, system, log_manager, coordinator, broker, admin, adapters.address_book,
                controller, controlled_shutdown_enable=config.controlled_shutdown_enable,
                state_changes=state_changes,
            )  # fmt: skip
            try:
                yield node
            except BaseException:
                # The node failed or halted (or the process is being torn down): an abrupt exit,
                # as Kafka's Exit.halt, asks the controller for nothing.
                node.controlled_shutdown_enable = False
                raise
            finally:
                if node.controlled_shutdown_enable and adapters.run_controller:
                    await controlled_shutdown(node, clock)
    finally:
        try:
            log_manager.close(now_ms=clock.now_ms())
        finally:
            # Even when closing the logs fails (a failed disk), the session goes: the controller
            # learns at once that this broker is gone instead of after the session timeout.
            await coordinator.close()
