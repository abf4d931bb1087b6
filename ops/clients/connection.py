"""A client process's presence on the cluster: its actor system, transport and bootstrap servers.

Clients (producer, consumer, admin, the CLI tools) talk to brokers as actors do: an ask is one
authenticated POST to a broker's client endpoint (``/client/v1``, never ``/internal/v1``), the reply
is the response body. A client node serves nothing, so every exchange is an ask (or an acks=0 tell).

Rules kept:
* ``bootstrap.servers`` (``host:port[,host:port...]``) are reached before any broker id is known:
  each is the node ``bootstrap-<i>``; the first Metadata response names the brokers, and from then
  on they are addressed by broker id (as Kafka's client does with its negative bootstrap node ids).
* The credential is a client user's, as Kafka's clients give it (``sasl.jaas.config`` with a
  ``username``/``password``, or librdkafka's ``sasl.username``/``sasl.password``), from the client
  properties (e.g. ``--command-config``), else the ``client.properties`` that ``actorlog cluster up``
  writes into its data directory (``./actorlog-data`` by default). An operator on a broker's machine
  may use the broker identity instead (``internal.auth.secret`` or ``ACTORLOG_INTERNAL_AUTH_SECRET``).
  Missing everywhere is a clear error, never an unauthenticated attempt.
* TLS follows ``security.protocol`` (``SSL``/``SASL_SSL``: ``https://``, the brokers' certificates
  verified with ``ssl.truststore.location``; ``ops/tls.py``), read from the same properties as the
  credential, else from the fallback ``client.properties``. Bootstrap servers stay ``host:port``.
  A certificate that does not verify is one line saying so, not a list of unreachable brokers.
"""

from __future__ import annotations

import base64
import os
import re
import ssl
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from actors.common.client_security import SECURITY_KEYS
from actors.common.errors import ErrorCode, KafkaError
from actors.common.names import BROKER_ACTOR_NAME, broker_node
from actors.common.protocol import BrokerEndpoint
from ops.codec import wire_codec
from ops.properties import ConfigError, parse_properties
from ops.tls import SECURITY_PROTOCOL, client_context, uses_tls
from runtime.clock import Clock
from runtime.errors import RemoteRequestError, TransportError
from runtime.ref import ActorRef
from runtime.rng import fresh_seed, node_rng
from runtime.system import ActorSystem
from runtime.transport.addresses import AddressBook
from runtime.transport.client_endpoint import CLIENT_ASK_PATH, CLIENT_TELL_PATH
from runtime.transport.http import HttpTransport

__all__ = [
    "DEFAULT_DATA_DIR",
    "SECRET_ENV",
    "ClientCredential",
    "ClientNode",
    "load_client_properties",
    "parse_bootstrap_servers",
    "resolve_credential",
    "resolve_ssl_context",
    "split_connection_properties",
]

SECRET_ENV: Final = "ACTORLOG_INTERNAL_AUTH_SECRET"
DEFAULT_DATA_DIR: Final = Path("actorlog-data")
_JAAS_FIELD = re.compile(r'\b(?P<key>username|password)\s*=\s*"(?P<value>(?:[^"\\]|\\.)*)"')
_HOST_PORT = re.compile(r"^(?P<host>\[[^\]]+\]|[^:\s]+):(?P<port>\d{1,5})$")


def parse_bootstrap_servers(raw: str | Sequence[str]) -> tuple[tuple[str, int], ...]:
    """``host:port[,host:port...]`` → ``((host, port), ...)``, or a ConfigError naming the bad part."""
    parts = [raw] if isinstance(raw, str) else list(raw)
    servers: list[tuple[str, int]] = []
    for part in (p.strip() for chunk in parts for p in chunk.split(",")):
        if not part:
            continue
        match = _HOST_PORT.match(part.removeprefix("http://"))
        if match is None or not 0 < int(match.group("port")) <= 65535:
            raise ConfigError(f"bootstrap server {part!r} is not host:port")
        servers.append((match.group("host").strip("[]"), int(match.group("port"))))
    if not servers:
        raise ConfigError("bootstrap.servers is empty: give at least one host:port")
    return tuple(servers)


