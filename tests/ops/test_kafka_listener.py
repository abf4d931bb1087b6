"""The Kafka listener in one process: frames, authentication and answer order, over real sockets.

The listener (``ops/kafka/server.py``) runs on a loopback port with a real user store (over the
in-memory ZooKeeper) and stub APIs that record what reached them; requests are written and answers
read by hand with kafka-python's ``kafka.protocol`` (the oracle), so every byte is the client's. A
closed connection is seen as the end of the stream, never as a broken listener: after each bad input
a fresh connection is served.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import struct
import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from ops.kafka import codec as k
from ops.kafka.apis import CloseConnection, KafkaApis, api_versions_response
from ops.kafka.server import SASL_MAX_RECEIVE_BYTES, KafkaListener
from ops.security.users import UserStore
from runtime.clock import LoopClock
from runtime.coordination import MemoryCoordinator
from runtime.coordination.memory_server import MemoryZooKeeper

with warnings.catch_warnings():
    # kafka-python 3.0 loads its protocol schemas with the deprecated importlib.resources.read_text.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest as KpApiVersionsRequest
    from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KpApiVersionsResponse
    from kafka.protocol.metadata.metadata import MetadataRequest as KpMetadataRequest
    from kafka.protocol.metadata.metadata import MetadataResponse as KpMetadataResponse
    from kafka.protocol.producer import ProduceRequest as KpProduceRequest
    from kafka.protocol.sasl import SaslAuthenticateRequest as KpSaslAuthenticate
    from kafka.protocol.sasl import SaslAuthenticateResponse as KpSaslAuthenticateResponse
    from kafka.protocol.sasl import SaslHandshakeRequest as KpSaslHandshake
    from kafka.protocol.sasl import SaslHandshakeResponse as KpSaslHandshakeResponse

pytestmark = pytest.mark.asyncio

USER, PASSWORD = "alice", "alice-secret"
MAX_REQUEST_BYTES = 64 * 1024


class StubApis(KafkaApis):
    """Answers Metadata with no brokers and no topics, in an order the test decides: a request
    whose client id is ``hold-N`` waits until ``release(N)``; a Produce with acks=0 is not answered."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str]] = []  # (correlation id, user), in the order handled
        self.gates: dict[str, asyncio.Event] = {}

    def release(self, name: str) -> None:
        self.gates.setdefault(name, asyncio.Event()).set()

    async def handle(self, header: k.RequestHeader, request: k.Request, user: str) -> k.Response | None:
        self.seen.append((header.correlation_id, user))
        if header.client_id and header.client_id.startswith("hold-"):
            await self.gates.setdefault(header.client_id, asyncio.Event()).wait()
        if isinstance(request, k.ProduceRequest):
            if request.acks == 0:
                return None
            raise CloseConnection("this stub takes no produce with acks != 0")
        if isinstance(request, k.ApiVersionsRequest):
            return api_versions_response()
        return k.MetadataResponse(
            throttle_time=k.duration(0), brokers=(), cluster_id="c", controller_id=k.BrokerId(1), topics=()
        )


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation = 0

    def send(self, request: Any, *, client_id: str | None = "test") -> int:
        self.correlation += 1
        request.with_header(correlation_id=self.correlation, client_id=client_id)
        self.writer.write(bytes(request.encode(header=True, framed=True)))
        return self.correlation

    def send_raw(self, frame: bytes) -> None:
        self.writer.write(frame)

    async def answer(self, response_class: Any, version: int) -> Any:
        return response_class.decode(await self.frame(), version=version, header=True)

    async def frame(self) -> bytes:
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        return await self.reader.readexactly(size)

    async def closed(self) -> bool:
        """True when the listener has closed the connection (it sends nothing more)."""
        return await asyncio.wait_for(self.reader.read(1), timeout=10) == b""

    async def authenticate_plain(self, password: str = PASSWORD, *, handshake: int = 1) -> Any:
        self.send(KpSaslHandshake[handshake](mechanism="PLAIN"))
        answer = await self.answer(KpSaslHandshakeResponse, handshake)
        assert answer.error_code == 0
        assert list(answer.mechanisms) == ["SCRAM-SHA-256", "PLAIN"]
        token = f"\0{USER}\0{password}".encode()
        if handshake == 0:
            self.send_raw(struct.pack(">i", len(token)) + token)
            return await self.frame()
        self.send(KpSaslAuthenticate[1](auth_bytes=token))
        return await self.answer(KpSaslAuthenticateResponse, 1)


@pytest_asyncio.fixture
async def served() -> AsyncIterator[tuple[KafkaListener, StubApis]]:
    coordinator = MemoryCoordinator(MemoryZooKeeper())
    await coordinator.start()
    users = UserStore(coordinator, clock=LoopClock())
    await users.upsert(USER, PASSWORD)
    apis = StubApis()
    listener = KafkaListener(
        "127.0.0.1", 0, apis=lambda: apis, users=users, max_request_bytes=MAX_REQUEST_BYTES
    )
    await listener.start()
    try:
        yield listener, apis
    finally:
        await listener.stop()
        await coordinator.close()


