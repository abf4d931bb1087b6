"""The server side of SASL for the Kafka listener: SCRAM-SHA-256 (RFC 5802/7677) and PLAIN (RFC 4616).

What this module owns: one exchange per connection, token in, token out, ending in the name of an
authenticated client user or a ``SaslFailure``. The Kafka listener (``ops/kafka/server.py``) carries
the tokens (SaslAuthenticate, or raw frames after a SaslHandshake v0); the users and their stored
credentials are ``ops/security/users.py``'s. The broker identity (``internal.auth.secret``) is never a
credential here: only client users log in on the Kafka listener.

Rules kept:

* **SCRAM-SHA-256** proves the password without receiving it: the client's proof is checked against
  the stored key (``H(ClientKey) == StoredKey``) and the server signs the exchange with the server
  key, so a client can tell a broker that knows the credential. Channel binding is not offered
  (``p=`` is refused; ``n`` and ``y`` are accepted), an authorization id must be empty or the user's
  own name (as Kafka's ``ScramSaslServer``), and delegation tokens (``tokenauth=true``) are not
  supported. An unknown user gets a salt and iteration count made up from the name (the same every
  time within a process), and fails only at the proof, like a wrong password: the exchange does not
  tell which user names exist.
* **PLAIN** receives the password and checks it against the same stored SCRAM credential (hashing it
  with the stored salt; the user store remembers a password it has already checked). It sends the
  password in clear text on a plaintext listener, as HTTP Basic does on the JSON API.
* Every failure is the same ``SaslFailure`` message per mechanism (Kafka's wording), whatever went
  wrong; a malformed token is a failure, never another exception. A user store that cannot be read
  (ZooKeeper away, nothing cached) raises ``CoordinationError``: "cannot check now" is not "wrong
  password", and the listener closes the connection instead of answering a failure.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from collections.abc import Awaitable, Callable
from typing import Final, Protocol

from ops.security.scram import MECHANISM as SCRAM_SHA_256
from ops.security.scram import MIN_ITERATIONS, ScramCredential

__all__ = [
    "PLAIN",
    "SCRAM_SHA_256",
    "SUPPORTED_MECHANISMS",
    "PlainServer",
    "SaslFailure",
    "SaslServer",
    "ScramServer",
    "new_decoy_key",
    "new_sasl_server",
]

PLAIN: Final = "PLAIN"
SUPPORTED_MECHANISMS: Final = (SCRAM_SHA_256, PLAIN)

CredentialLookup = Callable[[str], Awaitable[ScramCredential | None]]
PasswordCheck = Callable[[str, str], Awaitable[bool]]


class SaslFailure(Exception):
    """The client did not authenticate; the message is what the client is told."""


def _failure(mechanism: str) -> SaslFailure:
    return SaslFailure(
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
        f"{mechanism}"
    )


class SaslServer(Protocol):
    mechanism: str

    @property
    def user(self) -> str | None:
        """The authenticated user once the exchange is complete, else None."""

    async def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next token; raises SaslFailure."""


class PlainServer:
    """RFC 4616: one token, ``authzid NUL authcid NUL password``; the answer is empty."""

    mechanism = PLAIN

    def __init__(self, check_password: PasswordCheck) -> None:
        self._check = check_password
        self._user: str | None = None
        self._done = False

    @property
    def user(self) -> str | None:
        return self._user

    async def evaluate(self, token: bytes) -> bytes:
        if self._done:
            raise _failure(PLAIN)
        self._done = True
        try:
            authzid, authcid, password = token.decode("utf-8").split("\0")
        except (UnicodeDecodeError, ValueError):
            raise _failure(PLAIN) from None
        if not authcid or not password or (authzid and authzid != authcid):
            raise _failure(PLAIN)
        if not await self._check(authcid, password):
            raise _failure(PLAIN)
        self._user = authcid
        return b""


