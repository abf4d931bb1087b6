"""HTTP transport: aiohttp server per node, one pooled ClientSession per process.

Endpoints (internal, authenticated with ``Authorization: Bearer <internal.auth.secret>``):

* ``POST /internal/v1/tell``: a frame holding a batch of envelopes, in order. Answered ``202``
  once every envelope is in its mailbox (the handler waits for mailbox capacity: backpressure).
* ``POST /internal/v1/ask``: a frame holding exactly one envelope. The response body is the reply
  frame (``200``), or a JSON error: ``404`` unknown actor, ``504`` deadline passed.

Every failure answer is JSON ``{"error_code": <Kafka code>, "error": <name>, "message": ...}``:
``401`` without the right secret (and nothing is delivered), ``400`` for a malformed frame (the
message names the field) or for a kind its target actor does not take from another node in that
mode (in a tell batch such envelopes are skipped and listed, the rest delivered; a batch of nothing
else is a 400), ``413`` for a body above ``max_body_bytes``.

The server (``HttpServer``, every endpoint it serves, the JSON API's too) bounds what a client can
hold open or make it log: a body not in full within ``body_timeout_ms`` of its headers is answered
``408`` REQUEST_TIMED_OUT and the connection closed; a request line above
``MAX_REQUEST_LINE_BYTES`` is ``414``, a header field above ``MAX_HEADER_FIELD_BYTES`` or more than
``MAX_HEADERS`` headers ``431``, any other malformed request head ``400`` (INVALID_REQUEST, the
connection closed), each logged as one line, never with a traceback.

Sending side:

* Tells to one peer go through one ordered channel drained by one task: whatever has queued up is
  sent as one batch per POST, POSTs one after another, so order is kept and small tells coalesce.
  A batch that cannot be delivered is dropped and counted (tells are at most once).
* An ask is one POST on the shared session, concurrent with others. Connection failures map to
  ``PeerUnavailableError``, the deadline to ``AskTimeoutError``, a 404 to ``UnknownActorError``.
* ``source_host`` (optional) binds every outgoing connection to that local address. Fault
  campaigns give each broker its own loopback address and put a proxy in front of every listener;
  the proxy can only tell which broker a connection comes from by its source address, and without
  the bind every connection would come from 127.0.0.1 whatever broker made it.

TLS: given an ``ssl.SSLContext``, ``HttpServer`` serves HTTPS only (a plain HTTP request on its
port fails the handshake) and ``HttpTransport`` verifies every peer with it (``https://`` base URLs);
which files and checks make those contexts is the composition root's business (``ops.tls``).

No domain logic lives here: node ids are resolved to base URLs by a ``resolve`` callback that the
composition root keeps up to date.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import ssl
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.typedefs import Middleware

from runtime.codec import (
    FRAME_CONTENT_TYPE,
    FRAME_PREFIX_BYTES,
    Codec,
    WireEnvelope,
    frame_header_length,
)
from runtime.errors import (
    AskTimeoutError,
    CodecError,
    FrameError,
    MailboxClosedError,
    PeerUnavailableError,
    RefusedMessageError,
    RemoteRequestError,
    UnknownActorError,
    WireError,
)
from runtime.transport.base import InboundHandler, TaskSpawner

__all__ = [
    "ASK_PATH",
    "DEFAULT_BODY_TIMEOUT_MS",
    "MAX_HEADERS",
    "MAX_HEADER_FIELD_BYTES",
    "MAX_REQUEST_LINE_BYTES",
    "TELL_PATH",
    "BodyTimeoutError",
    "FramePayload",
    "HttpServer",
    "HttpTransport",
    "answer_ask",
    "body_timeout_middleware",
    "error_response",
    "frame_body",
    "json_error_middleware",
    "read_envelopes",
    "read_frame",
]

TELL_PATH = "/internal/v1/tell"
ASK_PATH = "/internal/v1/ask"
_MAX_BATCH_ENVELOPES = 1024
# Grace added to the client-side deadline so the server's own 504 normally arrives first.
_CLIENT_GRACE_S = 0.2

_log = logging.getLogger("actorlog.runtime.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class FramePayload(aiohttp.payload.Payload):
    """A frame given as several buffers (header, then record bytes), written without joining them.

    Record bytes are the bulk of replication traffic; copying them into one contiguous body would
    cost a memory copy per hop for nothing.
    """

    _autoclose = True

    def __init__(self, parts: list[bytes]) -> None:
        super().__init__(parts, content_type=FRAME_CONTENT_TYPE)
        self._parts = parts
        self._size = sum(len(part) for part in parts)

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        raise TypeError("a binary frame has no text form")

    async def as_bytes(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return b"".join(self._parts)

    async def write(self, writer: Any) -> None:
        for part in self._parts:
            await writer.write(part)

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        if content_length is None:
            await self.write(writer)
            return
        remaining = content_length
        for part in self._parts:
            if remaining <= 0:
                break
            await writer.write(part[:remaining] if len(part) > remaining else part)
            remaining -= len(part)


# Below this size a frame is joined into one buffer: aiohttp then sends headers and body in one
# write (one TCP segment); a multi-part payload is written after the headers, in separate writes.
_JOIN_BELOW_BYTES = 256 * 1024


def frame_body(parts: list[bytes]) -> bytes | FramePayload:
    """The cheapest body for a frame: one buffer when small, multi-part (no copy) when large."""
    if sum(len(part) for part in parts) < _JOIN_BELOW_BYTES:
        return b"".join(parts)
    return FramePayload(parts)


class FrameTooLargeError(FrameError):
    """A request body above the transport's size bound."""


