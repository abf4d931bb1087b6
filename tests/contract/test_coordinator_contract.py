"""The Coordinator contract: the same tests against MemoryCoordinator and a real ZooKeeper.

Each test gets a ``harness`` (parametrised: ``memory`` and ``zk``) that opens clients (sessions)
on one shared tree (a ``MemoryZooKeeper``, or a unique chroot on the test session's ZooKeeper)
and knows how to force an expiry and a connection loss on that implementation.

Watch events are asynchronous on ZooKeeper and synchronous in the fake, so tests wait for events
with a bounded ``asyncio.wait_for``. To prove that something did NOT happen (one-shot watches), a
test sets a *barrier* watch after the fact and waits for it: ZooKeeper delivers a connection's
events in order, so an extra event would have arrived before the barrier's.

At the end: the session transition table (walked edge by edge) and the fake's own test controls.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Protocol

import pytest
import pytest_asyncio

from runtime.clock import ManualClock
from runtime.coordination import (
    ANY_VERSION,
    VALID_TRANSITIONS,
    BadVersionError,
    CheckOp,
    CheckOpResult,
    ConnectionLossError,
    Coordinator,
    CreateOp,
    CreateOpResult,
    DeleteOp,
    DeleteOpResult,
    MemoryCoordinator,
    MemoryZooKeeper,
    MultiOpError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionClosedError,
    SessionEvent,
    SessionExpiredError,
    SessionState,
    SetDataOp,
    SetDataOpResult,
    WatchEvent,
    WatchEventKind,
)
from runtime.coordination.session import SessionWatchdog
from runtime.coordination.zk import ZkCoordinator

pytestmark = pytest.mark.asyncio

EVENT_TIMEOUT_S = 10.0
ZK_SESSION_TIMEOUT_MS = 2_000


class Recorder:
    """A watch or session callback that records what it receives and lets a test await it."""

    def __init__(self) -> None:
        self.items: list[object] = []
        self._queue: asyncio.Queue[object] = asyncio.Queue()

    def __call__(self, item: object) -> None:
        self.items.append(item)
        self._queue.put_nowait(item)

    async def next(self) -> object:
        return await asyncio.wait_for(self._queue.get(), EVENT_TIMEOUT_S)


class Harness(Protocol):
    async def client(self) -> Coordinator: ...

    async def expire(self, coordinator: Coordinator) -> None:
        """Make the server expire the session; return once a NEW session is CONNECTED."""

    async def interrupt_connection(self, coordinator: Coordinator) -> None:
        """Drop the connection; return once reconnected to the SAME session."""

    async def close(self) -> None: ...


class MemoryHarness:
    def __init__(self) -> None:
        self.server = MemoryZooKeeper()
        self._clients: list[MemoryCoordinator] = []

    async def client(self) -> Coordinator:
        coordinator = MemoryCoordinator(self.server, session_timeout_ms=ZK_SESSION_TIMEOUT_MS)
        await coordinator.start()
        self._clients.append(coordinator)
        return coordinator

    async def expire(self, coordinator: Coordinator) -> None:
        assert isinstance(coordinator, MemoryCoordinator)
        coordinator.expire()

    async def interrupt_connection(self, coordinator: Coordinator) -> None:
        assert isinstance(coordinator, MemoryCoordinator)
        coordinator.disconnect()
        coordinator.reconnect()

    async def close(self) -> None:
        for coordinator in self._clients:
            await coordinator.close()


class ZkHarness:
    def __init__(self, connect_string: str) -> None:
        self.connect_string = connect_string
        self._clients: list[ZkCoordinator] = []

    async def client(self) -> Coordinator:
        coordinator = ZkCoordinator(
            self.connect_string, session_timeout_ms=ZK_SESSION_TIMEOUT_MS, request_timeout_ms=5_000
        )
        self._clients.append(coordinator)
        await coordinator.start()
        return coordinator

    async def expire(self, coordinator: Coordinator) -> None:
        assert isinstance(coordinator, ZkCoordinator)
        new_session = await self._next_connected(coordinator, new_session=True)
        await coordinator.force_expiry()
        await asyncio.wait_for(new_session, EVENT_TIMEOUT_S)

    async def interrupt_connection(self, coordinator: Coordinator) -> None:
        assert isinstance(coordinator, ZkCoordinator)
        reconnected = await self._next_connected(coordinator, new_session=False)
        coordinator.drop_connection()
        await asyncio.wait_for(reconnected, EVENT_TIMEOUT_S)

    @staticmethod
    async def _next_connected(coordinator: Coordinator, *, new_session: bool) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def listener(event: SessionEvent) -> None:
            if event.state is SessionState.CONNECTED and event.is_new_session == new_session:
                subscription.cancel()
                if not future.done():
                    future.set_result(None)

        subscription = coordinator.subscribe(listener)
        return future

    async def close(self) -> None:
        for coordinator in self._clients:
            await coordinator.close()


@pytest_asyncio.fixture(params=["memory", pytest.param("zk", marks=pytest.mark.zk)])
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    implementation: Harness
    if request.param == "memory":
        implementation = MemoryHarness()
    else:
        implementation = ZkHarness(request.getfixturevalue("zk_connect_string"))
    try:
        yield implementation
    finally:
        await implementation.close()


async def barrier(coordinator: Coordinator, path: str = "/barrier") -> None:
    """Wait until every event caused before this call has been delivered to ``coordinator``."""
    recorder = Recorder()
    await coordinator.exists(path, watch=recorder)
    await coordinator.create(path)
    assert await recorder.next() == WatchEvent(path=path, kind=WatchEventKind.NODE_CREATED)
    await coordinator.delete(path, version=ANY_VERSION)


# ------------------------------------------------------------------------- create, get, stat


async def test_create_then_get_returns_data_and_fresh_stat(harness: Harness) -> None:
    client = await harness.client()
    created = await client.create("/node", b"hello")
    data, stat = await client.get("/node")
    assert created.path == "/node"
    assert created.stat == stat
    assert data == b"hello"
    assert (stat.version, stat.cversion, stat.ephemeral_owner, stat.num_children, stat.data_length) == (
        0,
        0,
        0,
        0,
        5,
    )
    assert stat.czxid == stat.mzxid > 0


async def test_create_existing_node_raises_node_exists(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/node")
    with pytest.raises(NodeExistsError) as raised:
        await client.create("/node", b"again")
    assert raised.value.path == "/node"


async def test_create_without_parent_raises_no_node(harness: Harness) -> None:
    client = await harness.client()
    with pytest.raises(NoNodeError):
        await client.create("/missing/child")


async def test_create_under_ephemeral_raises_no_children_for_ephemerals(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/ephemeral", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        await client.create("/ephemeral/child")


async def test_get_missing_raises_no_node_and_exists_returns_none(harness: Harness) -> None:
    client = await harness.client()
    with pytest.raises(NoNodeError) as raised:
        await client.get("/missing")
    assert raised.value.path == "/missing"
    assert await client.exists("/missing") is None


async def test_invalid_paths_are_rejected_before_reaching_the_server(harness: Harness) -> None:
    client = await harness.client()
    for path in ("relative", "/trailing/", "/double//slash", "/dot/./x"):
        with pytest.raises(ValueError, match="znode path"):
            await client.create(path)
    with pytest.raises(ValueError, match="root"):
        await client.delete("/", version=ANY_VERSION)


async def test_ensure_path_creates_persistent_parents_and_is_idempotent(harness: Harness) -> None:
    client = await harness.client()
    await client.ensure_path("/a/b/c")
    await client.ensure_path("/a/b/c")
    stat = await client.exists("/a/b/c")
    assert stat is not None
    assert stat.ephemeral_owner == 0
    assert await client.get_children("/a") == ["b"]


# ----------------------------------------------------------------------- conditional writes


async def test_set_with_current_version_bumps_version_and_mzxid(harness: Harness) -> None:
    client = await harness.client()
    created = await client.create("/node", b"v0")
    stat = await client.set("/node", b"v1", version=0)
    assert stat.version == 1
    assert stat.czxid == created.stat.czxid
    assert stat.mzxid > created.stat.mzxid
    assert (await client.get("/node"))[0] == b"v1"


async def test_set_with_stale_version_raises_bad_version_and_keeps_data(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/node", b"v0")
    await client.set("/node", b"v1", version=0)
    with pytest.raises(BadVersionError) as raised:
        await client.set("/node", b"stale", version=0)
    assert raised.value.path == "/node"
    assert raised.value.expected_version == 0
    data, stat = await client.get("/node")
    assert (data, stat.version) == (b"v1", 1)


async def test_set_with_any_version_always_applies(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/node")
    await client.set("/node", b"a", version=ANY_VERSION)
    stat = await client.set("/node", b"b", version=ANY_VERSION)
    assert stat.version == 2


async def test_set_missing_node_raises_no_node(harness: Harness) -> None:
    client = await harness.client()
    with pytest.raises(NoNodeError):
        await client.set("/missing", b"x", version=ANY_VERSION)


async def test_delete_checks_version_before_children(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/parent")
    await client.create("/parent/child")
    with pytest.raises(BadVersionError):
        await client.delete("/parent", version=7)
    with pytest.raises(NotEmptyError) as raised:
        await client.delete("/parent", version=0)
    assert raised.value.path == "/parent"


async def test_delete_with_current_version_removes_node(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/node")
    await client.set("/node", b"x", version=0)
    with pytest.raises(BadVersionError):
        await client.delete("/node", version=0)
    await client.delete("/node", version=1)
    assert await client.exists("/node") is None
    with pytest.raises(NoNodeError):
        await client.delete("/node", version=ANY_VERSION)


# ------------------------------------------------------------------- children and sequences


async def test_children_are_sorted_and_counted_by_cversion(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/parent")
    for name in ("c", "a", "b"):
        await client.create(f"/parent/{name}")
    await client.delete("/parent/b", version=ANY_VERSION)
    assert await client.get_children("/parent") == ["a", "c"]
    stat = await client.exists("/parent")
    assert stat is not None
    assert (stat.num_children, stat.cversion, stat.version) == (2, 4, 0)
    with pytest.raises(NoNodeError):
        await client.get_children("/missing")


async def test_sequential_names_count_child_creations_zero_padded(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/queue")
    await client.create("/queue/plain")
    await client.delete("/queue/plain", version=ANY_VERSION)
    first = await client.create("/queue/isr_change_", b"1", sequential=True)
    await client.delete(first.path, version=ANY_VERSION)
    second = await client.create("/queue/isr_change_", b"2", sequential=True)
    # Deletions do not advance the counter, although they do advance the reported cversion.
    assert first.path == "/queue/isr_change_0000000001"
    assert second.path == "/queue/isr_change_0000000002"
    assert await client.get_children("/queue") == ["isr_change_0000000002"]
    stat = await client.exists("/queue")
    assert stat is not None
    assert stat.cversion == 5


# ---------------------------------------------------------------------------------- ephemerals


async def test_ephemeral_owner_is_the_session_and_node_goes_with_it(harness: Harness) -> None:
    owner = await harness.client()
    observer = await harness.client()
    created = await owner.create("/broker", b"1", ephemeral=True)
    assert created.stat.ephemeral_owner == owner.session_id != observer.session_id
    gone = Recorder()
    await observer.exists("/broker", watch=gone)
    await owner.close()
    assert await gone.next() == WatchEvent(path="/broker", kind=WatchEventKind.NODE_DELETED)
    assert await observer.exists("/broker") is None


async def test_recreated_ephemeral_gets_a_larger_czxid(harness: Harness) -> None:
    first = await harness.client()
    original = await first.create("/brokers", b"")
    registration = await first.create("/brokers/1", b"", ephemeral=True)
    await first.close()
    second = await harness.client()
    again = await second.create("/brokers/1", b"", ephemeral=True)
    assert again.stat.czxid > registration.stat.czxid > original.stat.czxid


# ------------------------------------------------------------------------------------- multi


async def test_multi_applies_every_op_in_one_transaction(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/controller_epoch", b"0")
    await client.create("/old")
    results = await client.multi(
        [
            CheckOp(path="/controller_epoch", version=0),
            CreateOp(path="/controller", data=b"1", ephemeral=True),
            SetDataOp(path="/controller_epoch", data=b"1", version=0),
            DeleteOp(path="/old", version=0),
            CreateOp(path="/seq-", sequential=True),
        ]
    )
    assert results[0] == CheckOpResult(path="/controller_epoch")
    assert results[1] == CreateOpResult(path="/controller")
    assert isinstance(results[2], SetDataOpResult)
    assert results[2].stat.version == 1
    assert results[3] == DeleteOpResult(path="/old")
    assert isinstance(results[4], CreateOpResult)
    assert results[4].path.startswith("/seq-")
    controller = await client.exists("/controller")
    sequential = await client.exists(results[4].path)
    assert controller is not None
    assert sequential is not None
    assert controller.ephemeral_owner == client.session_id
    assert controller.czxid == sequential.czxid == results[2].stat.mzxid
    assert await client.exists("/old") is None


async def test_multi_ops_see_the_effects_of_earlier_ops(harness: Harness) -> None:
    client = await harness.client()
    await client.multi(
        [
            CreateOp(path="/topic"),
            CreateOp(path="/topic/partitions"),
            SetDataOp(path="/topic", data=b"assignment", version=0),
        ]
    )
    assert await client.get_children("/topic") == ["partitions"]
    assert (await client.get("/topic"))[0] == b"assignment"


async def test_failing_op_aborts_the_whole_multi(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/controller_epoch", b"4")
    await client.set("/controller_epoch", b"5", version=0)
    with pytest.raises(MultiOpError) as raised:
        await client.multi(
            [
                CreateOp(path="/controller", data=b"2", ephemeral=True),
                SetDataOp(path="/controller_epoch", data=b"6", version=1),
                CheckOp(path="/controller_epoch", version=0),  # stale: a newer controller won
                CreateOp(path="/never"),
            ]
        )
    assert raised.value.index == 2
    assert raised.value.op == CheckOp(path="/controller_epoch", version=0)
    assert isinstance(raised.value.cause, BadVersionError)
    assert await client.exists("/controller") is None
    assert await client.exists("/never") is None
    data, stat = await client.get("/controller_epoch")
    assert (data, stat.version) == (b"5", 1)


async def test_multi_reports_each_kind_of_failure(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/parent")
    await client.create("/parent/child")
    cases: list[tuple[CreateOp | DeleteOp | SetDataOp, type[Exception]]] = [
        (CreateOp(path="/parent"), NodeExistsError),
        (CreateOp(path="/missing/child"), NoNodeError),
        (DeleteOp(path="/parent", version=ANY_VERSION), NotEmptyError),
        (SetDataOp(path="/missing", data=b"", version=ANY_VERSION), NoNodeError),
    ]
    for op, error in cases:
        with pytest.raises(MultiOpError) as raised:
            await client.multi([CreateOp(path="/first"), op])
        assert (raised.value.index, type(raised.value.cause)) == (1, error)
        assert await client.exists("/first") is None


# ------------------------------------------------------------------------------------ watches


async def test_get_watch_fires_once_on_data_change(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/node", b"0")
    watch = Recorder()
    await client.get("/node", watch=watch)
    await client.set("/node", b"1", version=ANY_VERSION)
    assert await watch.next() == WatchEvent(path="/node", kind=WatchEventKind.DATA_CHANGED)
    await client.set("/node", b"2", version=ANY_VERSION)
    await barrier(client)
    assert len(watch.items) == 1


async def test_get_watch_fires_on_delete(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/node")
    watch = Recorder()
    await client.get("/node", watch=watch)
    await client.delete("/node", version=ANY_VERSION)
    assert await watch.next() == WatchEvent(path="/node", kind=WatchEventKind.NODE_DELETED)


async def test_exists_watch_on_missing_node_fires_on_creation(harness: Harness) -> None:
    watcher = await harness.client()
    writer = await harness.client()
    watch = Recorder()
    assert await watcher.exists("/controller", watch=watch) is None
    await writer.create("/controller", b"1", ephemeral=True)
    assert await watch.next() == WatchEvent(path="/controller", kind=WatchEventKind.NODE_CREATED)


async def test_exists_watch_on_existing_node_fires_on_change_then_needs_rearming(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/node")
    watch = Recorder()
    assert await client.exists("/node", watch=watch) is not None
    await client.set("/node", b"x", version=ANY_VERSION)
    assert await watch.next() == WatchEvent(path="/node", kind=WatchEventKind.DATA_CHANGED)
    await client.exists("/node", watch=watch)
    await client.delete("/node", version=ANY_VERSION)
    assert await watch.next() == WatchEvent(path="/node", kind=WatchEventKind.NODE_DELETED)
    await client.create("/node")
    await barrier(client)
    assert len(watch.items) == 2


async def test_children_watch_fires_on_child_change_and_on_delete(harness: Harness) -> None:
    client = await harness.client()
    await client.create("/ids")
    watch = Recorder()
    assert await client.get_children("/ids", watch=watch) == []
    await client.create("/ids/1", ephemeral=True)
    assert await watch.next() == WatchEvent(path="/ids", kind=WatchEventKind.CHILDREN_CHANGED)
    await client.get_children("/ids", watch=watch)
    await client.set("/ids", b"data changes do not count", version=ANY_VERSION)
    await client.delete("/ids/1", version=ANY_VERSION)
    assert await watch.next() == WatchEvent(path="/ids", kind=WatchEventKind.CHILDREN_CHANGED)
    await client.get_children("/ids", watch=watch)
    await client.delete("/ids", version=ANY_VERSION)
    assert await watch.next() == WatchEvent(path="/ids", kind=WatchEventKind.NODE_DELETED)
    await barrier(client)
    assert len(watch.items) == 3


async def test_failed_get_registers_no_watch(harness: Harness) -> None:
    client = await harness.client()
    watch = Recorder()
    with pytest.raises(NoNodeError):
        await client.get("/node", watch=watch)
    with pytest.raises(NoNodeError):
        await client.get_children("/node", watch=watch)
    await client.create("/node")
    await client.create("/node/child")
    await barrier(client)
    assert watch.items == []


async def test_watches_fire_for_changes_by_other_sessions_and_multis(harness: Harness) -> None:
    watcher = await harness.client()
    writer = await harness.client()
    await writer.create("/state", b"0")
    watch = Recorder()
    await watcher.get("/state", watch=watch)
    with pytest.raises(MultiOpError):
        await writer.multi(
            [SetDataOp(path="/state", data=b"x", version=0), CheckOp(path="/state", version=9)]
        )
    await writer.multi([CheckOp(path="/state", version=0), SetDataOp(path="/state", data=b"1", version=0)])
    assert await watch.next() == WatchEvent(path="/state", kind=WatchEventKind.DATA_CHANGED)
    await barrier(watcher)
    assert len(watch.items) == 1


# ---------------------------------------------------------------------------------- sessions


async def test_fresh_client_is_connected_and_counts_one_sync_connect(harness: Harness) -> None:
    client = await harness.client()
    stats = client.statistics()
    assert client.session_state is SessionState.CONNECTED
    assert client.session_id is not None
    assert stats.session_id == client.session_id
    assert (stats.sync_connects_total, stats.expires_total, stats.disconnects_total) == (1, 0, 0)


async def test_closed_client_refuses_calls(harness: Harness) -> None:
    client = await harness.client()
    events = Recorder()
    client.subscribe(events)
    session = client.session_id
    await client.close()
    assert client.session_state is SessionState.CLOSED
    assert client.session_id is None
    assert events.items == [
        SessionEvent(state=SessionState.CLOSED, previous=SessionState.CONNECTED, session_id=session)
    ]
    with pytest.raises(SessionClosedError):
        await client.get("/")
    with pytest.raises(SessionClosedError):
        await client.start()
    await client.close()  # idempotent
    assert isinstance(SessionClosedError("get", "/"), SessionExpiredError)


async def test_expiry_deletes_ephemerals_drops_watches_and_starts_a_new_session(harness: Harness) -> None:
    client = await harness.client()
    observer = await harness.client()
    old_session = client.session_id
    await client.create("/brokers")
    await client.create("/brokers/1", ephemeral=True)
    own_watch = Recorder()
    await client.exists("/brokers/2", watch=own_watch)
    observed = Recorder()
    await observer.exists("/brokers/1", watch=observed)
    events = Recorder()
    client.subscribe(events)

    await harness.expire(client)

    assert await observed.next() == WatchEvent(path="/brokers/1", kind=WatchEventKind.NODE_DELETED)
    states = [event.state for event in events.items if isinstance(event, SessionEvent)]
    # ZooKeeper shows the dropped connection first; the fake expires a connected client directly.
    assert [state for state in states if state is not SessionState.SUSPENDED] == [
        SessionState.LOST,
        SessionState.CONNECTED,
    ]
    last = events.items[-1]
    assert isinstance(last, SessionEvent)
    assert last.is_new_session
    assert last.session_id == client.session_id != old_session
    assert await client.exists("/brokers/1") is None
    await observer.create("/brokers/2", ephemeral=True)
    await barrier(client)
    assert own_watch.items == []  # the old session's watch died with it
    stats = client.statistics()
    assert (stats.expires_total, stats.sync_connects_total, stats.disconnects_total) == (1, 2, 1)


async def test_watch_survives_a_connection_loss_on_the_same_session(harness: Harness) -> None:
    client = await harness.client()
    writer = await harness.client()
    await writer.create("/node", b"0")
    await client.create("/mine", ephemeral=True)
    watch = Recorder()
    await client.get("/node", watch=watch)
    session = client.session_id

    await harness.interrupt_connection(client)

    assert client.session_id == session
    assert await client.exists("/mine") is not None
    await barrier(client)
    assert watch.items == []  # re-arming the watch did not fire it
    await writer.set("/node", b"1", version=ANY_VERSION)
    assert await watch.next() == WatchEvent(path="/node", kind=WatchEventKind.DATA_CHANGED)
    stats = client.statistics()
    assert (stats.disconnects_total, stats.sync_connects_total, stats.expires_total) == (1, 2, 0)


# --------------------------------------------------------------------- session state machine


async def test_session_transition_table_allows_exactly_its_edges() -> None:
    for source in SessionState:
        for target in SessionState:
            watchdog = SessionWatchdog()
            path = {
                SessionState.LOST: [],
                SessionState.CONNECTED: [SessionState.CONNECTED],
                SessionState.SUSPENDED: [SessionState.CONNECTED, SessionState.SUSPENDED],
                SessionState.CLOSED: [SessionState.CLOSED],
            }[source]
            for step in path:
                watchdog.transition(step, 1)
            assert watchdog.state is source
            if target in VALID_TRANSITIONS[source]:
                event = watchdog.transition(target, 2)
                assert (event.previous, event.state) == (source, target)
            else:
                with pytest.raises(AssertionError, match=f"{source.name} -> {target.name}"):
                    watchdog.transition(target, 2)


async def test_session_listener_that_raises_does_not_stop_the_others() -> None:
    watchdog = SessionWatchdog()
    received: list[SessionEvent] = []

    def broken(event: SessionEvent) -> None:
        raise RuntimeError("broken listener")

    watchdog.subscribe(broken)
    subscription = watchdog.subscribe(received.append)
    watchdog.transition(SessionState.CONNECTED, 7)
    subscription.cancel()
    subscription.cancel()
    watchdog.transition(SessionState.LOST, None)
    assert received == [SessionEvent(state=SessionState.CONNECTED, previous=SessionState.LOST, session_id=7)]
    assert watchdog.expires_total == 1


# --------------------------------------------------------------------- the fake's test controls


async def test_memory_calls_while_suspended_fail_fast_with_connection_loss() -> None:
    client = MemoryCoordinator(MemoryZooKeeper())
    await client.start()
    client.disconnect()
    with pytest.raises(ConnectionLossError):
        await client.exists("/")
    client.reconnect()
    assert await client.exists("/") is not None


async def test_memory_events_during_a_disconnection_arrive_on_reconnection() -> None:
    server = MemoryZooKeeper()
    client, writer = MemoryCoordinator(server), MemoryCoordinator(server)
    await client.start()
    await writer.start()
    await writer.create("/node")
    watch = Recorder()
    await client.get("/node", watch=watch)
    client.disconnect()
    await writer.set("/node", b"x", version=ANY_VERSION)
    assert watch.items == []
    client.reconnect()
    assert watch.items == [WatchEvent(path="/node", kind=WatchEventKind.DATA_CHANGED)]


async def test_memory_disconnected_session_expires_after_its_timeout_in_virtual_time() -> None:
    clock = ManualClock()
    server = MemoryZooKeeper(clock=clock)
    client = MemoryCoordinator(server, session_timeout_ms=6_000)
    observer = MemoryCoordinator(server)
    await client.start()
    await observer.start()
    await client.create("/broker", ephemeral=True)
    events = Recorder()
    client.subscribe(events)
    client.disconnect()
    clock.advance(5_999)
    assert await observer.exists("/broker") is not None
    clock.advance(1)
    assert await observer.exists("/broker") is None  # the server expired it...
    assert client.session_state is SessionState.SUSPENDED  # ...but the client learns on reconnection
    old_session = client.session_id
    client.reconnect()
    assert [(e.previous, e.state) for e in events.items if isinstance(e, SessionEvent)] == [
        (SessionState.CONNECTED, SessionState.SUSPENDED),
        (SessionState.SUSPENDED, SessionState.LOST),
        (SessionState.LOST, SessionState.CONNECTED),
    ]
    assert client.session_id != old_session


async def test_memory_reconnect_in_time_keeps_the_session() -> None:
    clock = ManualClock()
    server = MemoryZooKeeper(clock=clock)
    client = MemoryCoordinator(server, session_timeout_ms=6_000)
    await client.start()
    await client.create("/broker", ephemeral=True)
    session = client.session_id
    client.disconnect()
    clock.advance(5_000)
    client.reconnect()
    clock.advance(60_000)
    assert client.session_id == session
    assert await client.exists("/broker") is not None


async def test_memory_expire_without_reconnect_leaves_the_client_lost() -> None:
    client = MemoryCoordinator(MemoryZooKeeper())
    await client.start()
    client.expire(reconnect=False)
    after_expiry = client.session_state
    with pytest.raises(SessionExpiredError):
        await client.get("/")
    client.reconnect()
    after_reconnect = client.session_state
    assert (after_expiry, after_reconnect) == (SessionState.LOST, SessionState.CONNECTED)