class ScramServer:
    """RFC 5802 with SHA-256 (RFC 7677): client-first, server-first, client-final, server-final."""

    mechanism = SCRAM_SHA_256

    def __init__(
        self,
        lookup: CredentialLookup,
        *,
        decoy_key: bytes,
        nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        self._lookup = lookup
        self._decoy_key = decoy_key
        self._nonce = nonce
        self._step = 0
        self._user: str | None = None
        self._name = ""
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._full_nonce = ""

    @property
    def user(self) -> str | None:
        return self._user

    async def evaluate(self, token: bytes) -> bytes:
        self._step += 1
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise _failure(SCRAM_SHA_256) from None
        if self._step == 1:
            return await self._client_first(text)
        if self._step == 2:
            return self._client_final(text)
        raise _failure(SCRAM_SHA_256)

    async def _client_first(self, text: str) -> bytes:
        # gs2-header: cbind flag "," [authzid] ","; then the bare message: n=user,r=nonce[,ext...]
        flag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if flag not in ("n", "y") or not bare:  # "p=...": channel binding is not offered
            raise _failure(SCRAM_SHA_256)
        attributes = _attributes(bare)
        if attributes is None or [key for key, _ in attributes[:2]] != ["n", "r"]:
            raise _failure(SCRAM_SHA_256)
        name = _sasl_name(attributes[0][1])
        client_nonce = attributes[1][1]
        extensions = dict(attributes[2:])
        if name is None or not client_nonce or extensions.get("tokenauth", "").lower() == "true":
            raise _failure(SCRAM_SHA_256)
        if authzid and (not authzid.startswith("a=") or _sasl_name(authzid[2:]) != name):
            raise _failure(SCRAM_SHA_256)
        self._name = name
        self._credential = await self._lookup(name)
        salt, iterations = (
            (self._credential.salt, self._credential.iterations)
            if self._credential is not None
            else (self._decoy_salt(name), MIN_ITERATIONS)
        )
        self._gs2_header = f"{flag},{authzid},"
        self._client_first_bare = bare
        self._full_nonce = client_nonce + self._nonce()
        self._server_first = f"r={self._full_nonce},s={_b64(salt)},i={iterations}"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        without_proof, separator, proof_part = text.rpartition(",p=")
        attributes = _attributes(without_proof) if separator else None
        if attributes is None or [key for key, _ in attributes[:2]] != ["c", "r"]:
            raise _failure(SCRAM_SHA_256)
        try:
            binding = base64.b64decode(attributes[0][1], validate=True)
            proof = base64.b64decode(proof_part, validate=True)
        except (binascii.Error, ValueError):
            raise _failure(SCRAM_SHA_256) from None
        if binding != self._gs2_header.encode() or attributes[1][1] != self._full_nonce:
            raise _failure(SCRAM_SHA_256)
        credential = self._credential
        if credential is None:
            raise _failure(SCRAM_SHA_256)  # the decoy's exchange ends here, as a wrong password's
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = hmac.digest(credential.stored_key, auth_message, "sha256")
        if len(proof) != len(client_signature):
            raise _failure(SCRAM_SHA_256)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), credential.stored_key):
            raise _failure(SCRAM_SHA_256)
        self._user = self._name
        server_signature = hmac.digest(credential.server_key, auth_message, "sha256")
        return f"v={_b64(server_signature)}".encode()

    def _decoy_salt(self, name: str) -> bytes:
        return hmac.digest(self._decoy_key, name.encode(), "sha256")


def new_sasl_server(
    mechanism: str, *, lookup: CredentialLookup, check_password: PasswordCheck, decoy_key: bytes
) -> SaslServer | None:
    """The server for ``mechanism`` (None: not supported)."""
    if mechanism == SCRAM_SHA_256:
        return ScramServer(lookup, decoy_key=decoy_key)
    if mechanism == PLAIN:
        return PlainServer(check_password)
    return None


def new_decoy_key() -> bytes:
    """A per-process key for the made-up salts of unknown users."""
    return os.urandom(32)


def _attributes(text: str) -> list[tuple[str, str]] | None:
    """``a=x,b=y`` -> [(a, x), (b, y)]; None when a part is not ``key=value``."""
    parts: list[tuple[str, str]] = []
    for part in text.split(","):
        key, separator, value = part.partition("=")
        if not separator or not key:
            return None
        parts.append((key, value))
    return parts


def _sasl_name(value: str) -> str | None:
    """RFC 5802's saslname: ``=2C`` is a comma, ``=3D`` an equals sign; any other ``=`` is invalid."""
    decoded: list[str] = []
    index = 0
    while index < len(value):
        char = value[index]
        if char == "=":
            escape = value[index : index + 3]
            if escape == "=2C":
                decoded.append(",")
            elif escape == "=3D":
                decoded.append("=")
            else:
                return None
            index += 3
            continue
        decoded.append(char)
        index += 1
    return "".join(decoded) or None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
