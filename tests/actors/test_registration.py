"""BrokerRegistrationActor on the in-memory ZooKeeper, in virtual time.

Every test runs a real ActorSystem on a ManualClock with the fake's server sharing that clock, and
waits for quiescence with ``wait_idle()`` (the fake delivers watches and session events before the
call that caused them returns, so nothing is missed). A ``Collector`` actor is the subscriber and
records the typed messages the registration actor sends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from actors.server.registration import (
    BrokerRegistered,
    BrokerRegistrationActor,
    BrokerRegistrationFailed,
    RegistrationState,
    RegistrationStatistics,
    SessionLost,
    SessionSuspended,
)
from actors.server.zk_data import (
    BROKER_IDS_PATH,
    broker_id_path,
    decode_broker_registration,
    http_broker_registration,
)
from runtime.activity import Activity
from runtime.actor import Actor
from runtime.clock import ManualClock
from runtime.context import Context
from runtime.coordination import ConnectionLossError, CreateResult, MemoryCoordinator, MemoryZooKeeper
from runtime.system import ActorSystem

pytestmark = pytest.mark.asyncio

SESSION_TIMEOUT_MS = 6_000
BROKER_ID = 1
PATH = broker_id_path(BROKER_ID)


class Collector(Actor[Any]):
    def __init__(self, received: list[object]) -> None:
        self.received = received

    def receive(self, ctx: Context[Any], message: Any) -> None:
        self.received.append(message)


@dataclass
class World:
    clock: ManualClock
    server: MemoryZooKeeper
    coordinator: MemoryCoordinator
    system: ActorSystem
    received: list[object]

    async def settle(self) -> None:
        await self.system.wait_idle()

    async def advance(self, delta_ms: int) -> None:
        self.clock.advance(delta_ms)
        await self.system.wait_idle()

    def spawn_registration(self, **options: Any) -> None:
        registration = http_broker_registration(BROKER_ID, "127.0.0.1", 9001, timestamp_ms=0)
        subscriber = self.system.spawn("subscriber", lambda: Collector(self.received))
        self.system.spawn(
            "registration",
            lambda: BrokerRegistrationActor(
                self.coordinator,
                registration,
                session_timeout_ms=SESSION_TIMEOUT_MS,
                subscriber=subscriber,
                **options,
            ),
        )

    def statistics(self) -> RegistrationStatistics:
        for ref, instance in self.system.actor_instances():
            if ref.name == "registration":
                stats = instance.statistics()
                assert isinstance(stats, RegistrationStatistics)
                return stats
        raise AssertionError("no registration actor")

    async def other_client(self) -> MemoryCoordinator:
        client = MemoryCoordinator(self.server, session_timeout_ms=SESSION_TIMEOUT_MS)
        await client.start()
        return client


@pytest_asyncio.fixture
async def world() -> AsyncIterator[World]:
    clock = ManualClock()
    server = MemoryZooKeeper(clock=clock)
    coordinator = MemoryCoordinator(server, session_timeout_ms=SESSION_TIMEOUT_MS)
    await coordinator.start()
    async with ActorSystem("1", clock=clock, activity=Activity()) as system:
        yield World(clock, server, coordinator, system, [])


async def czxid(client: MemoryCoordinator) -> int:
    stat = await client.exists(PATH)
    assert stat is not None
    return stat.czxid


async def test_registers_ephemeral_znode_with_its_http_endpoint_on_start(world: World) -> None:
    world.spawn_registration()
    await world.settle()
    data, stat = await world.coordinator.get(PATH)
    registration = decode_broker_registration(BROKER_ID, data)
    assert registration.endpoint().connection_string == "HTTP://127.0.0.1:9001"
    assert registration.timestamp_ms == world.clock.wall_clock_ms()
    assert stat.ephemeral_owner == world.coordinator.session_id
    assert world.received == [BrokerRegistered(broker_id=BROKER_ID, broker_epoch=stat.czxid)]
    stats = world.statistics()
    assert (stats.registered, stats.broker_epoch, stats.state) == (
        True,
        stat.czxid,
        RegistrationState.REGISTERED,
    )


async def test_creates_missing_broker_ids_parents_first(world: World) -> None:
    assert await world.coordinator.exists(BROKER_IDS_PATH) is None
    world.spawn_registration()
    await world.settle()
    assert await world.coordinator.get_children(BROKER_IDS_PATH) == [str(BROKER_ID)]
    stat = await world.coordinator.exists("/brokers")
    assert stat is not None
    assert stat.ephemeral_owner == 0


async def test_reregisters_after_expiry_with_a_larger_broker_epoch(world: World) -> None:
    world.spawn_registration()
    await world.settle()
    first_epoch = await czxid(world.coordinator)

    world.coordinator.expire()
    assert PATH not in world.server.paths()  # gone with the session, before the actor reacts
    await world.settle()

    second_epoch = await czxid(world.coordinator)
    assert second_epoch > first_epoch
    assert world.received == [
        BrokerRegistered(broker_id=BROKER_ID, broker_epoch=first_epoch),
        SessionLost(broker_id=BROKER_ID),
        BrokerRegistered(broker_id=BROKER_ID, broker_epoch=second_epoch),
    ]
    stats = world.statistics()
    assert (stats.expiries_seen, stats.registrations_total, stats.broker_epoch) == (1, 2, second_epoch)


async def test_connection_loss_in_time_keeps_the_registration(world: World) -> None:
    world.spawn_registration()
    await world.settle()
    epoch = await czxid(world.coordinator)
    world.coordinator.disconnect()
    await world.advance(SESSION_TIMEOUT_MS - 1)
    world.coordinator.reconnect()
    await world.settle()
    assert await czxid(world.coordinator) == epoch
    assert world.received == [
        BrokerRegistered(broker_id=BROKER_ID, broker_epoch=epoch),
        SessionSuspended(broker_id=BROKER_ID),
    ]
    assert world.statistics().registrations_total == 1


async def test_connection_loss_past_the_session_timeout_reregisters_on_reconnection(world: World) -> None:
    world.spawn_registration()
    await world.settle()
    first_epoch = await czxid(world.coordinator)
    world.coordinator.disconnect()
    await world.advance(SESSION_TIMEOUT_MS)
    assert PATH not in world.server.paths()
    world.coordinator.reconnect()
    await world.settle()
    second_epoch = await czxid(world.coordinator)
    assert world.received == [
        BrokerRegistered(broker_id=BROKER_ID, broker_epoch=first_epoch),
        SessionSuspended(broker_id=BROKER_ID),
        SessionLost(broker_id=BROKER_ID),
        BrokerRegistered(broker_id=BROKER_ID, broker_epoch=second_epoch),
    ]


async def test_existing_znode_of_its_own_session_counts_as_registered(world: World) -> None:
    # A create that succeeded although its answer was lost: the retry sees NodeExists.
    await world.coordinator.ensure_path(BROKER_IDS_PATH)
    created = await world.coordinator.create(PATH, b"{}", ephemeral=True)
    world.spawn_registration()
    await world.settle()
    assert world.received == [BrokerRegistered(broker_id=BROKER_ID, broker_epoch=created.stat.czxid)]


async def test_waits_for_the_old_sessions_znode_to_expire_then_registers(world: World) -> None:
    old_session = await world.other_client()
    await old_session.ensure_path(BROKER_IDS_PATH)
    await old_session.create(PATH, b"{}", ephemeral=True)
    old_session.disconnect()  # the previous incarnation vanished without closing its session

    world.spawn_registration()
    await world.settle()
    assert world.statistics().state is RegistrationState.AWAITING_OLD_OWNER
    assert world.received == []

    await world.advance(SESSION_TIMEOUT_MS)  # the server expires the old session: its znode goes
    stat = await world.coordinator.exists(PATH)
    assert stat is not None
    assert stat.ephemeral_owner == world.coordinator.session_id
    assert world.received == [BrokerRegistered(broker_id=BROKER_ID, broker_epoch=stat.czxid)]


async def test_keeps_waiting_for_an_old_owner_that_outlives_one_session_timeout(world: World) -> None:
    """Issue: a broker whose old session outlived one session timeout (a ZooKeeper outage stops the
    server's clock) gave up registering for good and stayed alive unregistered. It now looks
    again every session timeout and registers once the old znode goes."""
    old_session = await world.other_client()
    await old_session.ensure_path(BROKER_IDS_PATH)
    await old_session.create(PATH, b"{}", ephemeral=True)

    world.spawn_registration(old_owner_wait_ms=2_000)
    await world.settle()
    await world.advance(3_000)  # past one wait: still waiting, not failed
    assert world.received == []
    assert world.statistics().state is RegistrationState.AWAITING_OLD_OWNER
    await old_session.close()
    await world.settle()
    stat = await world.coordinator.exists(PATH)
    assert stat is not None
    assert world.received == [BrokerRegistered(broker_id=BROKER_ID, broker_epoch=stat.czxid)]


async def test_gives_up_when_the_old_owner_outlives_the_bound(world: World) -> None:
    other = await world.other_client()  # stays connected: its znode never goes away
    await other.ensure_path(BROKER_IDS_PATH)
    await other.create(PATH, b"{}", ephemeral=True)

    world.spawn_registration(old_owner_wait_ms=2_000, old_owner_rounds=3)
    await world.settle()
    for _ in range(5):  # one second at a time: each round's look-again settles before the next
        await world.advance(1_000)
    await world.advance(999)
    assert world.received == []
    await world.advance(1)
    assert len(world.received) == 1
    failure = world.received[0]
    assert isinstance(failure, BrokerRegistrationFailed)
    assert failure.broker_id == BROKER_ID
    assert "still held by another session" in failure.reason
    assert world.statistics().state is RegistrationState.FAILED

    # A later new session tries again, and wins once the other owner is gone.
    await other.close()
    world.coordinator.expire()
    await world.settle()
    assert isinstance(world.received[-1], BrokerRegistered)


class LossyCoordinator(MemoryCoordinator):
    """Loses the first create's answer (after applying it) or its request (before applying it)."""

    def __init__(self, server: MemoryZooKeeper, *, applied: bool) -> None:
        super().__init__(server, session_timeout_ms=SESSION_TIMEOUT_MS)
        self.applied = applied
        self.losses_left = 1

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False
    ) -> CreateResult:
        if path != PATH or self.losses_left == 0:
            return await super().create(path, data, ephemeral=ephemeral, sequential=sequential)
        self.losses_left -= 1
        if self.applied:
            await super().create(path, data, ephemeral=ephemeral, sequential=sequential)
        raise ConnectionLossError("create", path, "answer lost (injected)")


