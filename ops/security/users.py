"""Client users: SCRAM-SHA-256 credentials in ZooKeeper (``/config/users/<name>``), as Kafka keeps them.

Who writes: ``actorlog users`` and ``actorlog cluster up`` (with ZooKeeper's own credentials when
``zookeeper.set.acl`` closes the tree). Who reads: every broker, when a client presents a user name
and password (HTTP ``Authorization: Basic``) on the client endpoint or the JSON API, or authenticates
with SASL (SCRAM-SHA-256 or PLAIN) on the Kafka listener.

Rules kept:
* a credential read from ZooKeeper is used for ``refresh_ms`` (10 s) before it is read again, so a
  deleted user or a changed password stops working within that time on every broker, and a steady
  client costs no ZooKeeper read per request; a password already checked against the same
  credential is not hashed again (PBKDF2 with 4096 iterations is the deliberate cost of a guess);
* an unknown user and a wrong password are the same answer (False): the caller cannot tell which;
* ``credential`` gives the stored keys themselves, under the same cache, to the SASL/SCRAM exchange
  of the Kafka listener (``ops/security/sasl.py``), which proves the password without receiving it;
* a ZooKeeper failure with nothing cached propagates (``CoordinationError``): "cannot check" is not
  "wrong password", and the endpoint answers it as unavailable, not as a refused credential.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from ops.security.scram import (
    MIN_ITERATIONS,
    ScramCredential,
    ScramFormatError,
    decode_user_config,
    encode_user_config,
    new_credential,
)
from runtime.clock import Clock
from runtime.coordination.base import Coordinator
from runtime.coordination.errors import CoordinationError, NodeExistsError, NoNodeError

__all__ = ["USERS_PATH", "UserStore", "check_user_name", "user_path"]

USERS_PATH: Final = "/config/users"
# Kafka sanitises user names into znode names; a plain, safe alphabet needs no sanitising.
_USER_NAME = re.compile(r"^[A-Za-z0-9._@+=-]{1,249}$")
_VERIFIED_LIMIT: Final = 4096


def check_user_name(name: str) -> str:
    if not _USER_NAME.match(name) or name in (".", ".."):
        raise ValueError(f"user name {name!r} is not valid: 1 to 249 of A-Z a-z 0-9 . _ @ + = -")
    return name


def user_path(name: str) -> str:
    return f"{USERS_PATH}/{check_user_name(name)}"


class UserStore:
    def __init__(
        self,
        coordinator: Coordinator,
        *,
        clock: Clock,
        refresh_ms: int = 10_000,
    ) -> None:
        self._coordinator = coordinator
        self._refresh_ms = refresh_ms
        self._clock = clock
        self._credentials: dict[str, tuple[ScramCredential | None, int]] = {}
        self._verified: dict[tuple[str, bytes], ScramCredential] = {}

    async def authenticate(self, name: str, password: str) -> bool:
        if not _USER_NAME.match(name):
            return False
        credential = await self.credential(name)
        if credential is None:
            return False
        key = (name, hashlib.sha256(password.encode()).digest())
        if self._verified.get(key) is credential:
            return True
        if not credential.verify(password):
            return False
        if len(self._verified) >= _VERIFIED_LIMIT:
            self._verified.clear()
        self._verified[key] = credential
        return True

    async def credential(self, name: str) -> ScramCredential | None:
        """The user's stored SCRAM-SHA-256 credential (None: no such user, or none readable), read
        at most every ``refresh_ms``; the SCRAM exchange of the Kafka listener checks proofs with it."""
        if not _USER_NAME.match(name):
            return None
        now = self._clock.now_ms()
        cached = self._credentials.get(name)
        if cached is not None and now - cached[1] < self._refresh_ms:
            return cached[0]
        try:
            data, _ = await self._coordinator.get(user_path(name))
            credential = decode_user_config(data)
        except NoNodeError:
            credential = None
        except ScramFormatError:
            credential = None  # an unreadable credential logs in nobody
        except CoordinationError:
            if cached is not None:
                return cached[0]  # ZooKeeper is away: what was read before still holds
            raise
        if len(self._credentials) >= _VERIFIED_LIMIT:
            self._credentials.clear()
        self._credentials[name] = (credential, now)
        return credential

    # ------------------------------------------------------------------------ administration

    async def upsert(self, name: str, password: str, *, iterations: int = MIN_ITERATIONS) -> bool:
        """Create the user or change its password; True when it was created."""
        data = encode_user_config(new_credential(password, iterations=iterations))
        path = user_path(name)
        await self._coordinator.ensure_path(USERS_PATH)
        try:
            await self._coordinator.create(path, data)
            return True
        except NodeExistsError:
            await self._coordinator.set(path, data, version=-1)
            return False

    async def delete(self, name: str) -> bool:
        """Delete the user; False when there was none."""
        try:
            await self._coordinator.delete(user_path(name), version=-1)
            return True
        except NoNodeError:
            return False

    async def names(self) -> list[str]:
        try:
            return sorted(await self._coordinator.get_children(USERS_PATH))
        except NoNodeError:
            return []