async def read_frame(
    stream: aiohttp.StreamReader, content_length: int | None, max_bytes: int
) -> tuple[bytes, bytes]:
    """Read a frame from a body stream as (header JSON, payload) without an extra payload copy.

    Raises FrameError for a body that is not a frame and FrameTooLargeError above ``max_bytes``.
    """
    if content_length is None:
        body = await stream.read(max_bytes + 1)
        if len(body) > max_bytes or not stream.at_eof():
            raise FrameTooLargeError(f"body exceeds the {max_bytes}-byte limit")
        header_length = frame_header_length(body[:FRAME_PREFIX_BYTES], len(body))
        header_end = FRAME_PREFIX_BYTES + header_length
        return body[FRAME_PREFIX_BYTES:header_end], body[header_end:]
    if content_length > max_bytes:
        raise FrameTooLargeError(f"body of {content_length} bytes exceeds the {max_bytes}-byte limit")
    try:
        if content_length < _JOIN_BELOW_BYTES:
            # Small frames: one read, then cheap slices.
            body = await stream.readexactly(content_length)
            header_length = frame_header_length(body[:FRAME_PREFIX_BYTES], content_length)
            header_end = FRAME_PREFIX_BYTES + header_length
            return body[FRAME_PREFIX_BYTES:header_end], body[header_end:]
        prefix = await stream.readexactly(min(FRAME_PREFIX_BYTES, content_length))
        header_length = frame_header_length(prefix, content_length)
        header = await stream.readexactly(header_length)
        payload = await stream.readexactly(content_length - FRAME_PREFIX_BYTES - header_length)
    except asyncio.IncompleteReadError as error:
        raise FrameError(f"body ended after {len(error.partial)} bytes of a frame part") from None
    return header, payload


def error_response(status: int, error: WireError | int, message: str, **extra: object) -> web.Response:
    """A JSON error body carrying a Kafka error code (and any ``extra`` fields)."""
    code = int(error)
    name = error.name if isinstance(error, WireError) else str(code)
    return web.Response(
        status=status,
        body=orjson.dumps({"error_code": code, "error": name, "message": message, **extra}),
        content_type="application/json",
    )


async def read_envelopes(
    request: web.Request, codec: Codec, max_body_bytes: int
) -> list[WireEnvelope] | web.Response:
    """A request body's frame decoded, or the JSON error of why not (413 too large, 400 malformed):
    the reading half shared by the internal and the client endpoints."""
    try:
        header, payload = await read_frame(request.content, request.content_length, max_body_bytes)
        return codec.decode_envelopes_parts(header, payload)
    except FrameTooLargeError as error:
        return error_response(413, WireError.MESSAGE_TOO_LARGE, str(error))
    except CodecError as error:
        return error_response(400, WireError.INVALID_REQUEST, f"malformed frame: {error}")