def load_client_properties(path: str | os.PathLike[str] | None) -> dict[str, str]:
    """The client properties file (``--command-config``/``--producer.config``...), or nothing."""
    if path is None:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read client properties {str(path)!r}: {error.strerror}") from None
    return parse_properties(text)


@dataclass(frozen=True, slots=True)
class ClientCredential:
    """A client user (``username`` and ``password``), or the broker identity (``username`` None,
    ``password`` the internal secret) for an operator on a broker's machine."""

    username: str | None
    password: str = field(repr=False)

    @classmethod
    def of(cls, value: str | ClientCredential) -> ClientCredential:
        """A bare string is the broker identity's secret."""
        return value if isinstance(value, ClientCredential) else cls(None, value)

    @property
    def authorization(self) -> str:
        if self.username is None:
            return f"Bearer {self.password}"
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode("ascii")
        return f"Basic {token}"

    def describe(self) -> str:
        return (
            "the broker identity (internal.auth.secret)"
            if self.username is None
            else f"user {self.username!r}"
        )


def _credential_of(properties: Mapping[str, str]) -> ClientCredential | None:
    jaas = properties.get("sasl.jaas.config")
    if jaas:
        fields = {m.group("key"): m.group("value").replace('\\"', '"') for m in _JAAS_FIELD.finditer(jaas)}
        if "username" not in fields or "password" not in fields:
            raise ConfigError('sasl.jaas.config must give username="..." and password="..."')
        return ClientCredential(fields["username"], fields["password"])
    if properties.get("sasl.username") or properties.get("sasl.password"):
        username, password = properties.get("sasl.username"), properties.get("sasl.password")
        if not username or not password:
            raise ConfigError("sasl.username and sasl.password go together")
        return ClientCredential(username, password)
    if properties.get("internal.auth.secret"):
        return ClientCredential(None, properties["internal.auth.secret"])
    return None


def resolve_credential(
    properties: Mapping[str, str], *, data_dir: Path = DEFAULT_DATA_DIR
) -> ClientCredential:
    credential = _credential_of(properties)
    if credential is None and os.environ.get(SECRET_ENV):
        credential = ClientCredential(None, os.environ[SECRET_ENV])
    if credential is None:
        fallback = data_dir / "client.properties"
        if fallback.is_file():
            credential = _credential_of(load_client_properties(fallback))
    if credential is None:
        raise ConfigError(
            "no credential for the brokers: run from the directory where `actorlog cluster up` wrote "
            "actorlog-data/client.properties, or give a properties file with sasl.jaas.config (or "
            "sasl.username and sasl.password) of a user made with `actorlog users` (--command-config FILE "
            "for topics and snapshots, --producer.config or --consumer.config FILE for produce, consume "
            "and perf; properties_file=/config_file= or secret= in Python)"
        )
    return credential


# How a client connects, not what it does: Kafka's clients take them beside their own keys. One
# list, the actors' (the producer's and consumer's configs accept and check the same keys).
CONNECTION_KEYS: Final = SECURITY_KEYS


def split_connection_properties(
    properties: Mapping[str, object],
) -> tuple[dict[str, str], dict[str, object]]:
    """(the connection keys, as strings; the rest) of a client's properties."""
    connection = {key: str(value) for key, value in properties.items() if key in CONNECTION_KEYS}
    return connection, {key: value for key, value in properties.items() if key not in CONNECTION_KEYS}


def resolve_ssl_context(
    properties: Mapping[str, str], *, data_dir: Path = DEFAULT_DATA_DIR
) -> ssl.SSLContext | None:
    """The context that verifies brokers when ``security.protocol`` is SSL or SASL_SSL, else None.

    Read from ``properties`` when they say a protocol or give a credential; otherwise from the
    ``client.properties`` that ``resolve_credential`` falls back to, so the two agree."""
    chosen: Mapping[str, str] = properties
    if SECURITY_PROTOCOL not in properties and _credential_of(properties) is None:
        fallback = data_dir / "client.properties"
        if fallback.is_file() and not os.environ.get(SECRET_ENV):
            chosen = load_client_properties(fallback)
    return client_context(chosen) if uses_tls(chosen) else None


