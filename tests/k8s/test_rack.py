"""broker.rack on Kubernetes (k8s/components/rack): each broker's rack is its node's
``topology.kubernetes.io/zone``, as Strimzi sets it.

The wiring is checked on the rendered overlays: the init container learns its node from the
downward API (``spec.nodeName``), reads it from the Kubernetes API with a projected service account
token mounted into it alone, under a service account whose ClusterRoleBinding grants ``get nodes``
and nothing else, and writes the file the broker's ``--config`` names, on a volume both share. The
init script itself (``write_rack.py``, as the ConfigMap carries it) runs for real against a
stand-in API (Node objects as ``file:`` URLs, ``manifests.fake_kubernetes_api``), and each broker's
configuration is loaded by the real loader from what it wrote.
"""

from __future__ import annotations

import http.server
import json
import shutil
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.local.tls_certs import LocalCertificates
from ops.properties import parse_properties
from tests.k8s import manifests
from tests.k8s.manifests import ZONE_LABEL, Doc, PodIdentity
from tests.k8s.test_consistency import (
    EXTERNAL_SECRETS,
    IssuedSecrets,
    RunningContainer,
    broker_pods,
    load,
    parse_actorlog,
)

pytestmark = pytest.mark.k8s

WITH_RACKS = {"prod", "monitoring", "spark-operator", "tls"}
SCRIPT = Path(__file__).resolve().parents[2] / "k8s" / "components" / "rack" / "write_rack.py"


def rack_init(running: RunningContainer) -> Doc | None:
    found = [c for c in running.pod_spec.get("initContainers", []) if c["name"] == "rack"]
    return found[0] if found else None


def test_brokers_take_their_nodes_zone_as_broker_rack(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    racks: dict[str, set[str | None]] = {}
    for running in broker_pods(rendered):
        settings = load(running, rendered[running.overlay], tmp_path, issued)
        ordinal = running.pod.labels[manifests.POD_INDEX_LABEL]
        assert running.pod.node_name == f"node-{ordinal}"
        expected = f"zone-{ordinal}" if running.overlay in WITH_RACKS else None
        assert settings.rack == expected, (running.overlay, running.pod.name)
        racks.setdefault(running.overlay, set()).add(settings.rack)
    assert set(racks) >= WITH_RACKS | {"dev"}
    # dev runs without racks: every broker has none (a mix would refuse topic creation).
    assert racks["dev"] == {None}


def test_the_init_container_reads_its_node_with_a_token_only_it_holds(rendered: dict[str, list[Doc]]) -> None:
    checked = 0
    for running in broker_pods(rendered):
        init = rack_init(running)
        if running.overlay not in WITH_RACKS:
            assert init is None, running.overlay
            continue
        assert init is not None, running.overlay
        docs = rendered[running.overlay]
        namespace = running.workload["metadata"]["namespace"]
        spec = running.pod_spec
        # The node's name from the downward API.
        (node_name,) = [e for e in init["env"] if e["name"] == "NODE_NAME"]
        assert node_name["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
        env = manifests.container_environment(init, running.pod, docs, EXTERNAL_SECRETS)
        assert env["RACK_TOPOLOGY_KEY"] == ZONE_LABEL
        # The pod's service account may get nodes, and nothing else, cluster-wide.
        account = spec["serviceAccountName"]
        bindings = [
            b
            for b in manifests.of_kind(docs, "ClusterRoleBinding")
            if {"kind": "ServiceAccount", "name": account, "namespace": namespace} in b["subjects"]
        ]
        assert len(bindings) == 1, running.overlay
        role = manifests.named(docs, "ClusterRole", bindings[0]["roleRef"]["name"])
        assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
        assert manifests.named(docs, "ServiceAccount", account)["metadata"]["namespace"] == namespace
        # No token for the pod's containers by default; the projected one is mounted by the init
        # container only, where SERVICE_ACCOUNT_DIR says.
        assert spec["automountServiceAccountToken"] is False
        volumes = {v["name"]: v for v in spec["volumes"]}
        token_volumes = {
            name
            for name, v in volumes.items()
            if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))
        }
        assert len(token_volumes) == 1
        (token_volume,) = token_volumes
        for container in manifests.all_containers(spec):
            mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
            if container is init:
                assert mounts[token_volume] == env["SERVICE_ACCOUNT_DIR"]
            else:
                assert token_volume not in mounts, container["name"]
        # The file it writes is the broker's --config, on a volume both mount.
        _, arguments = parse_actorlog(running.argv)
        assert env["CONFIG_OUT"] == arguments.config
        shared = [
            name
            for name, path in ((m["name"], m["mountPath"]) for m in running.container["volumeMounts"])
            if arguments.config.startswith(path.rstrip("/") + "/")
        ]
        (config_volume,) = shared
        assert "emptyDir" in volumes[config_volume]
        assert any(
            m["name"] == config_volume and env["CONFIG_OUT"].startswith(m["mountPath"].rstrip("/") + "/")
            for m in init["volumeMounts"]
        )
        # It starts from the brokers' ConfigMap file, which the broker no longer reads directly.
        assert manifests.container_environment(init, running.pod, docs, EXTERNAL_SECRETS)[
            "CONFIG_TEMPLATE"
        ] in manifests.config_map_files(docs, spec, init)
        checked += 1
    assert checked >= len(WITH_RACKS)