async def answer_ask(inbound: InboundHandler, codec: Codec, envelopes: list[WireEnvelope]) -> web.Response:
    """Deliver a decoded ask and answer with its reply frame, or the JSON error of why not: the
    answering half shared by the internal and the client endpoints."""
    if len(envelopes) != 1:
        return error_response(
            400, WireError.INVALID_REQUEST, f"an ask carries exactly one envelope, got {len(envelopes)}"
        )
    try:
        reply = await inbound.deliver_ask(envelopes[0])
    except RefusedMessageError as error:
        return _refused_response(error)
    except UnknownActorError as error:
        return error_response(404, WireError.UNKNOWN_SERVER_ERROR, str(error))
    except AskTimeoutError as error:
        return error_response(504, WireError.REQUEST_TIMED_OUT, str(error))
    try:
        parts = codec.encode_parts(reply)
    except TypeError as error:
        _log.error("cannot encode reply %r: %s", reply, error)
        return error_response(500, WireError.UNKNOWN_SERVER_ERROR, f"reply not encodable: {error}")
    body = frame_body(parts)
    if isinstance(body, bytes):
        return web.Response(body=body, content_type=FRAME_CONTENT_TYPE)
    return web.Response(body=body)


def _refused_response(error: RefusedMessageError) -> web.Response:
    # The fields let the asking side raise the same RefusedMessageError as the other transports.
    return error_response(
        400,
        WireError.INVALID_REQUEST,
        str(error),
        refused={"target": error.target, "kind": error.kind, "mode": error.mode},
    )


@web.middleware
async def json_error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn aiohttp's own HTTP errors (404 route, 405, 413) into JSON bodies with Kafka codes."""
    try:
        return await handler(request)
    except web.HTTPRequestEntityTooLarge as error:
        return error_response(413, WireError.MESSAGE_TOO_LARGE, error.text or "request body too large")
    except web.HTTPException as error:
        if error.status < 400:
            raise
        if error.content_type == "application/json":
            raise
        return error_response(error.status, WireError.INVALID_REQUEST, error.reason)


# How long a request's body may take to arrive after its headers (``request.body.timeout.ms``).
DEFAULT_BODY_TIMEOUT_MS = 30_000
# The limits on a request's head. aiohttp reports a line above its limit with nothing but the
# limit, so the two line limits differ by a little: the one broken says whether it was the request
# line (414) or a header field (431). MAX_HEADERS is aiohttp's default.
MAX_REQUEST_LINE_BYTES = 8192
MAX_HEADER_FIELD_BYTES = 8190
MAX_HEADERS = 128


class BodyTimeoutError(TimeoutError):
    """A request body that did not arrive in full within the server's body timeout.

    A TimeoutError, so that aiohttp, when it drains what a handler left unread of such a body,
    stops at once and closes the connection instead of logging an unhandled exception."""


def body_timeout_middleware(timeout_ms: int) -> Middleware:
    """Fail the reads of a request body that is not in full ``timeout_ms`` after its headers.

    aiohttp has no read timeout: a client that announces more than it sends holds the connection,
    and the handler reading its body, forever. Here a timer started when the handler is called
    fails the body's stream with BodyTimeoutError (any read of it raises, now or later) unless the
    body has fully arrived by then. A handler that lets the error through gets ``408``
    REQUEST_TIMED_OUT; whatever a handler answers, the connection is closed after an expired body,
    whose rest will never be read."""

    @web.middleware
    async def body_timeout(request: web.Request, handler: Handler) -> web.StreamResponse:
        content = request.content
        if content.is_eof():
            return await handler(request)
        expired = False

        def expire() -> None:
            nonlocal expired
            if not content.is_eof():
                expired = True
                content.set_exception(
                    BodyTimeoutError(
                        f"the request body did not arrive in full within {timeout_ms} ms "
                        "(request.body.timeout.ms)"
                    )
                )

        timer = asyncio.get_running_loop().call_later(timeout_ms / 1000, expire)
        try:
            response = await handler(request)
        except BodyTimeoutError as error:
            response = error_response(408, WireError.REQUEST_TIMED_OUT, str(error))
        finally:
            timer.cancel()
        if expired:
            response.force_close()
        return response

    return body_timeout


def _refusal(error: HttpProcessingError) -> tuple[int, str]:
    """The status and message for a request head aiohttp's parser refused."""
    if isinstance(error, LineTooLong):
        limit = error.args[1] if len(error.args) > 1 else "?"
        if str(limit) == str(MAX_REQUEST_LINE_BYTES):
            return 414, f"the request line is longer than {limit} bytes"
        return 431, f"a header field is longer than {limit} bytes"
    if "too many headers" in error.message.lower():
        return 431, f"the request has more than {MAX_HEADERS} header fields"
    return 400, f"malformed HTTP request: {error.message}"


