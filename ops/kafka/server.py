"""The Kafka listener: an asyncio TCP server speaking Kafka's binary protocol to clients.

What this module owns: connections, frames and their order, and who is on the other end. Each
request is a size-prefixed frame (``int32`` size, then the request); the codec (``codec.py``) reads
it, the APIs (``apis.py``) answer it, and the answer goes back as a size-prefixed frame.

Rules kept:

* **Frames are bounded.** A size above ``socket.request.max.bytes`` (Kafka's default 104857600), or
  above 524288 before the connection has authenticated (Kafka's ``sasl.server.max.receive.size``),
  or a negative one, closes the connection before the body is read. So does a frame the codec cannot
  read, and a request for an API or version not served (only ApiVersions is answered, in the v0
  format, KIP-511). Nothing of such a frame reaches an actor, and the broker carries on.
* **TLS when asked** (``security.protocol=SASL_SSL``): given a server context (the broker's
  keystore, ``ops/tls.py``), the listener speaks TLS only and a connection exists for it once the
  handshake is done. A client that speaks plain text, or does not trust the certificate, fails the
  handshake: its connection is closed and nothing of it is read as a frame (asyncio logs the
  failure at debug level only). The rest is the same over TLS as without it.
* **Authentication first** (``SASL_PLAINTEXT`` or ``SASL_SSL``). Until a client user has
  authenticated, a connection gets ApiVersions and SaslHandshake, then SaslAuthenticate (or, after a
  v0 handshake, raw SASL tokens); any other request closes it, as a failed authentication does (after
  its SASL_AUTHENTICATION_FAILED answer). Mechanisms: SCRAM-SHA-256 and PLAIN, against the client
  users in ZooKeeper (``ops/security/sasl.py``); the broker identity is not a credential here. The user
  name of each authenticated connection is logged. A user store that cannot be read closes the
  connection: the client tries again, rather than taking it for a wrong password.
* **Answers in request order.** Requests on one connection are read while earlier ones are served
  (pipelining: an idempotent producer keeps up to five in flight) and answered in the order they
  came. Each starts, in arrival order, as a task, so the actors see them in that order too. At most
  ``MAX_IN_FLIGHT`` wait per connection; beyond that the connection is not read until the oldest is
  answered (TCP pushes back on the client).
* **Every task belongs to the listener**: connections and their requests are cancelled when it
  stops, and a failure in one connection ends that connection only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final

from ops.kafka import codec as k
from ops.kafka.apis import CloseConnection, KafkaApis, api_versions_response
from ops.security.sasl import SUPPORTED_MECHANISMS, SaslFailure, SaslServer, new_decoy_key, new_sasl_server
from ops.security.users import UserStore
from runtime.errors import CoordinationError

__all__ = ["MAX_IN_FLIGHT", "SASL_MAX_RECEIVE_BYTES", "KafkaListener"]

_log = logging.getLogger("actorlog.kafka")

MAX_IN_FLIGHT: Final = 32
SASL_MAX_RECEIVE_BYTES: Final = 524_288  # Kafka's sasl.server.max.receive.size
_SIZE: Final = struct.Struct(">i")
_SASL_AUTHENTICATION_FAILED: Final = 58
_UNSUPPORTED_SASL_MECHANISM: Final = 33


class _Closed(Exception):
    """The connection is done (the peer left, or a rule says close)."""


@dataclass(frozen=True, slots=True)
class ListenerStatistics:
    connections_total: int
    authenticated_total: int
    authentication_failures_total: int
    closed_for_bad_requests_total: int


class KafkaListener:
    """``KAFKA://host:port``: serves the APIs of whatever node ``apis()`` returns (None while the
    node starts: connections are then closed at once, and clients retry); over TLS with
    ``ssl_context`` (SASL_SSL)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        apis: Callable[[], KafkaApis | None],
        users: UserStore,
        max_request_bytes: int = 104_857_600,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._apis = apis
        self._users = users
        self._max_request_bytes = max_request_bytes
        self._ssl_context = ssl_context
        self._decoy_key = new_decoy_key()
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.connections_total = 0
        self.authenticated_total = 0
        self.authentication_failures_total = 0
        self.closed_for_bad_requests_total = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port, ssl=self._ssl_context)
        sockets = self._server.sockets
        if sockets and self.port == 0:
            self.port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections))
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def security_protocol(self) -> str:
        """Kafka's name for what this listener speaks."""
        return "SASL_SSL" if self._ssl_context is not None else "SASL_PLAINTEXT"

    def statistics(self) -> ListenerStatistics:
        return ListenerStatistics(
            self.connections_total,
            self.authenticated_total,
            self.authentication_failures_total,
            self.closed_for_bad_requests_total,
        )

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.connections_total += 1
        peer = writer.get_extra_info("peername")
        connection = _Connection(self, reader, writer, f"{peer[0]}:{peer[1]}" if peer else "?")
        try:
            await connection.run()
        except _Closed as closed:
            if str(closed):
                _log.info("Kafka connection from %s closed: %s", connection.peer, closed)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:  # noqa: BLE001 - logged with its traceback; see below
            # One connection's failure is that connection's: the listener and the broker go on.
            _log.exception("Kafka connection from %s failed", connection.peer)
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()


