"""SCRAM-SHA-256 credentials as Kafka stores them in ZooKeeper, and checking a password against one.

Kafka keeps a user's credential at ``/config/users/<name>`` as
``{"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>"}}``
(RFC 5802/7677). The password itself is never stored: ``stored_key = H(HMAC(SaltedPassword, "Client
Key"))``, where ``SaltedPassword = PBKDF2-HMAC-SHA-256(password, salt, iterations)``. Whoever knows the
password can recompute ``stored_key`` and compare; whoever reads the znode cannot log in with it.

Rules kept: 4096 iterations at least (Kafka's minimum for SCRAM-SHA-256); a 32-byte random salt per
credential; comparisons in constant time; a malformed credential is a ``ScramFormatError`` naming the
part, never a crash.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Final

import orjson

__all__ = [
    "MECHANISM",
    "MIN_ITERATIONS",
    "ScramCredential",
    "ScramFormatError",
    "decode_user_config",
    "encode_user_config",
    "new_credential",
]

MECHANISM: Final = "SCRAM-SHA-256"
MIN_ITERATIONS: Final = 4096
_MAX_ITERATIONS: Final = 16_384  # Kafka's ScramMechanism.maxIterations


class ScramFormatError(ValueError):
    """A stored credential that cannot be read."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString`` form."""
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, separator, value = part.partition("=")
            if not separator:
                raise ScramFormatError(f"credential part {part!r} is not key=value")
            fields[key.strip()] = value.strip()
        try:
            iterations = int(fields["iterations"])
            credential = cls(
                salt=base64.b64decode(fields["salt"], validate=True),
                stored_key=base64.b64decode(fields["stored_key"], validate=True),
                server_key=base64.b64decode(fields["server_key"], validate=True),
                iterations=iterations,
            )
        except KeyError as missing:
            raise ScramFormatError(f"credential has no {missing.args[0]}") from None
        except (ValueError, binascii.Error) as error:
            raise ScramFormatError(f"credential is malformed: {error}") from None
        if not MIN_ITERATIONS <= iterations <= _MAX_ITERATIONS:
            raise ScramFormatError(f"iterations {iterations} outside {MIN_ITERATIONS}..{_MAX_ITERATIONS}")
        return credential

    def verify(self, password: str) -> bool:
        """True when ``password`` is the one this credential was made from."""
        salted = _salted_password(password, self.salt, self.iterations)
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        return hmac.compare_digest(hashlib.sha256(client_key).digest(), self.stored_key)


def new_credential(
    password: str, *, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    if not password:
        raise ValueError("a SCRAM password must not be empty")
    if not MIN_ITERATIONS <= iterations <= _MAX_ITERATIONS:
        raise ValueError(f"iterations must be within {MIN_ITERATIONS}..{_MAX_ITERATIONS}, got {iterations}")
    salt = os.urandom(32) if salt is None else salt
    salted = _salted_password(password, salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.sha256(client_key).digest(),
        server_key=hmac.digest(salted, b"Server Key", "sha256"),
        iterations=iterations,
    )


def encode_user_config(credential: ScramCredential) -> bytes:
    """The data of ``/config/users/<name>``."""
    return orjson.dumps({"version": 1, "config": {MECHANISM: credential.to_text()}})


def decode_user_config(data: bytes) -> ScramCredential | None:
    """The SCRAM-SHA-256 credential in a ``/config/users/<name>`` znode, None when it has none."""
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise ScramFormatError(f"user config is not JSON: {error}") from None
    config = parsed.get("config") if isinstance(parsed, dict) else None
    if not isinstance(config, dict):
        raise ScramFormatError("user config has no config object")
    text = config.get(MECHANISM)
    if text is None:
        return None
    if not isinstance(text, str):
        raise ScramFormatError(f"{MECHANISM} is not a string")
    return ScramCredential.from_text(text)


def _salted_password(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