@pytest.mark.parametrize("applied", [True, False], ids=["answer-lost", "request-lost"])
async def test_retries_the_create_after_a_connection_loss(world: World, applied: bool) -> None:
    lossy = LossyCoordinator(world.server, applied=applied)
    await lossy.start()
    await lossy.ensure_path(BROKER_IDS_PATH)
    world.coordinator = lossy
    world.spawn_registration(retry_backoff_ms=500)
    await world.settle()
    assert (PATH in world.server.paths()) is applied
    assert world.statistics().state is RegistrationState.REGISTERING
    await world.advance(499)
    assert world.received == []
    await world.advance(1)
    stat = await lossy.exists(PATH)
    assert stat is not None
    assert stat.ephemeral_owner == lossy.session_id
    # When the first create did apply, CheckedEphemeral recognises the znode as ours.
    assert world.received == [BrokerRegistered(broker_id=BROKER_ID, broker_epoch=stat.czxid)]
    assert world.statistics().registrations_total == 1


async def test_registers_once_a_session_exists_when_started_disconnected(world: World) -> None:
    world.coordinator.expire(reconnect=False)
    world.spawn_registration()
    await world.settle()
    assert world.statistics().state is RegistrationState.UNREGISTERED
    world.coordinator.reconnect()
    await world.settle()
    assert world.statistics().registered
    assert world.received == [
        BrokerRegistered(broker_id=BROKER_ID, broker_epoch=await czxid(world.coordinator))
    ]


class ExpiringCoordinator(MemoryCoordinator):
    """Its session expires right after the first registration create was applied."""

    def __init__(self, server: MemoryZooKeeper) -> None:
        super().__init__(server, session_timeout_ms=SESSION_TIMEOUT_MS)
        self.expiries_left = 1

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False
    ) -> CreateResult:
        result = await super().create(path, data, ephemeral=ephemeral, sequential=sequential)
        if path == PATH and self.expiries_left:
            self.expiries_left -= 1
            self.expire()  # the answer reaches the actor after the session events
        return result


async def test_late_answer_from_a_lost_session_is_ignored(world: World) -> None:
    expiring = ExpiringCoordinator(world.server)
    await expiring.start()
    await expiring.ensure_path(BROKER_IDS_PATH)
    world.coordinator = expiring
    world.spawn_registration()
    await world.settle()
    stat = await expiring.exists(PATH)
    assert stat is not None
    assert stat.ephemeral_owner == expiring.session_id
    # The first create's answer (a znode of the lost session) was never reported.
    assert world.received == [
        SessionLost(broker_id=BROKER_ID),
        BrokerRegistered(broker_id=BROKER_ID, broker_epoch=stat.czxid),
    ]
    assert world.statistics().broker_epoch == stat.czxid