class _JsonErrorRequestHandler(web.RequestHandler):
    """aiohttp's connection protocol, whose own answers (given before any handler or middleware
    runs) take the JSON error shape: a refused request head is one log line, not a traceback."""

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if isinstance(exc, HttpProcessingError):
            status, text = _refusal(exc)
            # The client's mistake, said once at INFO: a traceback would only show aiohttp's parser.
            _log.info("refused a request from %s: %s %s", request.remote, status, text[:200])
            if request.writer.output_size > 0:
                raise ConnectionError("an answer was already sent: the error cannot be")
            response = error_response(status, WireError.INVALID_REQUEST, text)
        else:
            # A handler failed (500) or timed out (504): a server fault, which aiohttp logs with its
            # traceback; only the body changes.
            answer = super().handle_error(request, status, exc, message)
            error = WireError.REQUEST_TIMED_OUT if answer.status == 504 else WireError.UNKNOWN_SERVER_ERROR
            response = error_response(answer.status, error, answer.reason or "server error")
        response.force_close()
        return response


class _JsonErrorServer(web.Server):
    def __call__(self) -> web.RequestHandler:
        return _JsonErrorRequestHandler(self, loop=self._loop, **self._kwargs)


class _JsonErrorAppRunner(web.AppRunner):
    """An AppRunner whose connections are served by _JsonErrorRequestHandler: aiohttp has no public
    hook for the protocol class, so the server the application makes is remade as a _JsonErrorServer
    with the same handler, request factory and settings."""

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()  # runs the application's start-up, as AppRunner does
        return _JsonErrorServer(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            **made._kwargs,
        )