@pytest_asyncio.fixture
async def connect(served: tuple[KafkaListener, StubApis]) -> AsyncIterator[Any]:
    listener, _ = served
    opened: list[Client] = []

    async def open_one() -> Client:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        opened.append(Client(reader, writer))
        return opened[-1]

    yield open_one
    for client in opened:
        client.writer.close()


async def test_api_versions_before_authentication_and_the_kip_511_fallback(connect: Any) -> None:
    client = await connect()
    client.send(KpApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    fallback = await client.answer(KpApiVersionsResponse, 0)
    assert fallback.error_code == 35  # UNSUPPORTED_VERSION, in the v0 format
    client.send(KpApiVersionsRequest[2]())
    answer = await client.answer(KpApiVersionsResponse, 2)
    assert answer.error_code == 0
    offered = {v.api_key: (v.min_version, v.max_version) for v in answer.api_keys}
    assert offered == dict(k.API_VERSIONS)
    assert offered[0] == (3, 7)
    assert offered[1] == (4, 11)
    assert 10 not in offered  # no FindCoordinator: groups are not served, so not advertised


async def test_plain_authentication_then_requests_are_served_as_that_user(
    connect: Any, served: tuple[KafkaListener, StubApis], caplog: pytest.LogCaptureFixture
) -> None:
    listener, apis = served
    client = await connect()
    caplog.set_level("INFO", logger="actorlog.kafka")
    answer = await client.authenticate_plain()
    assert (answer.error_code, answer.session_lifetime_ms) == (0, 0)
    correlation = client.send(KpMetadataRequest[5](topics=None, allow_auto_topic_creation=False))
    metadata = await client.answer(KpMetadataResponse, 5)
    assert metadata.header.correlation_id == correlation
    assert apis.seen == [(correlation, USER)]
    assert f"authenticated as user {USER!r} (PLAIN)" in caplog.text
    assert listener.statistics().authenticated_total == 1


async def test_scram_sha_256_authentication(connect: Any, served: tuple[KafkaListener, StubApis]) -> None:
    _, apis = served
    client = await connect()
    client.send(KpSaslHandshake[1](mechanism="SCRAM-SHA-256"))
    assert (await client.answer(KpSaslHandshakeResponse, 1)).error_code == 0
    first_bare = "n=alice,r=client-nonce"
    client.send(KpSaslAuthenticate[1](auth_bytes=f"n,,{first_bare}".encode()))
    server_first = (await client.answer(KpSaslAuthenticateResponse, 1)).auth_bytes.decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    assert fields["r"].startswith("client-nonce")
    salted = hashlib.pbkdf2_hmac("sha256", PASSWORD.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth_message, "sha256")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    client.send(KpSaslAuthenticate[1](auth_bytes=f"{without_proof},p={proof}".encode()))
    final = await client.answer(KpSaslAuthenticateResponse, 1)
    assert final.error_code == 0
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    assert final.auth_bytes == b"v=" + base64.b64encode(hmac.digest(server_key, auth_message, "sha256"))
    client.send(KpMetadataRequest[1](topics=None))
    await client.answer(KpMetadataResponse, 1)
    assert [user for _, user in apis.seen] == [USER]


async def test_a_wrong_password_is_answered_then_closed(
    connect: Any, served: tuple[KafkaListener, StubApis]
) -> None:
    listener, apis = served
    client = await connect()
    answer = await client.authenticate_plain("wrong")
    assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
    assert "invalid credentials" in answer.error_message
    assert await client.closed()
    assert apis.seen == []
    assert listener.statistics().authentication_failures_total == 1


async def test_a_v0_handshake_takes_raw_sasl_tokens(
    connect: Any, served: tuple[KafkaListener, StubApis]
) -> None:
    _, apis = served
    client = await connect()
    assert await client.authenticate_plain(handshake=0) == b""  # PLAIN's empty answer, unframed
    client.send(KpMetadataRequest[0](topics=[]))
    await client.answer(KpMetadataResponse, 0)
    assert len(apis.seen) == 1


async def test_an_unsupported_mechanism_is_answered_then_closed(connect: Any) -> None:
    client = await connect()
    client.send(KpSaslHandshake[1](mechanism="GSSAPI"))
    answer = await client.answer(KpSaslHandshakeResponse, 1)
    assert answer.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
    assert list(answer.mechanisms) == ["SCRAM-SHA-256", "PLAIN"]
    assert await client.closed()


@pytest.mark.parametrize("first", ["metadata", "authenticate-first"])
async def test_a_request_before_authentication_closes_the_connection(
    connect: Any, served: tuple[KafkaListener, StubApis], first: str
) -> None:
    _, apis = served
    client = await connect()
    if first == "metadata":
        client.send(KpMetadataRequest[5](topics=None, allow_auto_topic_creation=True))
    else:
        client.send(KpSaslAuthenticate[1](auth_bytes=b"\0alice\0alice-secret"))
    assert await client.closed()
    assert apis.seen == []
    await (await connect()).authenticate_plain()  # the listener serves the next connection


@pytest.mark.parametrize(
    ("frame", "authenticated"),
    [
        (struct.pack(">i", MAX_REQUEST_BYTES + 1), True),  # larger than socket.request.max.bytes
        (struct.pack(">i", SASL_MAX_RECEIVE_BYTES + 1), False),  # too large before authentication
        (struct.pack(">i", -5), True),
        (struct.pack(">i", 3) + b"\x00\x03\x00", True),  # no room for a header
        (struct.pack(">i", 40) + bytes(range(40)), True),  # garbage of the right length
        (struct.pack(">ihhih", 10, 3, 5, 1, -1), True),  # a Metadata v5 body that is not there
        (struct.pack(">ihhih", 10, 10, 0, 1, -1), True),  # FindCoordinator: not served
        (struct.pack(">ihhih", 10, 3, 9, 1, -1), True),  # Metadata v9: not served
        (struct.pack(">ihhih", 10, 999, 0, 1, -1), True),  # no such API
    ],
)
async def test_bad_frames_close_the_connection_and_nothing_is_handled(
    connect: Any, served: tuple[KafkaListener, StubApis], frame: bytes, authenticated: bool
) -> None:
    listener, apis = served
    client = await connect()
    if authenticated:
        await client.authenticate_plain()
    client.send_raw(frame)
    assert await client.closed()
    assert apis.seen == []
    assert listener.statistics().closed_for_bad_requests_total == 1
    again = await connect()
    await again.authenticate_plain()
    again.send(KpMetadataRequest[5](topics=None, allow_auto_topic_creation=False))
    await again.answer(KpMetadataResponse, 5)


async def test_a_truncated_frame_is_a_closed_connection(
    connect: Any, served: tuple[KafkaListener, StubApis]
) -> None:
    listener, apis = served
    client = await connect()
    await client.authenticate_plain()
    client.send_raw(struct.pack(">i", 100) + b"\x00\x03\x00\x05")
    client.writer.write_eof()
    assert await client.closed()
    assert apis.seen == []
    assert listener.statistics().connections_total == 1


async def test_pipelined_requests_are_started_in_order_and_answered_in_order(
    connect: Any, served: tuple[KafkaListener, StubApis]
) -> None:
    _, apis = served
    client = await connect()
    await client.authenticate_plain()
    sent = [
        client.send(KpMetadataRequest[5](topics=None, allow_auto_topic_creation=False), client_id=f"hold-{n}")
        for n in range(5)
    ]
    sent.append(client.send(KpApiVersionsRequest[3](client_software_name="t", client_software_version="1")))
    # The last of the five is released first, the first last: the answers still come in order.
    for n in reversed(range(5)):
        apis.release(f"hold-{n}")
    answers = [(await client.answer(KpMetadataResponse, 5)).header.correlation_id for _ in range(5)]
    fallback = await client.answer(KpApiVersionsResponse, 0)
    assert answers == sent[:5]
    assert fallback.header.correlation_id == sent[5]
    assert [correlation for correlation, _ in apis.seen] == sent[:5]


async def test_an_unanswered_produce_keeps_the_order_of_the_rest(
    connect: Any, served: tuple[KafkaListener, StubApis]
) -> None:
    _, apis = served
    client = await connect()
    await client.authenticate_plain()
    client.send(KpProduceRequest[7](transactional_id=None, acks=0, timeout_ms=100, topic_data=[]))
    after = client.send(KpMetadataRequest[5](topics=None, allow_auto_topic_creation=False))
    assert (await client.answer(KpMetadataResponse, 5)).header.correlation_id == after
    assert len(apis.seen) == 2


async def test_a_request_the_apis_refuse_closes_only_that_connection(
    connect: Any, served: tuple[KafkaListener, StubApis]
) -> None:
    client = await connect()
    await client.authenticate_plain()
    client.send(KpProduceRequest[7](transactional_id=None, acks=-1, timeout_ms=100, topic_data=[]))
    assert await client.closed()
    other = await connect()
    await other.authenticate_plain()


async def test_a_listener_without_a_node_closes_connections(connect: Any) -> None:
    coordinator = MemoryCoordinator(MemoryZooKeeper())
    await coordinator.start()
    listener = KafkaListener(
        "127.0.0.1", 0, apis=lambda: None, users=UserStore(coordinator, clock=LoopClock())
    )
    await listener.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        assert await asyncio.wait_for(reader.read(1), timeout=10) == b""
        writer.close()
    finally:
        await listener.stop()
        await coordinator.close()
