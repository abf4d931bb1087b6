"""ZooKeeper closed, against the test session's real ZooKeeper: secure ACLs and four-letter words.

* A broker-side coordinator with ``zookeeper.set.acl=true`` and a digest user creates Kafka's
  persistent paths, a registration, a topic and a sensitive znode. A raw aiozk client that never
  authenticates (anyone who reaches the port) can read the cluster's state but cannot create
  ``/admin/delete_topics/<t>``, nor change, delete or re-ACL what the broker created, nor read
  below ``/config/users``. The server stores the digest id the credential computes.
* The credential is per connection on the server: the adapter must send it again after a
  reconnection on the same session and after an expiry, or its next create is refused.
* The server answers ``ruok``/``srvr``/``mntr`` and refuses every other four-letter word.

Each ACL test uses its own top-level chroot: a secured chroot's parent refuses others' children.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import AsyncIterator
from typing import Any

import aiozk
import pytest
import pytest_asyncio
from aiozk import exc, protocol

from actors.server import zk_data
from ops.local.zookeeper import FOUR_LETTER_WORDS, LocalZooKeeper, _listener_owned_by
from ops.zk_security import zk_security
from runtime.coordination import ANY_VERSION, SessionEvent, SessionState
from runtime.coordination.errors import CoordinationError
from runtime.coordination.zk import ZkCoordinator
from runtime.coordination.zk_auth import DigestCredential, Perm

pytestmark = [pytest.mark.zk, pytest.mark.integration]

WAIT_S = 15.0
USER, PASSWORD = "actorlog", "test-only-zk-password"
SECURE = {
    "zookeeper.set.acl": "true",
    "zookeeper.digest.username": USER,
    "zookeeper.digest.password": PASSWORD,
}
_chroots = itertools.count(1)


@pytest.fixture
def chroot(zookeeper_server: LocalZooKeeper) -> str:
    return f"/actorlog-acl-tests-{os.getpid()}-{next(_chroots)}"


@pytest_asyncio.fixture
async def opened() -> AsyncIterator[list[Any]]:
    """Clients (ZkCoordinators and raw aiozk clients) closed at the end of the test."""
    clients: list[Any] = []
    yield clients
    for client in reversed(clients):
        await client.close()


async def broker_side(
    server: LocalZooKeeper, chroot: str, opened: list[Any], properties: dict[str, str]
) -> ZkCoordinator:
    coordinator = ZkCoordinator(
        server.connect_string + chroot,
        session_timeout_ms=2_000,
        request_timeout_ms=5_000,
        security=zk_security(properties),
    )
    opened.append(coordinator)
    await coordinator.start()
    return coordinator


async def raw_client(server: LocalZooKeeper, opened: list[Any], *, digest: str | None = None) -> Any:
    """An aiozk client with no chroot; authenticated with ``addauth digest`` when ``digest`` is given."""
    client = aiozk.ZKClient(server.connect_string, session_timeout=2)
    await client.start()
    opened.append(client)
    if digest is not None:
        await client.send(protocol.AuthRequest(type=0, scheme="digest", auth=digest.encode()))
    return client


def open_create(path: str) -> Any:
    request = protocol.CreateRequest(path=path, data=b"", acl=[protocol.UNRESTRICTED_ACCESS])
    request.set_flags(ephemeral=False, sequential=False, container=False)
    return request


def acl_of(entries: list[Any]) -> set[tuple[str, str, Perm]]:
    return {(entry.id.scheme, entry.id.id, Perm(entry.perms)) for entry in entries}


async def next_connected(coordinator: ZkCoordinator, *, new_session: bool) -> asyncio.Future[None]:
    """A future done at the next CONNECTED on the same session (or a new one)."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    old = coordinator.session_id

    def on_event(event: SessionEvent) -> None:
        if event.state is SessionState.CONNECTED and (event.session_id != old) == new_session:
            if not done.done():
                done.set_result(None)
            subscription.cancel()

    subscription = coordinator.subscribe(on_event)
    return done


