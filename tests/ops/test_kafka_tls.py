"""TLS on the Kafka listener (``listener.security.protocol.map=...,KAFKA:SASL_SSL``): the keys, the
registration, and the listener in one process over real TLS sockets.

Kafka's model: a listener has a name (``KAFKA``) and the map gives its security protocol; SASL_SSL
takes the broker's keystore (``ssl.keystore.location``), the same one an HTTPS listener uses. The
listener runs on a loopback port with a real user store (in-memory ZooKeeper) and stub APIs;
requests are written by hand with kafka-python's ``kafka.protocol``. Certificates come from
``ops.local.tls_certs`` (the ``openssl`` command), a second CA stands for one the broker's
certificate does not chain to.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import ssl
import struct
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from actors.server import zk_data
from ops import broker_main
from ops.config import BrokerSettings, KafkaListener, settings_from_properties
from ops.kafka import codec as k
from ops.kafka.apis import KafkaApis
from ops.kafka.server import KafkaListener as KafkaServer
from ops.local.tls_certs import LocalCertificates
from ops.properties import ConfigError
from ops.security.users import UserStore
from ops.tls import client_context
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
    from kafka.protocol.sasl import SaslAuthenticateRequest as KpSaslAuthenticate
    from kafka.protocol.sasl import SaslAuthenticateResponse as KpSaslAuthenticateResponse
    from kafka.protocol.sasl import SaslHandshakeRequest as KpSaslHandshake
    from kafka.protocol.sasl import SaslHandshakeResponse as KpSaslHandshakeResponse

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

USER, PASSWORD = "alice", "alice-secret"
SASL_SSL_MAP = "HTTPS:SSL,KAFKA:SASL_SSL"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> LocalCertificates:
    made = LocalCertificates(tmp_path_factory.mktemp("tls"))
    made.ensure([1])
    return made


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA the broker's certificate does not chain to."""
    other = LocalCertificates(tmp_path_factory.mktemp("other-tls"))
    other.ensure([1])
    return other.ca_path


def _properties(certificates: LocalCertificates, **extra: str) -> dict[str, str]:
    return {
        "broker.id": "1",
        "listeners": "HTTPS://127.0.0.1:9093,KAFKA://127.0.0.1:19193",
        "listener.security.protocol.map": SASL_SSL_MAP,
        "log.dirs": "/tmp/unused",
        "zookeeper.connect": "127.0.0.1:2181",
        "internal.auth.secret": "a-secret-of-24-characters",
        "ssl.keystore.location": str(certificates.keystore_path(1)),
        "ssl.truststore.location": str(certificates.ca_path),
        **extra,
    }


# -------------------------------------------------------------------------------- the keys


def test_kafka_sasl_ssl_takes_the_brokers_keystore(certificates: LocalCertificates) -> None:
    settings = settings_from_properties(_properties(certificates))
    assert settings.kafka_listener == KafkaListener("127.0.0.1", 19193, "SASL_SSL")
    assert settings.kafka_listener.tls
    assert settings.advertised_kafka_listener == settings.kafka_listener
    assert settings.kafka_ssl_context is not None
    assert settings.kafka_ssl_context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert settings.server_ssl_context is not None  # the HTTPS listener keeps its own
    # Advertised under another name, the KAFKA listener keeps the protocol the map gives its name.
    advertised = settings_from_properties(
        _properties(certificates, **{"advertised.listeners": "HTTPS://b-1.svc:9093,KAFKA://b-1.svc:19193"})
    ).advertised_kafka_listener
    assert advertised == KafkaListener("b-1.svc", 19193, "SASL_SSL")


