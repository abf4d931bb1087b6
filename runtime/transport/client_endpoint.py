"""The client endpoint: the frames clients send, on their own paths and with their own credential.

``POST /client/v1/ask`` (one envelope; the reply frame is the body) and ``POST /client/v1/tell`` (a
batch, answered ``202``) carry the same frames as ``/internal/v1``, but:

* the credential is checked by an ``authenticate`` callback given by the composition root (a client
  user or the broker identity); without one: ``401``, nothing decoded, nothing delivered;
* every envelope must pass an ``admit`` callback (the domain's list of what a client may send, to
  which actor) before it reaches the actor system: ``400`` naming the reason otherwise. A tell batch
  is all or nothing here: a client has no business mixing refused kinds into a batch;
* then the actor system's own edge check applies as on the internal endpoint (closed message sets).

A failure to check the credential at all (the user store unreachable) is ``503``, not ``401``: the
client should try again, not conclude its password is wrong. No domain logic lives here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

import orjson
from aiohttp import web

from runtime.codec import Codec, WireEnvelope
from runtime.errors import (
    CoordinationError,
    MailboxClosedError,
    RefusedMessageError,
    UnknownActorError,
    WireError,
)
from runtime.transport.base import InboundHandler
from runtime.transport.http import answer_ask, error_response, read_envelopes

__all__ = ["CLIENT_ASK_PATH", "CLIENT_TELL_PATH", "ClientEndpoint"]

CLIENT_ASK_PATH: Final = "/client/v1/ask"
CLIENT_TELL_PATH: Final = "/client/v1/tell"

_log = logging.getLogger("actorlog.runtime.client_endpoint")

Authenticate = Callable[[str], Awaitable[object | None]]
Admit = Callable[[WireEnvelope, bool], str | None]


class ClientEndpoint:
    def __init__(
        self, codec: Codec, *, authenticate: Authenticate, admit: Admit, max_body_bytes: int
    ) -> None:
        self.codec = codec
        self._authenticate = authenticate
        self._admit = admit
        self.max_body_bytes = max_body_bytes
        self.inbound: InboundHandler | None = None  # set once the node's actor system runs
        self.requests_total = 0
        self.refused_total = 0
        self.unauthenticated_total = 0

    def routes(self) -> list[web.RouteDef]:
        return [web.post(CLIENT_ASK_PATH, self._handle_ask), web.post(CLIENT_TELL_PATH, self._handle_tell)]

    async def _envelopes(self, request: web.Request, *, ask: bool) -> list[WireEnvelope] | web.Response:
        self.requests_total += 1
        try:
            principal = await self._authenticate(request.headers.get("Authorization", ""))
        except CoordinationError as error:
            return error_response(
                503, WireError.NETWORK_EXCEPTION, f"cannot check the credential now: {error}"
            )
        if principal is None:
            self.unauthenticated_total += 1
            return error_response(
                401,
                WireError.SASL_AUTHENTICATION_FAILED,
                "missing or wrong client credential (Authorization: Basic user:password of a SCRAM user)",
            )
        if self.inbound is None:
            return error_response(503, WireError.NETWORK_EXCEPTION, "node is not accepting requests yet")
        envelopes = await read_envelopes(request, self.codec, self.max_body_bytes)
        if isinstance(envelopes, web.Response):
            return envelopes
        for envelope in envelopes:
            reason = self._admit(envelope, ask)
            if reason is not None:
                self.refused_total += 1
                _log.warning("refused a client request from %s: %s", principal, reason)
                return error_response(400, WireError.INVALID_REQUEST, reason)
        return envelopes

    async def _handle_ask(self, request: web.Request) -> web.StreamResponse:
        envelopes = await self._envelopes(request, ask=True)
        if isinstance(envelopes, web.Response):
            return envelopes
        inbound = self.inbound
        assert inbound is not None
        return await answer_ask(inbound, self.codec, envelopes)

    async def _handle_tell(self, request: web.Request) -> web.StreamResponse:
        envelopes = await self._envelopes(request, ask=False)
        if isinstance(envelopes, web.Response):
            return envelopes
        inbound = self.inbound
        assert inbound is not None
        for envelope in envelopes:  # all or nothing, before any is delivered
            try:
                inbound.admit(envelope, ask=False)
            except (RefusedMessageError, UnknownActorError) as error:
                return error_response(400, WireError.INVALID_REQUEST, str(error))
        delivered = 0
        for envelope in envelopes:
            try:
                await inbound.deliver(envelope)
                delivered += 1
            except (UnknownActorError, MailboxClosedError, RefusedMessageError):
                pass  # stopped meanwhile: tells are at most once
        return web.Response(
            status=202, body=orjson.dumps({"accepted": delivered}), content_type="application/json"
        )
