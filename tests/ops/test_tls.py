"""TLS on the HTTP listener (issue 23): the ``ssl.*`` keys, the HTTPS server and transport, and a
``cluster up --tls`` broker that a SCRAM client produces to and consumes from over HTTPS.

Certificates come from ``ops.local.tls_certs`` (the ``openssl`` command), made once per module.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from actors.common.protocol import BrokerEndpoint
from actors.server import zk_data
from ops.clients.admin import Admin
from ops.clients.connection import SECRET_ENV, load_client_properties
from ops.clients.consumer import Consumer
from ops.clients.producer import Producer
from ops.config import redacted, settings_from_properties
from ops.local.cluster import LocalCluster
from ops.local.tls_certs import LocalCertificates
from ops.properties import ConfigError
from ops.snapshots import read_snapshots
from runtime import ActorSystem
from runtime.ref import ActorRef
from runtime.transport.http import HttpServer, HttpTransport
from tests.support.runtime_actors import EchoActor, Ping, Pong, make_codec

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

SECRET = "a-secret-of-24-characters"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> LocalCertificates:
    made = LocalCertificates(tmp_path_factory.mktemp("tls"))
    made.ensure([1])
    return made


def _properties(certificates: LocalCertificates, **extra: str) -> dict[str, str]:
    return {
        "broker.id": "1",
        "listeners": "HTTPS://127.0.0.1:9093",
        "log.dirs": "/tmp/unused",
        "zookeeper.connect": "127.0.0.1:2181",
        "internal.auth.secret": SECRET,
        "ssl.keystore.location": str(certificates.keystore_path(1)),
        "ssl.truststore.location": str(certificates.ca_path),
        **extra,
    }


# -------------------------------------------------------------------------------- the keys


def test_an_https_listener_gives_tls_contexts_and_an_https_url(certificates: LocalCertificates) -> None:
    settings = settings_from_properties(_properties(certificates))
    assert settings.listener.tls
    assert settings.advertised_listener.url == "https://127.0.0.1:9093"
    assert settings.server_ssl_context is not None
    assert settings.client_ssl_context is not None
    assert settings.client_ssl_context.check_hostname
    off = settings_from_properties(_properties(certificates, **{"ssl.endpoint.identification.algorithm": ""}))
    assert off.client_ssl_context is not None
    assert not off.client_ssl_context.check_hostname
    assert redacted({"ssl.keystore.password": "hush"}) == {"ssl.keystore.password": "[redacted]"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ssl.keystore.location": ""}, "ssl.keystore.location is required"),
        ({"ssl.keystore.location": "/nonexistent/broker.pem"}, "ssl.keystore.location: no readable file"),
        ({"ssl.truststore.location": "/nonexistent/ca.pem"}, "ssl.truststore.location: no readable file"),
        ({"ssl.endpoint.identification.algorithm": "dns"}, "ssl.endpoint.identification.algorithm"),
        ({"advertised.listeners": "HTTP://127.0.0.1:9093"}, "advertised.listeners must use the scheme"),
        ({"listeners": "SSL://127.0.0.1:9093"}, "only the HTTP and HTTPS listeners"),
        ({"listeners": "HTTP://127.0.0.1:9093"}, "but listeners is not HTTPS"),
    ],
)
def test_bad_tls_keys_are_one_line_naming_the_key(
    certificates: LocalCertificates, change: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        settings_from_properties(_properties(certificates, **change))
    assert "\n" not in str(raised.value)


def test_a_file_that_is_not_pem_is_named(certificates: LocalCertificates, tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location: .* is not a PEM certificate chain"):
        settings_from_properties(_properties(certificates, **{"ssl.keystore.location": str(junk)}))
    with pytest.raises(ConfigError, match=r"ssl\.truststore\.location: .* is not a PEM bundle"):
        settings_from_properties(_properties(certificates, **{"ssl.truststore.location": str(junk)}))


def test_the_scheme_travels_with_the_endpoint() -> None:
    registration = zk_data.http_broker_registration(1, "b1", 9093, timestamp_ms=1, tls=True)
    decoded = zk_data.decode_broker_registration(1, zk_data.encode_broker_registration(registration))
    assert [e.connection_string for e in decoded.endpoints] == ["HTTPS://b1:9093"]
    assert decoded.endpoints[0].security_protocol == "SSL"
    assert BrokerEndpoint(broker_id=1, host="b1", port=9093, security_protocol="SSL").url == "https://b1:9093"
    assert BrokerEndpoint(broker_id=1, host="b1", port=9092).url == "http://b1:9092"


# ------------------------------------------------------------------- the server and transport


@pytest.mark.asyncio
async def test_the_https_server_refuses_plain_http_and_unverified_clients(
    certificates: LocalCertificates,
) -> None:
    settings = settings_from_properties(_properties(certificates))
    server_transport = HttpTransport(make_codec(), secret=SECRET, resolve=lambda _: None)
    server = HttpServer(
        "127.0.0.1", 0, routes=server_transport.routes(), max_body_bytes=1 << 20,
        ssl_context=settings.server_ssl_context,
    )  # fmt: skip
    await server.start()
    try:
        assert server.url.startswith("https://")
        async with ActorSystem("server", transport=server_transport) as system:
            system.spawn("echo", EchoActor)
            trusted = HttpTransport(
                make_codec(), secret=SECRET, resolve={"server": server.url}.get,
                ssl_context=settings.client_ssl_context,
            )  # fmt: skip
            async with ActorSystem("client", transport=trusted) as client:
                reply = await client.ask(
                    ActorRef(node_id="server", name="echo"), Ping(sequence=1), timeout_ms=5000
                )
            assert reply == Pong(sequence=1)
            plain = f"http://127.0.0.1:{server.port}/healthz"
            async with aiohttp.ClientSession() as session:
                with pytest.raises(aiohttp.ClientError):
                    async with session.get(plain, timeout=aiohttp.ClientTimeout(total=5)) as answer:
                        await answer.read()
                with pytest.raises(
                    aiohttp.ClientConnectorCertificateError, match="certificate verify failed"
                ):
                    async with session.get(f"{server.url}/healthz") as answer:
                        await answer.read()
    finally:
        await server.stop()


# -------------------------------------------------------------------------- a TLS cluster


@pytest.mark.integration
@pytest.mark.zk
@pytest.mark.asyncio
async def test_a_tls_cluster_serves_a_scram_client_over_https(zk_connect_string: str, tmp_path: Path) -> None:
    async with LocalCluster(
        tmp_path / "data", brokers=1, zookeeper_connect=zk_connect_string, base_port=0, tls=True
    ) as cluster:
        client_file = cluster.data_dir / "client.properties"
        client = load_client_properties(client_file)
        assert client["security.protocol"] == "SASL_SSL"
        assert (cluster.data_dir / "tls" / "broker-1.pem").stat().st_mode & 0o777 == 0o600
        assert cluster.processes[1].url.startswith("https://")
        bootstrap = cluster.bootstrap_servers
        async with Admin(bootstrap, command_config=client_file) as admin:
            await admin.create_topic("secure", num_partitions=1, replication_factor=1)
        async with Producer(bootstrap, properties_file=client_file) as producer:
            sent = await producer.send("secure", b"over https")
        async with Consumer(bootstrap, config_file=client_file) as consumer:
            consumer.assign(await consumer.partitions_for("secure"))
            consumer.seek_to_beginning()
            records = await consumer.poll(timeout_ms=10_000)
        assert [(r.offset, r.value) for r in records] == [(sent.offset, b"over https")]
        # A client that does not trust the cluster's CA is refused by verification, in one line.
        untrusting = tmp_path / "untrusting.properties"
        untrusting.write_text(
            "".join(f"{k}={v}\n" for k, v in client.items() if k != "ssl.truststore.location")
        )
        with pytest.raises(Exception, match="certificate did not verify") as refused:
            async with Admin(bootstrap, command_config=untrusting) as admin:
                await admin.metadata()
        assert "\n" not in str(refused.value)

        # The snapshot exporter, as an operator runs it: the membership says the broker's listener
        # is SSL, so /metrics is scraped at https://, verified with the client's truststore.
        exported = await _actorlog(
            "snapshots", "export", "--bootstrap-server", bootstrap, "--command-config", str(client_file),
            "--rounds", "1", "--out", str(tmp_path / "snapshots"),
        )  # fmt: skip
        assert exported.returncode == 0, exported.stderr
        assert re.search(r"1 brokers, \d+ files, [1-9]\d* samples", exported.stdout), exported.stdout
        assert "skipped" not in exported.stdout
        assert set(read_snapshots(tmp_path / "snapshots").column("broker").to_pylist()) == {"1"}
        # A plain-text client pointed at it is told what to set, in one line.
        plain = tmp_path / "plain.properties"
        plain.write_text(
            "".join(f"{k}={v}\n" for k, v in client.items() if not k.startswith(("ssl.", "security.")))
        )
        refused_export = await _actorlog(
            "snapshots", "export", "--bootstrap-server", bootstrap, "--command-config", str(plain),
            "--rounds", "1", "--out", str(tmp_path / "refused"),
        )  # fmt: skip
        assert refused_export.returncode == 1
        assert refused_export.stderr.count("\n") == 1, refused_export.stderr
        assert "serves HTTPS: set security.protocol=SSL" in refused_export.stderr


async def _actorlog(*arguments: str) -> subprocess.CompletedProcess[str]:
    """``actorlog ARGUMENTS`` in a child process, awaited (the cluster's ZooKeeper client shares
    this event loop)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ops", *arguments,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**{k: v for k, v in os.environ.items() if k != SECRET_ENV}, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return subprocess.CompletedProcess(list(arguments), process.returncode, out.decode(), err.decode())