class _Connection:
    def __init__(
        self, listener: KafkaListener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        self.listener = listener
        self.reader = reader
        self.writer = writer
        self.peer = peer
        self.user: str | None = None
        self.sasl: SaslServer | None = None
        self.raw_tokens = False  # after a SaslHandshake v0: SASL tokens without Kafka framing

    async def run(self) -> None:
        apis = self.listener._apis()
        if apis is None:
            raise _Closed("the broker is starting")
        while self.user is None:
            await self._authenticate_step(await self._read_frame(SASL_MAX_RECEIVE_BYTES))
        self.listener.authenticated_total += 1
        mechanism = self.sasl.mechanism if self.sasl is not None else "?"
        _log.info("Kafka connection from %s authenticated as user %r (%s)", self.peer, self.user, mechanism)
        await self._serve(apis, self.user)

    # ----------------------------------------------------------------------------- frames

    async def _read_frame(self, limit: int) -> bytes:
        try:
            (size,) = _SIZE.unpack(await self.reader.readexactly(_SIZE.size))
        except asyncio.IncompleteReadError:
            raise _Closed("") from None
        if size < 0 or size > limit:
            self.listener.closed_for_bad_requests_total += 1
            raise _Closed(f"a frame of {size} bytes (the limit is {limit})")
        try:
            return await self.reader.readexactly(size)
        except asyncio.IncompleteReadError:
            raise _Closed("the frame ended early") from None

    async def _write(self, frame: bytes) -> None:
        self.writer.write(frame)
        await self.writer.drain()

    def _refuse(self, reason: str) -> _Closed:
        self.listener.closed_for_bad_requests_total += 1
        return _Closed(reason)

    def _decode(self, frame: bytes) -> tuple[k.RequestHeader, k.Request]:
        try:
            return k.decode_request(frame)
        except k.UnsupportedRequest as unsupported:
            raise self._refuse(str(unsupported)) from None
        except k.KafkaDecodeError as failure:
            raise self._refuse(f"an unreadable request: {failure}") from None

    def _peek(self, frame: bytes) -> tuple[int, int, int]:
        try:
            return k.peek_header(frame)
        except k.KafkaDecodeError as failure:
            raise self._refuse(str(failure)) from None

    async def _api_versions_fallback(self, frame: bytes) -> bool:
        """KIP-511: an ApiVersions of a version not served is answered in the v0 format."""
        api_key, api_version, correlation_id = self._peek(frame)
        if api_key == k.ApiKey.API_VERSIONS and not k.is_served(api_key, api_version):
            await self._write(k.api_versions_fallback(correlation_id))
            return True
        return False

    # --------------------------------------------------------------------- authentication

    async def _authenticate_step(self, frame: bytes) -> None:
        if self.raw_tokens:
            await self._raw_token(frame)
            return
        if await self._api_versions_fallback(frame):
            return
        header, request = self._decode(frame)
        match request:
            case k.ApiVersionsRequest() if self.sasl is None:
                await self._write(k.encode_response(header, api_versions_response()))
            case k.SaslHandshakeRequest() if self.sasl is None:
                await self._handshake(header, request)
            case k.SaslAuthenticateRequest() if self.sasl is not None:
                await self._authenticate(header, request)
            case _:
                raise self._refuse(f"{type(request).__name__} before authentication")

    async def _handshake(self, header: k.RequestHeader, request: k.SaslHandshakeRequest) -> None:
        users = self.listener._users
        server = new_sasl_server(
            request.mechanism,
            lookup=users.credential,
            check_password=users.authenticate,
            decoy_key=self.listener._decoy_key,
        )
        response = k.SaslHandshakeResponse(
            error_code=k.error(0 if server is not None else _UNSUPPORTED_SASL_MECHANISM),
            mechanisms=SUPPORTED_MECHANISMS,
        )
        await self._write(k.encode_response(header, response))
        if server is None:
            self.listener.authentication_failures_total += 1
            raise _Closed(f"SASL mechanism {request.mechanism!r} is not supported")
        self.sasl = server
        self.raw_tokens = header.api_version == 0

    async def _authenticate(self, header: k.RequestHeader, request: k.SaslAuthenticateRequest) -> None:
        assert self.sasl is not None
        try:
            challenge = await self._evaluate(request.auth_bytes)
        except SaslFailure as failure:
            response = k.SaslAuthenticateResponse(
                error_code=k.error(_SASL_AUTHENTICATION_FAILED),
                error_message=str(failure),
                auth_bytes=b"",
                session_lifetime=k.lifetime(0),
            )
            await self._write(k.encode_response(header, response))
            raise _Closed("authentication failed") from None
        response = k.SaslAuthenticateResponse(
            error_code=k.error(0),
            error_message=None,
            auth_bytes=challenge,
            session_lifetime=k.lifetime(0),  # no re-authentication (KIP-368)
        )
        await self._write(k.encode_response(header, response))
        self.user = self.sasl.user

    async def _raw_token(self, frame: bytes) -> None:
        assert self.sasl is not None
        try:
            challenge = await self._evaluate(frame)
        except SaslFailure:
            raise _Closed("authentication failed") from None  # v0 has no way to say so: close
        await self._write(_SIZE.pack(len(challenge)) + challenge)
        self.user = self.sasl.user

    async def _evaluate(self, token: bytes) -> bytes:
        assert self.sasl is not None
        try:
            return await self.sasl.evaluate(token)
        except SaslFailure:
            self.listener.authentication_failures_total += 1
            _log.info("Kafka connection from %s failed to authenticate (%s)", self.peer, self.sasl.mechanism)
            raise
        except CoordinationError as error:
            raise _Closed(f"cannot check the credential now: {error}") from None

    # ------------------------------------------------------------------------ requests

    async def _serve(self, apis: KafkaApis, user: str) -> None:
        """Read requests while earlier ones are served; write their answers in arrival order."""
        answers: asyncio.Queue[asyncio.Task[bytes | None]] = asyncio.Queue(MAX_IN_FLIGHT)
        started: set[asyncio.Task[bytes | None]] = set()
        reading = asyncio.ensure_future(self._read_requests(apis, user, answers, started))
        writing = asyncio.ensure_future(self._write_answers(answers))
        try:
            done, _ = await asyncio.wait({reading, writing}, return_when=asyncio.FIRST_COMPLETED)
            # Either side ending ends the connection: the reader at the end of the stream or on a
            # bad frame, the writer when a rule says close. What is still pending is dropped.
            for task in done:
                task.result()
        finally:
            everything: list[asyncio.Future[Any]] = [reading, writing, *started]
            for future in everything:
                future.cancel()
            await asyncio.gather(*everything, return_exceptions=True)

    async def _read_requests(
        self,
        apis: KafkaApis,
        user: str,
        answers: asyncio.Queue[asyncio.Task[bytes | None]],
        started: set[asyncio.Task[bytes | None]],
    ) -> None:
        while True:
            frame = await self._read_frame(self.listener._max_request_bytes)
            answer = self._answer_to(apis, user, frame)
            # Started now, in arrival order: the actors see this connection's requests in order.
            task = asyncio.ensure_future(answer)
            started.add(task)
            task.add_done_callback(started.discard)
            await answers.put(task)

    def _answer_to(self, apis: KafkaApis, user: str, frame: bytes) -> Coroutine[object, object, bytes | None]:
        api_key, api_version, correlation_id = self._peek(frame)
        if api_key == k.ApiKey.API_VERSIONS and not k.is_served(api_key, api_version):
            return _ready(k.api_versions_fallback(correlation_id))
        header, request = self._decode(frame)
        return _answer(apis, header, request, user)

    async def _write_answers(self, answers: asyncio.Queue[asyncio.Task[bytes | None]]) -> None:
        while True:
            answer = await answers.get()
            try:
                frame = await answer
            except CloseConnection as close:
                raise _Closed(str(close)) from None
            if frame is not None:
                await self._write(frame)


async def _answer(apis: KafkaApis, header: k.RequestHeader, request: k.Request, user: str) -> bytes | None:
    response = await apis.handle(header, request, user)
    return None if response is None else k.encode_response(header, response)


async def _ready(frame: bytes) -> bytes:
    return frame
