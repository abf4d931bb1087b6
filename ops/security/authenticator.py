"""Telling the broker identity from a client user, from an HTTP ``Authorization`` header.

Two kinds of caller, two credentials (``docs/security.md``):
* **the broker identity**: ``Authorization: Bearer <internal.auth.secret>``, a secret only brokers
  hold (and operators, on the brokers' own machines). It alone opens ``/internal/v1``, where the
  controller's requests and replication travel; it also opens the client endpoints;
* **a client user**: ``Authorization: Basic base64(user:password)``, checked against the user's
  SCRAM-SHA-256 credential in ZooKeeper (``ops/security/users.py``). It opens the client endpoint
  (``/client/v1``) and the JSON API, never ``/internal/v1``.

A header that is neither, or a wrong one, is no principal (None); the caller answers 401.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from dataclasses import dataclass
from typing import Literal

from ops.security.users import UserStore

__all__ = ["Authenticator", "Principal"]


@dataclass(frozen=True, slots=True)
class Principal:
    kind: Literal["broker", "user"]
    name: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


BROKER_PRINCIPAL = Principal("broker", "broker")


class Authenticator:
    def __init__(self, *, internal_secret: str, users: UserStore | None) -> None:
        if not internal_secret:
            raise ValueError("the authenticator needs internal.auth.secret")
        self._bearer = f"Bearer {internal_secret}".encode()
        self._users = users

    async def authenticate(self, header: str) -> Principal | None:
        """The caller behind ``header``. Raises CoordinationError when a user cannot be checked."""
        scheme, _, value = header.partition(" ")
        if scheme == "Bearer":
            return BROKER_PRINCIPAL if hmac.compare_digest(header.encode(), self._bearer) else None
        if scheme != "Basic" or self._users is None:
            return None
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        name, separator, password = decoded.partition(":")
        if not separator or not name or not password:
            return None
        if not await self._users.authenticate(name, password):
            return None
        return Principal("user", name)