def test_the_configmap_carries_the_script_in_the_repository(rendered: dict[str, list[Doc]]) -> None:
    for running in broker_pods(rendered):
        init = rack_init(running)
        if init is None:
            continue
        files = manifests.config_map_files(rendered[running.overlay], running.pod_spec, init)
        assert files[manifests.command_line(init, {})[1]] == SCRIPT.read_text(encoding="utf-8")


# --- the script, run here -------------------------------------------------------------------------


def run_script(
    tmp_path: Path, node: Doc | None, template: str, node_name: str = "node-7"
) -> tuple[int, str, Path]:
    """write_rack.py against a stand-in API holding ``node`` (none: an API without that node)."""
    api = manifests.fake_kubernetes_api(tmp_path / "api", [node] if node is not None else [])
    (tmp_path / "server.properties").write_text(template, encoding="utf-8")
    out = tmp_path / "out" / "server.properties"
    out.parent.mkdir()
    init: Doc = {"name": "rack", "command": ["python", str(SCRIPT)]}
    files = manifests.PodFiles(tmp_path, {"rack": ()})
    env = {
        "NODE_NAME": node_name,
        "RACK_TOPOLOGY_KEY": ZONE_LABEL,
        "CONFIG_TEMPLATE": str(tmp_path / "server.properties"),
        "CONFIG_OUT": str(out),
    }
    done = manifests.run_container(init, env, files, extra_env={"KUBERNETES_API_URL": api})
    return done.returncode, done.stderr, out


def node_with(labels: dict[str, str], name: str = "node-7") -> Doc:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def test_the_script_appends_the_zone_to_the_brokers_properties(tmp_path: Path) -> None:
    template = "broker.rack=stale\nzookeeper.connect=zk:2181/actorlog\nnum.partitions=3"
    code, stderr, out = run_script(tmp_path, node_with({ZONE_LABEL: "eu-west-1b", "other": "x"}), template)
    assert code == 0, stderr
    written = out.read_text(encoding="utf-8")
    assert written.startswith(template + "\n")
    assert written.splitlines()[-1] == "broker.rack=eu-west-1b"
    # The last occurrence wins, as for Kafka's properties files.
    assert parse_properties(written) == {
        "broker.rack": "eu-west-1b",
        "zookeeper.connect": "zk:2181/actorlog",
        "num.partitions": "3",
    }
    assert not list(out.parent.glob("*.tmp"))


@pytest.mark.parametrize(
    ("node", "message"),
    [
        (
            node_with({"kubernetes.io/hostname": "node-7"}),
            "node node-7 has no label topology.kubernetes.io/zone",
        ),
        (node_with({ZONE_LABEL: "bad value!"}), "node node-7 has no label topology.kubernetes.io/zone"),
        (None, "GET file:"),
    ],
    ids=["no zone label", "not a label value", "no such node"],
)
def test_without_a_zone_the_pod_stops_with_one_line(tmp_path: Path, node: Doc | None, message: str) -> None:
    code, stderr, out = run_script(tmp_path, node, "num.partitions=3\n")
    assert code == 1
    assert len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith("broker.rack: "), stderr
    assert message in stderr, stderr
    assert not out.exists()


