"""TLS on Kubernetes (components/tls, overlays/tls): cert-manager's objects, the names, HTTPS end to end.

The certificates are issued offline as cert-manager would issue them for the rendered Issuers and
Certificates (``cert_manager.py``: the same chain, keys, ``tls-combined.pem``), laid out in the
pods' volumes, and the brokers' configuration is loaded through the real loader with them, so
``ssl.keystore.location`` and ``ssl.truststore.location`` are the files cert-manager writes. Then real
TLS handshakes: a broker's listener context against another broker's client context at every
advertised name, the exporter's (from the client.properties its init container writes) and the
broker pods' tools' against the bootstrap Service's name, and a Kafka client's (the CA of the
Secret, as k8s/README.md tells users to fetch it) against each broker's SASL_SSL Kafka listener.
The certificate must name every host a broker advertises, at any ordinal, and the names must follow
the overlay's namespace.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ops.clients.connection import load_client_properties, resolve_ssl_context
from ops.config import BrokerSettings
from ops.snapshots import parse_bootstrap_servers
from ops.tls import client_context
from tests.k8s import cert_manager, manifests
from tests.k8s.manifests import POD_INDEX_LABEL, Doc, PodIdentity
from tests.k8s.test_client_users import exporter_pods
from tests.k8s.test_consistency import (
    EXTERNAL_SECRETS,
    IssuedSecrets,
    RunningContainer,
    all_pods,
    broker_pods,
    load,
    parse_actorlog,
    pod_files,
)

pytestmark = pytest.mark.k8s

TLS_OVERLAYS = {"tls"}


def _tls_brokers(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> list[tuple[RunningContainer, BrokerSettings]]:
    loaded = [(r, load(r, rendered[r.overlay], tmp_path, issued)) for r in broker_pods(rendered)]
    assert {r.overlay for r, settings in loaded if settings.listener.tls} == TLS_OVERLAYS
    return [(r, settings) for r, settings in loaded if settings.listener.tls]


def _broker_certificate(docs: list[Doc], running: RunningContainer) -> Doc:
    """The Certificate whose Secret holds the broker's keystore (ssl.keystore.location's volume)."""
    location = running.env["ACTORLOG_CFG_SSL_KEYSTORE_LOCATION"]
    volumes = {v["name"]: v for v in running.pod_spec["volumes"]}
    (mount,) = [
        m for m in running.container["volumeMounts"] if location.startswith(m["mountPath"].rstrip("/") + "/")
    ]
    secret = volumes[mount["name"]]["secret"]["secretName"]
    (certificate,) = [c for c in manifests.of_kind(docs, "Certificate") if c["spec"]["secretName"] == secret]
    return certificate


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str) -> str:
    """A TLS handshake over a socket pair; the client verifies ``host``. Returns the TLS version."""
    server_end, client_end = socket.socketpair()
    failures: list[BaseException] = []

    def serve() -> None:
        try:
            with server.wrap_socket(server_end, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError) as error:
            failures.append(error)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(client_end, server_hostname=host) as tls:
            tls.sendall(b"x")
            version = tls.version()
    finally:
        client_end.close()
        thread.join(timeout=10)
    assert not failures, failures
    assert version is not None
    return version


def test_only_the_tls_overlay_serves_https_with_kafkas_keys(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    for running, settings in _tls_brokers(rendered, tmp_path, issued):
        assert settings.advertised_listener.tls
        assert settings.server_ssl_context is not None
        assert settings.client_ssl_context is not None
        # Peers' host names are verified (Kafka's default ssl.endpoint.identification.algorithm=https).
        assert settings.client_ssl_context.check_hostname
        assert settings.client_ssl_context.verify_mode == ssl.CERT_REQUIRED
        files = pod_files(running, rendered[running.overlay], issued, tmp_path)
        keystore = files.local("broker", running.env["ACTORLOG_CFG_SSL_KEYSTORE_LOCATION"]).read_bytes()
        assert keystore.startswith(b"-----BEGIN PRIVATE KEY-----"), "PKCS#8, as Kafka's PEM keystore wants"
        # Kafka's clients get TLS too: the KAFKA listener is SASL_SSL with the same keystore.
        assert running.env["ACTORLOG_CFG_LISTENER_SECURITY_PROTOCOL_MAP"] == "HTTPS:SSL,KAFKA:SASL_SSL"
        assert settings.kafka_listener is not None
        assert settings.kafka_listener.security_protocol == "SASL_SSL"
        assert settings.kafka_ssl_context is not None


def test_the_issuers_chain_from_a_self_signed_ca_to_the_brokers_certificate(
    rendered: dict[str, list[Doc]],
) -> None:
    for running in broker_pods(rendered):
        docs = rendered[running.overlay]
        if running.overlay not in TLS_OVERLAYS:
            assert not manifests.of_kind(docs, "Certificate"), running.overlay
            continue
        certificate = _broker_certificate(docs, running)
        spec = certificate["spec"]
        assert spec["privateKey"]["encoding"] == "PKCS8"
        assert {"type": "CombinedPEM"} in spec["additionalOutputFormats"]
        assert running.env["ACTORLOG_CFG_SSL_KEYSTORE_LOCATION"].endswith("/" + cert_manager.COMBINED_PEM_KEY)
        assert running.env["ACTORLOG_CFG_SSL_TRUSTSTORE_LOCATION"].endswith("/ca.crt")
        assert "server auth" in spec["usages"]
        assert not spec.get("isCA")
        ca_issuer = cert_manager.issuer_of(docs, certificate)["spec"]
        (ca,) = [
            c
            for c in manifests.of_kind(docs, "Certificate")
            if c["spec"]["secretName"] == ca_issuer["ca"]["secretName"]
        ]
        assert ca["spec"]["isCA"] is True
        assert "selfSigned" in cert_manager.issuer_of(docs, ca)["spec"]


def _covered_hosts(docs: list[Doc], settings: BrokerSettings, running: RunningContainer) -> list[str]:
    """The names brokers are reached by: advertised, and the bootstrap Services' in every form."""
    namespace = running.pod.namespace
    assert settings.advertised_kafka_listener is not None
    hosts = [settings.advertised_listener.host, settings.advertised_kafka_listener.host]
    for service in manifests.of_kind(docs, "Service"):
        if "clusterIP" not in service["spec"] and manifests.selector_matches(
            service["spec"]["selector"], running.pod.labels
        ):
            name = service["metadata"]["name"]
            hosts += [
                name,
                f"{name}.{namespace}",
                f"{name}.{namespace}.svc",
                f"{name}.{namespace}.svc.cluster.local",
            ]
    return hosts