class ClientNode:
    """An actor system for client actors, able to reach the bootstrap servers and, once learnt,
    every broker. Use as ``async with ClientNode(...) as node:``."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        secret: str | ClientCredential,
        client_id: str = "actorlog-client",
        clock: Clock | None = None,
        max_body_bytes: int = 104_857_600,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.bootstrap_servers = parse_bootstrap_servers(bootstrap_servers)
        scheme = "http" if ssl_context is None else "https"
        self.client_id = client_id
        self.known_brokers: dict[int, BrokerEndpoint] = {}
        self.address_book = AddressBook()
        for index, (host, port) in enumerate(self.bootstrap_servers):
            self.address_book.set(self._bootstrap_node(index), f"{scheme}://{_url_host(host)}:{port}")
        self.credential = ClientCredential.of(secret)
        node_id = f"client-{client_id}-{uuid.uuid4().hex[:8]}"
        self.system = ActorSystem(
            node_id,
            clock=clock,
            rng=node_rng(fresh_seed(), node_id),
            transport=HttpTransport(
                wire_codec(),
                secret=self.credential.password,
                resolve=self.address_book.resolve,
                max_body_bytes=max_body_bytes,
                authorization=self.credential.authorization,
                tell_path=CLIENT_TELL_PATH,
                ask_path=CLIENT_ASK_PATH,
                ssl_context=ssl_context,
            ),
        )

    @staticmethod
    def _bootstrap_node(index: int) -> str:
        return f"bootstrap-{index}"

    @property
    def bootstrap_refs(self) -> tuple[ActorRef, ...]:
        """The broker actor behind each bootstrap server, in the order given."""
        return tuple(
            ActorRef(node_id=self._bootstrap_node(i), name=BROKER_ACTOR_NAME)
            for i in range(len(self.bootstrap_servers))
        )

    def learn(self, brokers: Iterable[BrokerEndpoint]) -> None:
        """Record where each broker (from a Metadata response) is reached."""
        for endpoint in brokers:
            self.address_book.set(broker_node(endpoint.broker_id), endpoint.url)
            self.known_brokers[endpoint.broker_id] = endpoint

    async def ask_first(self, targets: Sequence[ActorRef], message: object, *, timeout_ms: int) -> Any:
        """Ask each target in turn until one answers. A refused credential stops at once (no
        other broker will accept it either); when none answers, NETWORK_EXCEPTION."""
        failures: list[str] = []
        for target in targets:
            try:
                return await self.system.ask(target, message, timeout_ms=timeout_ms)
            except RemoteRequestError as error:
                if error.status == 401:
                    raise KafkaError(
                        ErrorCode.SASL_AUTHENTICATION_FAILED,
                        f"the broker refused this client's credential ({self.credential.describe()})",
                    ) from None
                failures.append(f"{target.node_id}: {error}")
            except TransportError as error:
                if "CERTIFICATE_VERIFY_FAILED" in str(error):
                    # Every broker has the same certificate authority: no other will verify either.
                    # Kafka's SslAuthenticationException has no code of its own; it is an
                    # authentication failure, which clients do not retry, as this must not be.
                    raise KafkaError(
                        ErrorCode.SASL_AUTHENTICATION_FAILED,
                        "SSL handshake failed: the broker's certificate did not verify "
                        f"({_verify_reason(error)}): set ssl.truststore.location to the PEM of the CA "
                        "that signed it",
                    ) from None
                failures.append(f"{target.node_id}: {error}")
        raise KafkaError(
            ErrorCode.NETWORK_EXCEPTION,
            "no broker answered: " + "; ".join(failures[-3:] or ["no broker known"]),
        )

    async def __aenter__(self) -> ClientNode:
        await self.system.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.system.__aexit__(exc_type, exc, traceback)


def _verify_reason(error: BaseException) -> str:
    text = str(error)
    start = text.find("certificate verify failed")
    return text[start:].split("(_ssl")[0].rstrip(" ]") if start >= 0 else "certificate verify failed"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