def test_the_map_decides_per_listener_name(certificates: LocalCertificates) -> None:
    # HTTPS between brokers, the Kafka listener left at its default: SASL_PLAINTEXT, no context.
    default = settings_from_properties(_properties(certificates, **{"listener.security.protocol.map": ""}))
    assert default.kafka_listener == KafkaListener("127.0.0.1", 19193, "SASL_PLAINTEXT")
    assert default.kafka_ssl_context is None
    # Plain HTTP between brokers, TLS for Kafka's clients: the keystore serves the KAFKA listener
    # alone, and the brokers verify nobody over plain HTTP.
    kafka_only = settings_from_properties(
        _properties(
            certificates,
            listeners="HTTP://127.0.0.1:9093,KAFKA://127.0.0.1:19193",
            **{"listener.security.protocol.map": "HTTP:PLAINTEXT,KAFKA:SASL_SSL"},
        )
    )
    assert kafka_only.kafka_ssl_context is not None
    assert (kafka_only.server_ssl_context, kafka_only.client_ssl_context) == (None, None)
    assert kafka_only.listener.url == "http://127.0.0.1:9093"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"ssl.keystore.location": "", "listeners": "HTTP://127.0.0.1:9093,KAFKA://127.0.0.1:19193"},
            "ssl.keystore.location is required for the KAFKA listener, which listener.security.protocol.map "
            "makes SASL_SSL",
        ),
        ({"ssl.keystore.location": "/nonexistent/broker.pem"}, "ssl.keystore.location: no readable file"),
        ({"listener.security.protocol.map": "KAFKA:SSL"}, "KAFKA can only be SASL_PLAINTEXT or SASL_SSL"),
        ({"listener.security.protocol.map": "KAFKA:PLAINTEXT"}, "always authenticates its clients with SASL"),
        ({"listener.security.protocol.map": "KAFKA_SSL:SASL_SSL"}, "NAME:PROTOCOL entries"),
        (
            {
                "listeners": "HTTP://127.0.0.1:9093,KAFKA://127.0.0.1:19193",
                "listener.security.protocol.map": "KAFKA:SASL_PLAINTEXT",
            },
            "set, but listeners is not HTTPS://host:port and has no KAFKA listener that "
            "listener.security.protocol.map makes SASL_SSL",
        ),
    ],
)
def test_bad_kafka_tls_settings_are_one_line_naming_the_key(
    certificates: LocalCertificates, change: dict[str, str], message: str
) -> None:
    properties = {key: value for key, value in _properties(certificates, **change).items() if value}
    with pytest.raises(ConfigError, match=message) as raised:
        settings_from_properties(properties)
    assert "\n" not in str(raised.value)