def test_the_certificate_names_every_advertised_broker_and_the_bootstrap_service(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    for running, settings in _tls_brokers(rendered, tmp_path, issued):
        docs = rendered[running.overlay]
        certificate = _broker_certificate(docs, running)
        for host in _covered_hosts(docs, settings, running):
            assert cert_manager.covers(certificate, host), (
                f"{running.overlay}: {host} is not in {certificate['spec']['dnsNames']}"
            )
        # Scaling out: a broker at an ordinal the StatefulSet does not have yet is named too.
        ordinal = 42
        labels = {**running.pod.labels, POD_INDEX_LABEL: str(ordinal)}
        later = PodIdentity(
            f"{running.workload['metadata']['name']}-{ordinal}", running.pod.namespace, labels
        )
        env = manifests.container_environment(running.container, later, docs, EXTERNAL_SECRETS)
        scaled = RunningContainer(
            **{**{n: getattr(running, n) for n in RunningContainer.__slots__}, "pod": later, "env": env}
        )
        host = load(scaled, docs, tmp_path, issued).advertised_listener.host
        assert host.startswith(later.name + "."), host
        assert cert_manager.covers(certificate, host), host
        # ... and nothing in another namespace.
        assert not cert_manager.covers(certificate, host.replace(f".{running.pod.namespace}.", ".elsewhere."))


def test_brokers_and_clients_verify_the_issued_certificate(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    brokers = _tls_brokers(rendered, tmp_path, issued)
    for (running, server), (_, peer) in zip(brokers, brokers[1:] + brokers[:1], strict=True):
        assert server.server_ssl_context is not None
        assert peer.client_ssl_context is not None
        # A broker reaches another at its advertised name, verifying the certificate and the name.
        assert _handshake(
            server.server_ssl_context, peer.client_ssl_context, server.advertised_listener.host
        ) in (
            "TLSv1.2",
            "TLSv1.3",
        )
        # The verification bites: a name the certificate does not hold is refused.
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(server.server_ssl_context, peer.client_ssl_context, "actorlog-broker-0.example.com")
        # Tools run in a broker pod (`kubectl exec`) with the mounted client.properties.
        files = pod_files(running, rendered[running.overlay], issued, tmp_path)
        tools = files.local("broker", "/etc/actorlog-client/client.properties")
        properties = {k: files.localize("broker", v) for k, v in load_client_properties(tools).items()}
        context = resolve_ssl_context(properties, data_dir=tmp_path)
        assert context is not None
        _handshake(server.server_ssl_context, context, "actorlog-bootstrap")
    # The exporter, through its own client.properties, to the bootstrap Service it is given.
    exporters = [e for e in exporter_pods(rendered, tmp_path, issued) if e.running.overlay in TLS_OVERLAYS]
    assert exporters
    for exporter in exporters:
        listening = next(s for r, s in brokers if r.overlay == exporter.running.overlay).server_ssl_context
        assert listening is not None
        context = resolve_ssl_context(exporter.properties, data_dir=tmp_path)
        assert context is not None
        _, arguments = parse_actorlog(exporter.running.argv)
        for url in parse_bootstrap_servers(arguments.bootstrap_server, tls=True):
            host = url.removeprefix("https://").rpartition(":")[0]
            _handshake(listening, context, host)


def test_kafka_clients_verify_the_kafka_listener_with_the_secrets_ca(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    """A Kafka client outside the brokers trusts ca.crt of the brokers' Secret (k8s/README.md shows
    how to fetch it) and reaches each broker's SASL_SSL listener at its advertised name, after
    bootstrapping from the bootstrap Service, in every form the certificate must hold."""
    checked = 0
    for running, settings in _tls_brokers(rendered, tmp_path, issued):
        docs = rendered[running.overlay]
        secret = _broker_certificate(docs, running)["spec"]["secretName"]
        ca = tmp_path / f"{running.overlay}-{running.pod.name}-ca.crt"
        ca.write_bytes(issued[running.overlay][secret]["ca.crt"])
        client = client_context({"ssl.truststore.location": str(ca), "ssl.truststore.type": "PEM"})
        assert settings.kafka_ssl_context is not None
        assert settings.advertised_kafka_listener is not None
        namespace = running.pod.namespace
        for host in (
            settings.advertised_kafka_listener.host,
            "actorlog-bootstrap",
            f"actorlog-bootstrap.{namespace}.svc",
            f"actorlog-bootstrap.{namespace}.svc.cluster.local",
        ):
            assert _handshake(settings.kafka_ssl_context, client, host) in ("TLSv1.2", "TLSv1.3")
            checked += 1
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(settings.kafka_ssl_context, client, "kafka.example.com")
    assert checked


def test_only_broker_pods_get_the_private_key(rendered: dict[str, list[Doc]], issued: IssuedSecrets) -> None:
    checked = 0
    for overlay in TLS_OVERLAYS:
        docs = rendered[overlay]
        keystores = {c["spec"]["secretName"] for c in manifests.of_kind(docs, "Certificate")}
        brokers = {r.workload["metadata"]["name"] for r in broker_pods({overlay: docs})}
        for running in all_pods({overlay: docs}):
            for volume in running.pod_spec.get("volumes", []):
                if volume.get("secret", {}).get("secretName") not in keystores:
                    continue
                # Readable by the pod's group only: the kubelet gives the files the pod's fsGroup.
                assert volume["secret"]["defaultMode"] == 0o440, (overlay, volume)
                assert "fsGroup" in running.pod_spec["securityContext"], overlay
                if running.workload["metadata"]["name"] not in brokers:
                    assert [item["key"] for item in volume["secret"].get("items", [{"key": "*"}])] == [
                        "ca.crt"
                    ], f"{overlay}: {running.workload['metadata']['name']} mounts more than the CA"
                checked += 1
    assert checked


def test_prometheus_scrapes_the_brokers_over_verified_https(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    tls = {
        r.overlay: s.listener.tls
        for r, s in ((r, load(r, rendered[r.overlay], tmp_path, issued)) for r in broker_pods(rendered))
    }
    checked = 0
    for overlay, docs in rendered.items():
        for monitor in manifests.of_kind(docs, "ServiceMonitor"):
            for endpoint in monitor["spec"]["endpoints"]:
                assert endpoint.get("scheme", "http") == ("https" if tls[overlay] else "http"), overlay
                if not tls[overlay]:
                    assert "tlsConfig" not in endpoint
                    continue
                (broker,) = [r for r in broker_pods({overlay: docs}) if r.pod.name.endswith("-0")]
                certificate = _broker_certificate(docs, broker)
                config = endpoint["tlsConfig"]
                assert config["ca"]["secret"] == {"name": certificate["spec"]["secretName"], "key": "ca.crt"}
                assert not config.get("insecureSkipVerify")
                # Targets are pod IPs: the name verified is serverName, which the certificate must hold.
                assert cert_manager.covers(certificate, config["serverName"]), config["serverName"]
                checked += 1
        # ZooKeeper's metrics provider has no TLS: its PodMonitor stays http.
        for monitor in manifests.of_kind(docs, "PodMonitor"):
            assert all(e.get("scheme", "http") == "http" for e in monitor["spec"]["podMetricsEndpoints"])
    assert checked


def test_the_names_follow_the_overlays_namespace(kubectl_path: str, tmp_path: Path) -> None:
    """Render with another namespace (set where prod sets it): the certificate's names and the
    ServiceMonitor's serverName follow, and the brokers' advertised names stay covered."""
    tree = tmp_path / "k8s"
    shutil.copytree(manifests.K8S, tree)
    for kustomization in tree.glob("overlays/*/kustomization.yaml"):
        data = yaml.safe_load(kustomization.read_text())
        if data.get("namespace") == "actorlog":
            data["namespace"] = "kafka-prod"
            kustomization.write_text(yaml.safe_dump(data))
    docs = manifests.render(tree / "overlays" / "tls", kubectl_path)
    placeholders = [text for text in _strings(docs) if ".NAMESPACE" in text]
    assert not placeholders, "placeholders the replacements did not reach"
    (certificate,) = [c for c in manifests.of_kind(docs, "Certificate") if not c["spec"].get("isCA")]
    assert not [name for name in certificate["spec"]["dnsNames"] if ".actorlog." in name + "."]
    assert cert_manager.covers(certificate, "actorlog-broker-1.actorlog-brokers.kafka-prod.svc")
    assert cert_manager.covers(certificate, "actorlog-bootstrap.kafka-prod.svc.cluster.local")
    (monitor,) = manifests.of_kind(docs, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["tlsConfig"]["serverName"] == "actorlog-brokers.kafka-prod.svc"


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_wildcards_match_as_openssl_matches_them() -> None:
    assert cert_manager.dns_name_matches("*.a.ns.svc", "b-0.a.ns.svc")
    assert not cert_manager.dns_name_matches("*.a.ns.svc", "x.b-0.a.ns.svc")  # one label only
    assert not cert_manager.dns_name_matches("*.a.ns.svc", "a.ns.svc")
    assert not cert_manager.dns_name_matches("*.svc", "a.svc")  # too broad for OpenSSL
    assert cert_manager.dns_name_matches("Actorlog-Bootstrap", "actorlog-bootstrap")