@pytest.mark.asyncio
async def test_outsiders_read_but_cannot_write_what_a_secure_broker_created(
    zookeeper_server: LocalZooKeeper, chroot: str, opened: list[Any]
) -> None:
    broker = await broker_side(zookeeper_server, chroot, opened, SECURE)
    for path in zk_data.PERSISTENT_ZK_PATHS:
        await broker.ensure_path(path)
    await broker.create(zk_data.broker_id_path(1), b"{}", ephemeral=True)
    await broker.ensure_path(zk_data.topic_path("orders"))
    await broker.create("/config/users/alice", b"SCRAM credentials would be here")

    outsider = await raw_client(zookeeper_server, opened)
    assert await outsider.get_children(chroot + zk_data.BROKER_IDS_PATH) == ["1"]
    assert await outsider.get_children(chroot + zk_data.TOPICS_PATH) == ["orders"]
    refused = {
        "create /admin/delete_topics/orders": open_create(chroot + zk_data.delete_topic_path("orders")),
        "create beside the broker's znodes": open_create(chroot + "/evil"),
        "set a topic's data": protocol.SetDataRequest(
            path=chroot + zk_data.topic_path("orders"), data=b"{}", version=ANY_VERSION
        ),
        "delete a registration": protocol.DeleteRequest(
            path=chroot + zk_data.broker_id_path(1), version=ANY_VERSION
        ),
        "open the ACL up": protocol.SetACLRequest(
            path=chroot + zk_data.DELETE_TOPICS_PATH, acl=[protocol.UNRESTRICTED_ACCESS], version=-1
        ),
        "read a user's credentials": protocol.GetDataRequest(
            path=chroot + "/config/users/alice", watch=False
        ),
        "list the users": protocol.GetChildrenRequest(path=chroot + "/config/users", watch=False),
    }
    outcomes = {}
    for name, request in refused.items():
        try:
            await outsider.send(request)
            outcomes[name] = "allowed"
        except exc.NoAuth:
            outcomes[name] = "NoAuth"
    assert outcomes == dict.fromkeys(refused, "NoAuth")
    assert await outsider.exists(chroot + zk_data.delete_topic_path("orders")) is False

    # Kafka's old-consumer path stays open to anyone.
    await outsider.create(chroot + "/consumers/group-1")

    # The stored ids, read as the broker's user (the server shows a digest only to an ADMIN).
    creator = ("digest", DigestCredential(USER, PASSWORD).acl_id, Perm.ALL)
    insider = await raw_client(zookeeper_server, opened, digest=f"{USER}:{PASSWORD}")
    assert acl_of(await insider.get_acl(chroot + zk_data.BROKER_IDS_PATH)) == {
        creator,
        ("world", "anyone", Perm.READ),
    }
    assert acl_of(await insider.get_acl(chroot)) == {creator, ("world", "anyone", Perm.READ)}
    assert acl_of(await insider.get_acl(chroot + "/config/users/alice")) == {creator}
    assert acl_of(await insider.get_acl(chroot + "/config/users")) == {creator}
    assert acl_of(await insider.get_acl(chroot + "/consumers")) == {("world", "anyone", Perm.ALL)}


@pytest.mark.asyncio
async def test_the_credential_is_sent_again_on_every_connection(
    zookeeper_server: LocalZooKeeper, chroot: str, opened: list[Any]
) -> None:
    broker = await broker_side(zookeeper_server, chroot, opened, SECURE)
    await broker.ensure_path(zk_data.BROKER_IDS_PATH)

    reconnected = await next_connected(broker, new_session=False)
    broker.drop_connection()
    await asyncio.wait_for(reconnected, WAIT_S)
    await broker.create(zk_data.broker_id_path(2), ephemeral=True)

    new_session = await next_connected(broker, new_session=True)
    await broker.force_expiry()
    await asyncio.wait_for(new_session, WAIT_S)
    await broker.create(zk_data.broker_id_path(3), ephemeral=True)
    assert await broker.get_children(zk_data.BROKER_IDS_PATH) == ["3"]

    # A broker without the credential is refused, with a message that says why.
    stranger = await broker_side(zookeeper_server, chroot, opened, {})
    with pytest.raises(CoordinationError, match="NoAuth"):
        await stranger.create(zk_data.broker_id_path(4), ephemeral=True)


@pytest.mark.asyncio
async def test_without_set_acl_a_credential_still_authenticates_and_znodes_stay_open(
    zookeeper_server: LocalZooKeeper, chroot: str, opened: list[Any]
) -> None:
    open_broker = await broker_side(
        zookeeper_server, chroot, opened, {k: v for k, v in SECURE.items() if k != "zookeeper.set.acl"}
    )
    await open_broker.ensure_path("/config/users/bob")
    outsider = await raw_client(zookeeper_server, opened)
    assert acl_of(await outsider.get_acl(chroot + "/config/users/bob")) == {("world", "anyone", Perm.ALL)}


def test_only_the_whitelisted_four_letter_words_answer(zookeeper_server: LocalZooKeeper) -> None:
    assert FOUR_LETTER_WORDS == ("ruok", "srvr", "mntr")
    assert zookeeper_server.four_letter_word_sync(b"ruok") == b"imok"
    assert zookeeper_server.four_letter_word_sync(b"srvr").startswith(b"Zookeeper version:")
    assert b"zk_server_state" in zookeeper_server.four_letter_word_sync(b"mntr")
    for word in (b"dump", b"wchc", b"wchp", b"cons", b"conf", b"envi", b"stat", b"crst", b"srst"):
        answer = zookeeper_server.four_letter_word_sync(word)
        assert answer == word + b" is not executed because it is not in the whitelist.\n", answer


def test_our_server_is_told_from_another_by_its_listening_socket(zookeeper_server: LocalZooKeeper) -> None:
    # Readiness no longer reads `conf` (off the whitelist): the port's listener must be our child.
    assert zookeeper_server.pid is not None
    if _listener_owned_by(os.getpid(), zookeeper_server.port) is None:
        pytest.skip("no /proc here: the listener's owner is not checked")
    assert _listener_owned_by(zookeeper_server.pid, zookeeper_server.port) is True
    assert _listener_owned_by(os.getpid(), zookeeper_server.port) is False
    assert _listener_owned_by(zookeeper_server.pid, zookeeper_server.port + 1) is False