def test_a_keystore_that_is_not_pem_is_named(certificates: LocalCertificates, tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    properties = _properties(
        certificates,
        listeners="HTTP://127.0.0.1:9093,KAFKA://127.0.0.1:19193",
        **{"ssl.keystore.location": str(junk)},
    )
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location: .* is not a PEM certificate chain"):
        settings_from_properties({k: v for k, v in properties.items() if k != "ssl.truststore.location"})


def test_broker_start_without_a_keystore_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "server.properties"
    config.write_text(
        "broker.id=1\nlisteners=HTTP://127.0.0.1:0,KAFKA://127.0.0.1:0\n"
        "listener.security.protocol.map=KAFKA:SASL_SSL\n"
        f"log.dirs={tmp_path / 'logs'}\nzookeeper.connect=127.0.0.1:2181\n"
        "internal.auth.secret=a-secret-of-24-characters\n"
    )
    assert broker_main.main(["start", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("actorlog broker: ssl.keystore.location is required for the KAFKA listener"), err
    assert "Traceback" not in err


def test_the_registration_says_sasl_ssl_for_the_kafka_listener(certificates: LocalCertificates) -> None:
    settings = settings_from_properties(_properties(certificates))
    users = UserStore(MemoryCoordinator(MemoryZooKeeper()), clock=LoopClock())
    bound = KafkaServer("127.0.0.1", 19193, apis=lambda: None, users=users)  # as if bound, never started
    (kafka,) = broker_main._kafka_endpoints(settings, bound)
    assert kafka.security_protocol == "SASL_SSL"
    registration = zk_data.http_broker_registration(
        1, "127.0.0.1", 9093, timestamp_ms=5, tls=True, extra_endpoints=(kafka,)
    )
    data = zk_data.encode_broker_registration(registration)
    assert b'"endpoints":["HTTPS://127.0.0.1:9093","KAFKA://127.0.0.1:19193"]' in data
    assert b'"listener_security_protocol_map":{"HTTPS":"SSL","KAFKA":"SASL_SSL"}' in data
    assert b'"host":null,"port":-1' in data  # no PLAINTEXT endpoint, as Kafka writes it
    decoded = zk_data.decode_broker_registration(1, data)
    assert decoded.endpoint(zk_data.KAFKA_LISTENER_NAME) == kafka


# ------------------------------------------------------------------------- the listener


class _MetadataOnly(KafkaApis):
    """Answers Metadata with no brokers; records who asked."""

    def __init__(self) -> None:
        self.users: list[str] = []

    async def handle(self, header: k.RequestHeader, request: k.Request, user: str) -> k.Response | None:
        self.users.append(user)
        return k.MetadataResponse(
            throttle_time=k.duration(0), brokers=(), cluster_id="c", controller_id=k.BrokerId(1), topics=()
        )


@pytest_asyncio.fixture
async def tls_listener(
    certificates: LocalCertificates,
) -> AsyncIterator[tuple[KafkaServer, _MetadataOnly, BrokerSettings]]:
    settings = settings_from_properties(_properties(certificates))
    coordinator = MemoryCoordinator(MemoryZooKeeper())
    await coordinator.start()
    users = UserStore(coordinator, clock=LoopClock())
    await users.upsert(USER, PASSWORD)
    apis = _MetadataOnly()
    server = KafkaServer(
        "127.0.0.1", 0, apis=lambda: apis, users=users, ssl_context=settings.kafka_ssl_context
    )
    await server.start()
    try:
        yield server, apis, settings
    finally:
        await server.stop()
        await coordinator.close()


async def _request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Any) -> bytes:
    request.with_header(correlation_id=1, client_id="tls-test")
    writer.write(bytes(request.encode(header=True, framed=True)))
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        await writer.wait_closed()


@pytest.mark.asyncio
async def test_sasl_over_tls_then_requests(
    tls_listener: tuple[KafkaServer, _MetadataOnly, BrokerSettings], certificates: LocalCertificates
) -> None:
    server, apis, _ = tls_listener
    assert server.security_protocol == "SASL_SSL"
    trusting = client_context({"ssl.truststore.location": str(certificates.ca_path)})
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=trusting)
    try:
        assert writer.get_extra_info("ssl_object").version() in ("TLSv1.2", "TLSv1.3")
        versions = KpApiVersionsResponse.decode(
            await _request(reader, writer, KpApiVersionsRequest[2]()), version=2, header=True
        )
        assert versions.error_code == 0
        handshake = await _request(reader, writer, KpSaslHandshake[1](mechanism="PLAIN"))
        assert KpSaslHandshakeResponse.decode(handshake, version=1, header=True).error_code == 0
        token = f"\0{USER}\0{PASSWORD}".encode()
        answer = await _request(reader, writer, KpSaslAuthenticate[1](auth_bytes=token))
        assert KpSaslAuthenticateResponse.decode(answer, version=1, header=True).error_code == 0
        metadata = await _request(
            reader, writer, KpMetadataRequest[5](topics=None, allow_auto_topic_creation=False)
        )
        assert KpMetadataResponse.decode(metadata, version=5, header=True).cluster_id == "c"
        assert apis.users == [USER]
    finally:
        await _close(writer)


@pytest.mark.asyncio
async def test_plain_text_and_untrusting_clients_are_closed_and_the_listener_goes_on(
    tls_listener: tuple[KafkaServer, _MetadataOnly, BrokerSettings],
    certificates: LocalCertificates,
    other_ca: Path,
) -> None:
    server, _, _ = tls_listener
    # A plain-text Kafka client: its ApiVersions is no TLS record; the connection just ends.
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        request = KpApiVersionsRequest[0]()
        request.with_header(correlation_id=1, client_id="plain")
        writer.write(bytes(request.encode(header=True, framed=True)))
        with contextlib.suppress(ConnectionResetError):
            assert await asyncio.wait_for(reader.read(), timeout=10) == b""
    finally:
        await _close(writer)
    # A client that trusts another CA refuses the broker's certificate.
    untrusting = client_context({"ssl.truststore.location": str(other_ca)})
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        await asyncio.open_connection("127.0.0.1", server.port, ssl=untrusting)
    # Neither reached the protocol, and the next client is served.
    assert server.statistics().connections_total == 0
    trusting = client_context({"ssl.truststore.location": str(certificates.ca_path)})
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=trusting)
    try:
        versions = await _request(reader, writer, KpApiVersionsRequest[0]())
        assert KpApiVersionsResponse.decode(versions, version=0, header=True).error_code == 0
    finally:
        await _close(writer)
    assert server.statistics().connections_total == 1
