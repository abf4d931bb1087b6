"""Sessions against a real ZooKeeper: expiry, connection loss across a server restart, the launcher.

* Expiry is forced for real with ``ZkCoordinator.force_expiry()``: a second connection presents
  the session's id and password and then closes, which makes the server end the session (kazoo's
  test-harness trick). The registration znode disappears, and the actor re-creates it.
* A server restart (same port, same data directory) drops the connection but not the session:
  ZooKeeper reloads sessions from its transaction log. A watch set before the restart must fire
  for a change made after the reconnection, and must not fire spuriously on re-arming.

Waits are bounded ``asyncio.wait_for`` on queues and futures fed by callbacks; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from actors.server.registration import (
    BrokerRegistered,
    BrokerRegistrationActor,
    RegistrationStatistics,
    SessionLost,
    SessionSuspended,
)
from actors.server.zk_data import broker_id_path, decode_broker_registration, http_broker_registration
from ops.local.zookeeper import (
    LocalZooKeeper,
    ZooKeeperNotInstalledError,
    ZooKeeperStartError,
    find_installation,
)
from runtime.actor import Actor
from runtime.context import Context
from runtime.coordination import (
    ANY_VERSION,
    ConnectionLossError,
    SessionClosedError,
    SessionEvent,
    SessionState,
    WatchEvent,
    WatchEventKind,
)
from runtime.coordination.zk import ZkCoordinator
from runtime.system import ActorSystem

WAIT_S = 15.0


class QueueRecorder:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    def __call__(self, item: Any) -> None:
        self.items.append(item)
        self.queue.put_nowait(item)

    async def next(self, timeout_s: float = WAIT_S) -> Any:
        return await asyncio.wait_for(self.queue.get(), timeout_s)

    async def next_matching(self, predicate: Any, timeout_s: float = WAIT_S) -> Any:
        async with asyncio.timeout(timeout_s):
            while True:
                item = await self.queue.get()
                if predicate(item):
                    return item


class Subscriber(Actor[Any]):
    def __init__(self, recorder: QueueRecorder) -> None:
        self.recorder = recorder

    def receive(self, ctx: Context[Any], message: Any) -> None:
        self.recorder(message)


@pytest_asyncio.fixture
async def clients(zk_connect_string: str) -> AsyncIterator[list[ZkCoordinator]]:
    opened: list[ZkCoordinator] = []
    yield opened
    for client in opened:
        await client.close()


async def connect(connect_string: str, opened: list[ZkCoordinator], **options: Any) -> ZkCoordinator:
    options.setdefault("session_timeout_ms", 2_000)
    options.setdefault("request_timeout_ms", 5_000)
    client = ZkCoordinator(connect_string, **options)
    opened.append(client)
    await client.start()
    return client


# ------------------------------------------------------------------------------------- expiry


@pytest.mark.asyncio
@pytest.mark.zk
@pytest.mark.integration
async def test_registration_disappears_on_expiry_and_comes_back(
    zk_connect_string: str, clients: list[ZkCoordinator]
) -> None:
    coordinator = await connect(zk_connect_string, clients)
    observer = await connect(zk_connect_string, clients)
    received = QueueRecorder()
    path = broker_id_path(1)
    async with ActorSystem("1") as system:
        subscriber = system.spawn("subscriber", lambda: Subscriber(received))
        system.spawn(
            "registration",
            lambda: BrokerRegistrationActor(
                coordinator,
                http_broker_registration(1, "127.0.0.1", 9001, timestamp_ms=0),
                session_timeout_ms=2_000,
                subscriber=subscriber,
            ),
        )
        first = await received.next()
        assert isinstance(first, BrokerRegistered)
        data, stat = await observer.get(path)
        assert stat.ephemeral_owner == coordinator.session_id
        assert stat.czxid == first.broker_epoch
        assert decode_broker_registration(1, data).endpoint().port == 9001
        old_session = coordinator.session_id

        disappeared = QueueRecorder()
        await observer.exists(path, watch=disappeared)
        await coordinator.force_expiry()
        assert await disappeared.next() == WatchEvent(path=path, kind=WatchEventKind.NODE_DELETED)

        lost = await received.next_matching(lambda m: not isinstance(m, SessionSuspended))
        assert lost == SessionLost(broker_id=1)
        again = await received.next()
        assert isinstance(again, BrokerRegistered)
        assert again.broker_epoch > first.broker_epoch
        stat_again = await observer.exists(path)
        assert stat_again is not None
        assert stat_again.ephemeral_owner == coordinator.session_id != old_session
        assert stat_again.czxid == again.broker_epoch
        stats = next(i.statistics() for r, i in system.actor_instances() if r.name == "registration")
        assert isinstance(stats, RegistrationStatistics)
        assert (stats.expiries_seen, stats.registrations_total, stats.registered) == (1, 2, True)
    assert coordinator.statistics().expires_total == 1


# ---------------------------------------------------------------- connection loss and restart


@pytest.mark.asyncio
@pytest.mark.zk
@pytest.mark.integration
async def test_watch_set_before_a_server_restart_fires_for_a_change_after_reconnection(
    zookeeper_server: LocalZooKeeper, tmp_path: Path
) -> None:
    del zookeeper_server  # only for its skip/fail rule: this test runs its own server
    opened: list[ZkCoordinator] = []
    async with LocalZooKeeper(tmp_path / "zk", tick_time_ms=500, force_sync=False) as server:
        try:
            # aiozk retries a refused connection after 4 s: the session must outlive that.
            options = {"session_timeout_ms": 10_000, "request_timeout_ms": 20_000}
            client = await connect(server.connect_string + "/restart", opened, **options)
            writer = await connect(server.connect_string + "/restart", opened, **options)
            await writer.create("/node", b"0")
            await client.create("/mine", ephemeral=True)
            watch = QueueRecorder()
            await client.get("/node", watch=watch)
            events = QueueRecorder()
            client.subscribe(events)
            session = client.session_id
            port = server.port

            await server.stop()
            assert await events.next() == SessionEvent(
                state=SessionState.SUSPENDED, previous=SessionState.CONNECTED, session_id=session
            )
            await server.start()
            assert server.port == port
            assert await events.next(timeout_s=30.0) == SessionEvent(
                state=SessionState.CONNECTED, previous=SessionState.SUSPENDED, session_id=session
            )

            assert await client.exists("/mine") is not None  # same session: its ephemeral survived
            marker = QueueRecorder()
            await client.exists("/marker", watch=marker)
            await writer.create("/marker")
            await marker.next(timeout_s=30.0)  # every earlier event has been delivered by now
            assert watch.items == []
            await writer.set("/node", b"1", version=ANY_VERSION)
            assert await watch.next() == WatchEvent(path="/node", kind=WatchEventKind.DATA_CHANGED)
            assert client.statistics().disconnects_total == 1
            assert client.statistics().expires_total == 0
        finally:
            for each in opened:
                await each.close()


@pytest.mark.asyncio
@pytest.mark.zk
@pytest.mark.integration
async def test_calls_while_disconnected_fail_with_connection_loss_within_the_request_timeout(
    zookeeper_server: LocalZooKeeper, tmp_path: Path
) -> None:
    del zookeeper_server  # only for its skip/fail rule: this test runs its own server
    opened: list[ZkCoordinator] = []
    async with LocalZooKeeper(tmp_path / "zk", tick_time_ms=500, force_sync=False) as server:
        try:
            client = await connect(
                server.connect_string, opened, session_timeout_ms=10_000, request_timeout_ms=300
            )
            events = QueueRecorder()
            client.subscribe(events)
            await server.stop()
            assert (await events.next()).state is SessionState.SUSPENDED
            with pytest.raises(ConnectionLossError, match="no answer within 300 ms"):
                await asyncio.wait_for(client.get("/"), WAIT_S)
        finally:
            for each in opened:
                await each.close()
    assert client.session_state is SessionState.CLOSED


@pytest.mark.asyncio
async def test_start_against_an_unreachable_server_fails_within_the_connection_timeout() -> None:
    with socket.socket() as reserved:  # a port nobody listens on
        reserved.bind(("127.0.0.1", 0))
        port = reserved.getsockname()[1]
        client = ZkCoordinator(f"127.0.0.1:{port}", session_timeout_ms=2_000, connection_timeout_ms=300)
        with pytest.raises(ConnectionLossError, match="no session within 300 ms"):
            await asyncio.wait_for(client.start(), WAIT_S)
    assert client.session_state is SessionState.CLOSED
    with pytest.raises(SessionClosedError):
        await client.get("/")


# ------------------------------------------------------------------------------------ launcher


def test_missing_java_is_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(ZooKeeperNotInstalledError, match=r"`java` not found.*JAVA_HOME"):
        find_installation({"PATH": str(tmp_path)})


def test_missing_zookeeper_jar_names_the_package_and_zookeeper_home(tmp_path: Path) -> None:
    java_dir = str(Path(find_java()).parent)
    with pytest.raises(ZooKeeperNotInstalledError, match=r"ZooKeeper jar not found.*`zookeeper` package"):
        find_installation({"PATH": java_dir}, debian_java_dir=tmp_path)
    with pytest.raises(ZooKeeperNotInstalledError, match="ZOOKEEPER_HOME"):
        find_installation({"PATH": java_dir, "ZOOKEEPER_HOME": str(tmp_path)})


def test_zookeeper_home_supplies_every_jar_of_a_release(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    for name in ("lib/zookeeper-3.8.4.jar", "lib/zookeeper-jute-3.8.4.jar", "lib/netty-handler.jar"):
        (tmp_path / name).touch()
    installation = find_installation({"PATH": str(Path(find_java()).parent), "ZOOKEEPER_HOME": str(tmp_path)})
    assert {jar.name for jar in installation.classpath} == {
        "zookeeper-3.8.4.jar",
        "zookeeper-jute-3.8.4.jar",
        "netty-handler.jar",
    }


def find_java() -> str:
    try:
        return str(find_installation().java)
    except ZooKeeperNotInstalledError as error:
        if os.environ.get("ACTORLOG_REQUIRE_ZK"):
            raise
        pytest.skip(str(error))


@pytest.mark.zk
@pytest.mark.integration
def test_second_server_on_a_taken_port_is_refused(zookeeper_server: LocalZooKeeper, tmp_path: Path) -> None:
    clash = LocalZooKeeper(tmp_path / "clash", port=zookeeper_server.port, tick_time_ms=500)
    with pytest.raises(ZooKeeperStartError, match="already in use"):
        clash.start_sync()
    assert not clash.is_running
    assert zookeeper_server.four_letter_word_sync(b"ruok") == b"imok"


@pytest.mark.zk
@pytest.mark.integration
def test_server_that_exits_at_startup_is_reported_with_its_log(
    zookeeper_server: LocalZooKeeper, tmp_path: Path
) -> None:
    del zookeeper_server  # only for its skip/fail rule
    broken = LocalZooKeeper(tmp_path / "broken", extra_config={"tickTime": "not-a-number"})
    with pytest.raises(ZooKeeperStartError, match="exited with status") as raised:
        broken.start_sync()
    assert str(broken.log_path) in str(raised.value)
    assert not broken.is_running


@pytest.mark.asyncio
@pytest.mark.zk
@pytest.mark.integration
async def test_local_zookeeper_serves_and_stops(zookeeper_server: LocalZooKeeper, tmp_path: Path) -> None:
    del zookeeper_server  # only for its skip/fail rule
    server = LocalZooKeeper(tmp_path / "zk", tick_time_ms=500)
    async with server:
        running = server.is_running
        config = server.config_path.read_text().splitlines()
        assert await server.four_letter_word(b"ruok") == b"imok"
    assert (running, server.is_running) == (True, False)
    for line in ("tickTime=500", "admin.enableServer=false", "4lw.commands.whitelist=ruok,srvr,mntr"):
        assert line in config
    assert await server.four_letter_word(b"ruok") == b""
    assert server.log_path.stat().st_size > 0