def test_each_pod_reads_its_own_node(tmp_path: Path) -> None:
    """Two pods on two nodes of one stand-in API get their own zones."""
    api = manifests.fake_kubernetes_api(tmp_path / "api", ["node-0", "node-1"])
    for node in ("node-0", "node-1"):
        pod = PodIdentity(f"actorlog-broker-{node[-1]}", "actorlog", {}, node_name=node)
        env = manifests.container_environment(
            {"env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]},
            pod,
            [],
            {},
        )
        (tmp_path / node).mkdir()
        (tmp_path / node / "t.properties").write_text("num.partitions=1\n")
        env |= {
            "CONFIG_TEMPLATE": str(tmp_path / node / "t.properties"),
            "CONFIG_OUT": str(tmp_path / node / "o"),
        }
        done = manifests.run_container(
            {"name": "rack", "command": ["python", str(SCRIPT)]},
            env,
            manifests.PodFiles(tmp_path, {"rack": ()}),
            extra_env={"KUBERNETES_API_URL": api},
        )
        assert done.returncode == 0, done.stderr
        assert parse_properties((tmp_path / node / "o").read_text())["broker.rack"] == f"zone-{node[-1]}"


# --- the in-cluster path: HTTPS, the service account's token and the cluster's CA ----------------


class _NodeApi(http.server.BaseHTTPRequestHandler):
    """GET /api/v1/nodes/node-7 with the expected bearer token → the Node; anything else → 403/404."""

    token = "a-service-account-token"

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {self.token}":
            self.send_error(403, "Forbidden")
            return
        if self.path != "/api/v1/nodes/node-7":
            self.send_error(404, "Not Found")
            return
        body = json.dumps(node_with({ZONE_LABEL: "zone-https"})).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
        pass


@pytest.fixture(scope="module")
def https_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, LocalCertificates]]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make the stand-in API server's certificate")
    certificates = LocalCertificates(tmp_path_factory.mktemp("api-tls"))
    certificates.ensure([1])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates.keystore_path(1))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NodeApi)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], certificates
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def run_in_cluster(tmp_path: Path, port: int, ca: bytes, token: str) -> tuple[int, str, Path]:
    account = tmp_path / "serviceaccount"
    account.mkdir(parents=True)
    (account / "token").write_text(token + "\n")
    (account / "ca.crt").write_bytes(ca)
    (tmp_path / "server.properties").write_text("num.partitions=3\n")
    out = tmp_path / "server.out.properties"
    env = {
        "NODE_NAME": "node-7",
        "CONFIG_TEMPLATE": str(tmp_path / "server.properties"),
        "CONFIG_OUT": str(out),
        "SERVICE_ACCOUNT_DIR": str(account),
        # What the kubelet gives every container (the API's Service address).
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(port),
    }
    init: Doc = {"name": "rack", "command": ["python", str(SCRIPT)]}
    done = manifests.run_container(init, env, manifests.PodFiles(tmp_path, {"rack": ()}))
    return done.returncode, done.stderr, out


def test_in_the_cluster_it_asks_the_api_over_verified_https_with_its_token(
    tmp_path: Path, https_api: tuple[int, LocalCertificates]
) -> None:
    port, certificates = https_api
    code, stderr, out = run_in_cluster(tmp_path, port, certificates.ca_path.read_bytes(), _NodeApi.token)
    assert code == 0, stderr
    assert parse_properties(out.read_text())["broker.rack"] == "zone-https"


def test_a_refused_token_or_an_unknown_ca_stops_the_pod_with_one_line(
    tmp_path: Path, https_api: tuple[int, LocalCertificates]
) -> None:
    port, certificates = https_api
    code, stderr, _ = run_in_cluster(tmp_path / "a", port, certificates.ca_path.read_bytes(), "stolen")
    assert code == 1
    assert len(stderr.splitlines()) == 1
    assert "HTTP 403" in stderr
    other = LocalCertificates(tmp_path / "other-ca")
    other.ensure([])
    code, stderr, _ = run_in_cluster(tmp_path / "b", port, other.ca_path.read_bytes(), _NodeApi.token)
    assert code == 1
    assert len(stderr.splitlines()) == 1
    assert "CERTIFICATE_VERIFY_FAILED" in stderr
