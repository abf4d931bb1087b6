"""Source addresses for fault campaigns: the HTTP transport's ``source_host`` binds its outgoing
connections to one local address (a server sees it as the peer), and a broker takes that address
from ``ACTORLOG_SOURCE_ADDRESS``, refusing at start-up a value it cannot use.

Real HTTP on loopback: the whole 127.0.0.0/8 block is local, so 127.0.0.5 needs no set-up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from ops.broker_main import main as broker_main
from ops.broker_main import source_address_from_env
from ops.properties import ConfigError
from runtime import ActorSystem
from runtime.transport.http import HttpServer, HttpTransport
from tests.support.runtime_actors import EchoActor, Ping, Pong, make_codec

SECRET = "source-address-secret"


@pytest.mark.asyncio
async def test_outgoing_connections_come_from_the_source_host() -> None:
    codec = make_codec()
    peers: list[str | None] = []

    @web.middleware
    async def record_peer(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        peers.append(request.remote)
        return await handler(request)

    addresses: dict[str, str] = {}
    server_side = HttpTransport(codec, secret=SECRET, resolve=addresses.get)
    client_side = HttpTransport(codec, secret=SECRET, resolve=addresses.get, source_host="127.0.0.5")
    server = HttpServer(
        "127.0.0.1", 0, routes=server_side.routes(), max_body_bytes=1 << 20, middlewares=[record_peer]
    )
    await server.start()
    addresses["b"] = server.url
    try:
        async with (
            ActorSystem("a", transport=client_side) as a,
            ActorSystem("b", transport=server_side) as b,
        ):
            echo = b.spawn("echo", EchoActor)
            reply = await a.ask(echo, Ping(sequence=1), timeout_ms=5_000)
    finally:
        await server.stop()
    assert reply == Pong(sequence=1)
    assert peers == ["127.0.0.5"]


def test_a_given_session_cannot_take_a_source_host() -> None:
    class NotASession:
        pass

    with pytest.raises(ValueError, match="source_host"):
        HttpTransport(
            make_codec(),
            secret=SECRET,
            resolve=lambda node: None,
            session=NotASession(),  # type: ignore[arg-type]
            source_host="127.0.0.5",
        )


def test_the_source_address_comes_from_the_environment() -> None:
    assert source_address_from_env({}) is None
    assert source_address_from_env({"ACTORLOG_SOURCE_ADDRESS": ""}) is None
    assert source_address_from_env({"ACTORLOG_SOURCE_ADDRESS": "127.0.0.12"}) == "127.0.0.12"
    with pytest.raises(ConfigError, match="not an IP address"):
        source_address_from_env({"ACTORLOG_SOURCE_ADDRESS": "broker-2"})
    # TEST-NET-1 (RFC 5737): an address no interface of this machine has.
    with pytest.raises(ConfigError, match="cannot be bound"):
        source_address_from_env({"ACTORLOG_SOURCE_ADDRESS": "192.0.2.1"})


def test_broker_start_with_a_bad_source_address_prints_one_line_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "server.properties"
    config.write_text(
        "broker.id=1\nlisteners=HTTP://127.0.0.1:19092\nlog.dirs=/var/lib/actorlog\n"
        "zookeeper.connect=127.0.0.1:2181/actorlog\ninternal.auth.secret=s3cret-s3cret-s3cret\n"
    )
    monkeypatch.setenv("ACTORLOG_SOURCE_ADDRESS", "broker-1")
    assert broker_main(["start", "--config", str(config)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0
    assert error == "actorlog broker: ACTORLOG_SOURCE_ADDRESS='broker-1' is not an IP address"