class HttpServer:
    """An aiohttp server embedded in a node's event loop (AppRunner + TCPSite), its limits and error
    answers as the module docstring says."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        routes: Iterable[web.RouteDef],
        max_body_bytes: int,
        middlewares: Iterable[Any] = (),
        body_timeout_ms: int = DEFAULT_BODY_TIMEOUT_MS,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self._ssl_context = ssl_context
        self._requested_port = port
        self._app = web.Application(
            client_max_size=max_body_bytes,
            middlewares=[json_error_middleware, body_timeout_middleware(body_timeout_ms), *middlewares],
        )
        self._app.add_routes(list(routes))
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    @property
    def app(self) -> web.Application:
        return self._app

    async def start(self) -> None:
        self._runner = _JsonErrorAppRunner(
            self._app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=1.0,
            max_line_size=MAX_REQUEST_LINE_BYTES,
            max_field_size=MAX_HEADER_FIELD_BYTES,
            max_headers=MAX_HEADERS,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self._requested_port, ssl_context=self._ssl_context)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self._requested_port

    @property
    def url(self) -> str:
        assert self.port is not None, "server not started"
        scheme = "http" if self._ssl_context is None else "https"
        return f"{scheme}://{self.host}:{self.port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


@dataclass(slots=True)
class _PeerChannel:
    queue: deque[WireEnvelope] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(slots=True)
class HttpTransportStatistics:
    tells_sent_total: int = 0
    tells_dropped_total: int = 0
    tell_batches_total: int = 0
    asks_sent_total: int = 0
    asks_failed_total: int = 0
    requests_received_total: int = 0
    requests_rejected_total: int = 0


class HttpTransport:
    """The HTTP implementation of the Transport port."""

    def __init__(
        self,
        codec: Codec,
        *,
        secret: str,
        resolve: Callable[[str], str | None],
        max_body_bytes: int = 64 * 1024 * 1024,
        connect_timeout_ms: int = 3_000,
        tell_timeout_ms: int = 30_000,
        connections_per_peer: int = 32,
        session: aiohttp.ClientSession | None = None,
        source_host: str | None = None,
        authorization: str | None = None,
        tell_path: str = TELL_PATH,
        ask_path: str = ASK_PATH,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``authorization``, ``tell_path`` and ``ask_path`` are for a client: its own credential
        (instead of ``Bearer <secret>``) and the client endpoint's paths. The server side (``routes``)
        always takes the broker identity only. ``ssl_context`` verifies ``https://`` peers (the
        transport's own connector; a given session brings its own)."""
        if not secret:
            raise ValueError("internal.auth.secret must be set for the HTTP transport")
        if source_host is not None and session is not None:
            raise ValueError("source_host binds the transport's own connector; a given session has its own")
        self.codec = codec
        self._secret = secret
        self._auth_header = f"Bearer {secret}"
        self._resolve = resolve
        self.max_body_bytes = max_body_bytes
        self._connect_timeout_s = connect_timeout_ms / 1000
        self._tell_timeout_s = tell_timeout_ms / 1000
        self._connections_per_peer = connections_per_peer
        self._session = session
        self._owns_session = session is None
        self._source_host = source_host
        self._ssl_context = ssl_context
        self._inbound: InboundHandler | None = None
        self._spawn: TaskSpawner | None = None
        self._channels: dict[str, _PeerChannel] = {}
        self._stopped = False
        self._timeouts: dict[int, aiohttp.ClientTimeout] = {}
        self._tell_path = tell_path
        self._ask_path = ask_path
        self._headers_value = {
            "Authorization": authorization or self._auth_header,
            "Content-Type": FRAME_CONTENT_TYPE,
        }
        self.statistics = HttpTransportStatistics()

    # --------------------------------------------------------------------------- server side

    def routes(self) -> list[web.RouteDef]:
        """The internal endpoints, to be mounted on the node's HttpServer."""
        return [web.post(TELL_PATH, self._handle_tell), web.post(ASK_PATH, self._handle_ask)]

    def _authorised(self, request: web.Request) -> bool:
        supplied = request.headers.get("Authorization", "")
        return hmac.compare_digest(supplied.encode(), self._auth_header.encode())

    async def _read_envelopes(self, request: web.Request) -> list[WireEnvelope] | web.Response:
        self.statistics.requests_received_total += 1
        if not self._authorised(request):
            self.statistics.requests_rejected_total += 1
            return error_response(
                401,
                WireError.SASL_AUTHENTICATION_FAILED,
                "missing or wrong internal credential (Authorization: Bearer <internal.auth.secret>)",
            )
        if self._inbound is None:
            return error_response(503, WireError.NETWORK_EXCEPTION, "node is not accepting messages yet")
        envelopes = await read_envelopes(request, self.codec, self.max_body_bytes)
        if isinstance(envelopes, web.Response):
            self.statistics.requests_rejected_total += 1
        return envelopes

    async def _handle_tell(self, request: web.Request) -> web.StreamResponse:
        envelopes = await self._read_envelopes(request)
        if isinstance(envelopes, web.Response):
            return envelopes
        inbound = self._inbound
        assert inbound is not None
        unknown: list[str] = []
        refused: list[RefusedMessageError] = []
        # Each refused envelope is skipped before it reaches a mailbox, the others are delivered in
        # order, as the other transports do per tell. A batch with nothing acceptable is a 400.
        for envelope in envelopes:
            try:
                await inbound.deliver(envelope)
            except RefusedMessageError as error:
                refused.append(error)
            except (UnknownActorError, MailboxClosedError):
                unknown.append(envelope.target)
        if refused:
            self.statistics.requests_rejected_total += 1
            if len(refused) == len(envelopes):
                return _refused_response(refused[0])
        return web.Response(
            status=202,
            body=orjson.dumps(
                {
                    "accepted": len(envelopes) - len(unknown) - len(refused),
                    "unknown_targets": unknown,
                    "refused": [str(error) for error in refused],
                }
            ),
            content_type="application/json",
        )

    async def _handle_ask(self, request: web.Request) -> web.StreamResponse:
        envelopes = await self._read_envelopes(request)
        if isinstance(envelopes, web.Response):
            return envelopes
        inbound = self._inbound
        assert inbound is not None
        response = await answer_ask(inbound, self.codec, envelopes)
        if response.status == 400:
            self.statistics.requests_rejected_total += 1
        return response

    # -------------------------------------------------------------------------- client side

    async def start(self, inbound: InboundHandler, spawn: TaskSpawner) -> None:
        self._inbound = inbound
        self._spawn = spawn
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=0,
                limit_per_host=self._connections_per_peer,
                keepalive_timeout=15,
                # Port 0: the kernel picks the port; only the source address is fixed.
                local_addr=None if self._source_host is None else (self._source_host, 0),
                # Without a context aiohttp's default verifies https:// against the system's CAs.
                ssl=self._ssl_context if self._ssl_context is not None else True,
            )
            self._session = aiohttp.ClientSession(connector=connector)

    def _headers(self) -> dict[str, str]:
        return self._headers_value

    def send(self, node_id: str, envelope: WireEnvelope) -> None:
        if self._stopped or self._spawn is None:
            self.statistics.tells_dropped_total += 1
            return
        channel = self._channels.get(node_id)
        if channel is None:
            channel = _PeerChannel()
            self._channels[node_id] = channel
            self._spawn(self._pump(node_id, channel))
        channel.queue.append(envelope)
        channel.wakeup.set()

    async def _pump(self, node_id: str, channel: _PeerChannel) -> None:
        while not self._stopped:
            if not channel.queue:
                channel.wakeup.clear()
                await channel.wakeup.wait()
                continue
            batch: list[WireEnvelope] = []
            while channel.queue and len(batch) < _MAX_BATCH_ENVELOPES:
                batch.append(channel.queue.popleft())
            try:
                await self._post_tells(node_id, batch)
                self.statistics.tells_sent_total += len(batch)
                self.statistics.tell_batches_total += 1
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - tells are at most once: drop and count
                self.statistics.tells_dropped_total += len(batch)
                _log.warning("dropped %d tell(s) to node %s: %s", len(batch), node_id, error)

    async def _post_tells(self, node_id: str, batch: list[WireEnvelope]) -> None:
        base = self._resolve(node_id)
        if base is None:
            raise PeerUnavailableError(node_id, "no known address")
        session = self._session
        assert session is not None
        timeout = aiohttp.ClientTimeout(total=self._tell_timeout_s, connect=self._connect_timeout_s)
        async with session.post(
            base + self._tell_path,
            data=frame_body(self.codec.encode_envelopes_parts(batch)),
            headers=self._headers(),
            timeout=timeout,
        ) as response:
            if response.status != 202:
                raise RemoteRequestError(
                    response.status, WireError.UNKNOWN_SERVER_ERROR, await response.text()
                )
            await response.read()

    async def ask(
        self, node_id: str, envelope: WireEnvelope, timeout_ms: int, on_sent: Callable[[], None] | None = None
    ) -> object:
        self.statistics.asks_sent_total += 1
        if on_sent is not None:
            on_sent()  # real time: nothing waits on this hook
        try:
            return await self._ask(node_id, envelope, timeout_ms)
        except Exception:
            self.statistics.asks_failed_total += 1
            raise

    async def _ask(self, node_id: str, envelope: WireEnvelope, timeout_ms: int) -> object:
        if self._stopped:
            raise PeerUnavailableError(node_id, "transport stopped")
        base = self._resolve(node_id)
        if base is None:
            raise PeerUnavailableError(node_id, "no known address")
        session = self._session
        if session is None:
            raise PeerUnavailableError(node_id, "transport not started")
        target = f"{envelope.target}@{node_id}"
        timeout = self._timeouts.get(timeout_ms)
        if timeout is None:
            timeout = aiohttp.ClientTimeout(
                total=timeout_ms / 1000 + _CLIENT_GRACE_S,
                connect=min(self._connect_timeout_s, timeout_ms / 1000),
            )
            if len(self._timeouts) < 64:
                self._timeouts[timeout_ms] = timeout
        body = frame_body(self.codec.encode_envelopes_parts([envelope]))
        try:
            async with session.post(
                base + self._ask_path, data=body, headers=self._headers(), timeout=timeout
            ) as response:
                status = response.status
                if status == 200:
                    header, payload = await read_frame(
                        response.content, response.content_length, self.max_body_bytes
                    )
                    return self.codec.decode_parts(header, payload)
                data = await response.read()
        except TimeoutError:
            raise AskTimeoutError(target, timeout_ms) from None
        except aiohttp.ClientConnectionError as error:
            raise PeerUnavailableError(node_id, f"{type(error).__name__}: {error}") from None
        except aiohttp.ClientError as error:
            raise PeerUnavailableError(node_id, f"{type(error).__name__}: {error}") from None
        if status == 404:
            raise UnknownActorError(target)
        if status == 504:
            raise AskTimeoutError(target, timeout_ms)
        raise _remote_error(status, data)

    async def stop(self) -> None:
        self._stopped = True
        for channel in self._channels.values():
            self.statistics.tells_dropped_total += len(channel.queue)
            channel.queue.clear()
            channel.wakeup.set()
        if self._session is not None and self._owns_session:
            await self._session.close()
            self._session = None


def _remote_error(status: int, data: bytes) -> RemoteRequestError | RefusedMessageError:
    try:
        parsed = orjson.loads(data)
        refused = parsed.get("refused")
        if status == 400 and isinstance(refused, dict):
            return RefusedMessageError(str(refused["target"]), str(refused["kind"]), str(refused["mode"]))
        return RemoteRequestError(status, int(parsed["error_code"]), str(parsed["message"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return RemoteRequestError(status, WireError.UNKNOWN_SERVER_ERROR, data[:200].decode(errors="replace"))
