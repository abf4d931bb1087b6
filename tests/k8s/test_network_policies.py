"""The NetworkPolicies let through exactly who needs each port, and ZooKeeper's four-letter words.

Every rendered overlay is evaluated with NetworkPolicy's own rules (a pod selected by no policy of
a direction is open in that direction; otherwise a connection needs one rule that admits both the
peer and the port): the peers are the overlay's own pods, told apart by what they run (``actorlog
broker start``, ZooKeeper, ``actorlog snapshots export``...), not by their labels, plus pods the
manifests do not run: a labelled client, Prometheus, and strangers, in this namespace and others.
Pure YAML: nothing talks to a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pytest

from ops.local.zookeeper import FOUR_LETTER_WORDS
from tests.k8s import manifests
from tests.k8s.manifests import Doc

pytestmark = pytest.mark.k8s

OTHER_NAMESPACE = "apps"
MONITORING_NAMESPACE = "monitoring"
DNS = 53


@dataclass(frozen=True, slots=True)
class Pod:
    role: str  # broker, zookeeper, snapshot-exporter, rollup, client, prometheus, stranger...
    namespace: str
    labels: Mapping[str, str]


def namespace_labels(name: str) -> dict[str, str]:
    # The label Kubernetes puts on every namespace.
    return {"kubernetes.io/metadata.name": name}


def _role(workload: Doc) -> str:
    containers = manifests.pod_template(workload)["spec"]["containers"]
    argv = [part for c in containers for part in c.get("command", []) + c.get("args", [])]
    text = " ".join(argv)
    if "zkServer.sh" in text:
        return "zookeeper"
    if argv[:3] == ["actorlog", "broker", "start"]:
        return "broker"
    if argv[:3] == ["actorlog", "snapshots", "export"]:
        return "snapshot-exporter"
    if argv[:2] == ["actorlog", "users"]:
        return "user-admin"
    return str(workload["metadata"]["name"])


def pods(docs: list[Doc]) -> list[Pod]:
    found = []
    for workload in manifests.workloads(docs):
        template = manifests.pod_template(workload)
        found.append(Pod(_role(workload), workload["metadata"]["namespace"], template["metadata"]["labels"]))
    namespace = found[0].namespace
    return [
        *found,
        Pod("client", OTHER_NAMESPACE, {"app": "orders", "actorlog.io/client": "true"}),
        Pod("prometheus", MONITORING_NAMESPACE, {"app.kubernetes.io/name": "prometheus"}),
        Pod("stranger", namespace, {"app": "debug-shell"}),
        Pod("stranger", OTHER_NAMESPACE, {"app": "debug-shell"}),
        # Wearing the actorlog name without being a broker is not enough.
        Pod("stranger", namespace, {"app.kubernetes.io/name": "actorlog"}),
    ]


def _selects(selector: Doc, labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels only; {} selects everything)."""
    assert set(selector) <= {"matchLabels"}, f"only matchLabels selectors are used: {selector}"
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def _peer_matches(peer: Doc, policy_namespace: str, pod: Pod) -> bool:
    assert "ipBlock" not in peer, "no ipBlock peers: pods are told apart by labels"
    if "namespaceSelector" in peer:
        if not _selects(peer["namespaceSelector"], namespace_labels(pod.namespace)):
            return False
    elif pod.namespace != policy_namespace:
        return False
    return _selects(peer.get("podSelector", {}), pod.labels)


def _port_matches(ports: list[Doc] | None, port: int, protocol: str) -> bool:
    if not ports:
        return True
    for entry in ports:
        assert isinstance(entry["port"], int), "numeric ports: named ports resolve differently per direction"
        if entry["port"] == port and entry.get("protocol", "TCP") == protocol:
            return True
    return False


def _policies(docs: list[Doc], pod: Pod, direction: str) -> list[Doc]:
    return [
        policy
        for policy in manifests.of_kind(docs, "NetworkPolicy")
        if policy["metadata"]["namespace"] == pod.namespace
        and direction in policy["spec"].get("policyTypes", ["Ingress"])
        and _selects(policy["spec"]["podSelector"], pod.labels)
    ]


def ingress_allowed(docs: list[Doc], source: Pod, target: Pod, port: int, protocol: str = "TCP") -> bool:
    policies = _policies(docs, target, "Ingress")
    if not policies:
        return True
    return any(
        _port_matches(rule.get("ports"), port, protocol)
        and (not rule.get("from") or any(_peer_matches(p, target.namespace, source) for p in rule["from"]))
        for policy in policies
        for rule in policy["spec"].get("ingress", [])
    )


def egress_allowed(
    docs: list[Doc], source: Pod, target: Pod | None, port: int, protocol: str = "TCP"
) -> bool:
    """``target`` None: an address outside the cluster's pods (a DNS cache on the node, the Internet)."""
    policies = _policies(docs, source, "Egress")
    if not policies:
        return True
    return any(
        _port_matches(rule.get("ports"), port, protocol)
        and (
            not rule.get("to")
            or (target is not None and any(_peer_matches(p, source.namespace, target) for p in rule["to"]))
        )
        for policy in policies
        for rule in policy["spec"].get("egress", [])
    )


def connects(docs: list[Doc], source: Pod, target: Pod, port: int) -> bool:
    return egress_allowed(docs, source, target, port) and ingress_allowed(docs, source, target, port)


def _container_ports(docs: list[Doc], role: str) -> dict[str, int]:
    (workload,) = [w for w in manifests.workloads(docs) if _role(w) == role]
    containers = manifests.pod_template(workload)["spec"]["containers"]
    return {p["name"]: p["containerPort"] for c in containers for p in c.get("ports", [])}


def _overlays(rendered: dict[str, list[Doc]]) -> Iterator[tuple[str, list[Doc], list[Pod]]]:
    for overlay, docs in rendered.items():
        yield overlay, docs, pods(docs)


def _one(everyone: list[Pod], role: str) -> Pod:
    return next(pod for pod in everyone if pod.role == role)


# --- ZooKeeper ---------------------------------------------------------------------------------


def test_only_brokers_and_user_admin_jobs_reach_zookeepers_client_port(
    rendered: dict[str, list[Doc]],
) -> None:
    """The brokers, and the Job that creates the exporter's user (`actorlog users`) where it runs."""
    jobs = 0
    for overlay, docs, everyone in _overlays(rendered):
        zookeeper = _one(everyone, "zookeeper")
        port = _container_ports(docs, "zookeeper")["tcp-clients"]
        admitted = {pod.role for pod in everyone if connects(docs, pod, zookeeper, port)}
        user_admin = {pod.role for pod in everyone if pod.role == "user-admin"}
        assert admitted == {"broker"} | user_admin, overlay
        # The Job's label opens the port in its own namespace only.
        for job in (pod for pod in everyone if pod.role == "user-admin"):
            elsewhere = Pod("stranger", OTHER_NAMESPACE, job.labels)
            assert not connects(docs, elsewhere, zookeeper, port), overlay
            jobs += 1
    assert jobs, "no overlay runs the user-admin Job"


def test_only_members_reach_the_quorum_and_election_ports(rendered: dict[str, list[Doc]]) -> None:
    for overlay, docs, everyone in _overlays(rendered):
        zookeeper = _one(everyone, "zookeeper")
        ports = _container_ports(docs, "zookeeper")
        for name in ("tcp-clustering", "tcp-election"):
            admitted = {pod.role for pod in everyone if connects(docs, pod, zookeeper, ports[name])}
            assert admitted == {"zookeeper"}, (overlay, name)


def test_only_prometheus_reaches_zookeepers_metrics(rendered: dict[str, list[Doc]]) -> None:
    for overlay, docs, everyone in _overlays(rendered):
        zookeeper = _one(everyone, "zookeeper")
        port = _container_ports(docs, "zookeeper")["tcp-prometheus"]
        admitted = {pod.role for pod in everyone if connects(docs, pod, zookeeper, port)}
        assert admitted == {"prometheus"}, overlay


def test_zookeeper_denies_everything_else_both_ways(rendered: dict[str, list[Doc]]) -> None:
    for overlay, docs, everyone in _overlays(rendered):
        zookeeper = _one(everyone, "zookeeper")
        opened = set(_container_ports(docs, "zookeeper").values())
        for port in (22, 8080, 9092, 5005):
            assert port not in opened
            assert not any(ingress_allowed(docs, pod, zookeeper, port) for pod in everyone), (overlay, port)
        # Out: the other members' quorum ports and DNS, nothing else.
        assert egress_allowed(docs, zookeeper, zookeeper, 2888)
        assert egress_allowed(docs, zookeeper, zookeeper, 3888)
        assert egress_allowed(docs, zookeeper, None, DNS, "UDP")
        assert egress_allowed(docs, zookeeper, None, DNS, "TCP")
        assert not egress_allowed(docs, zookeeper, _one(everyone, "broker"), 9092), overlay
        assert not egress_allowed(docs, zookeeper, None, 443), overlay


def test_policy_ports_are_the_ports_of_the_pods_they_protect(rendered: dict[str, list[Doc]]) -> None:
    checked = 0
    for overlay, docs, everyone in _overlays(rendered):
        for policy in manifests.of_kind(docs, "NetworkPolicy"):
            protected = [p for p in everyone if p.namespace == policy["metadata"]["namespace"]]
            protected = [p for p in protected if _selects(policy["spec"]["podSelector"], p.labels)]
            assert protected, f"{overlay}: {policy['metadata']['name']} selects no pod"
            for rule in policy["spec"].get("ingress", []):
                for entry in rule["ports"]:
                    for pod in protected:
                        assert entry["port"] in _container_ports(docs, pod.role).values(), (overlay, entry)
                        checked += 1
    assert checked


# --- brokers -----------------------------------------------------------------------------------


def test_brokers_accept_peers_the_exporter_prometheus_and_labelled_clients(
    rendered: dict[str, list[Doc]],
) -> None:
    for overlay, docs, everyone in _overlays(rendered):
        broker = _one(everyone, "broker")
        port = _container_ports(docs, "broker")["http"]
        admitted = {pod.role for pod in everyone if connects(docs, pod, broker, port)}
        expected = {"broker", "client", "prometheus"} | (
            {"snapshot-exporter"} if any(p.role == "snapshot-exporter" for p in everyone) else set()
        )
        assert admitted == expected, overlay
        # Brokers themselves may open connections anywhere: to ZooKeeper above all.
        assert egress_allowed(docs, broker, _one(everyone, "zookeeper"), 2181)


def test_only_labelled_clients_reach_the_brokers_kafka_port(rendered: dict[str, list[Doc]]) -> None:
    """Kafka's binary protocol is for Kafka's clients: brokers, the exporter and Prometheus speak HTTP."""
    for overlay, docs, everyone in _overlays(rendered):
        broker = _one(everyone, "broker")
        port = _container_ports(docs, "broker")["kafka"]
        admitted = {pod.role for pod in everyone if connects(docs, pod, broker, port)}
        assert admitted == {"client"}, overlay
        # The label is what opens it, in any namespace; without it, even in this namespace, nothing.
        client = _one(everyone, "client")
        assert connects(docs, Pod("client", broker.namespace, client.labels), broker, port), overlay
        assert not connects(docs, Pod("stranger", OTHER_NAMESPACE, {"app": "orders"}), broker, port), overlay


# --- ZooKeeper's four-letter words -------------------------------------------------------------


def test_zookeeper_answers_only_the_words_its_probes_use(rendered: dict[str, list[Doc]]) -> None:
    for overlay, docs in rendered.items():
        (workload,) = [w for w in manifests.workloads(docs) if _role(w) == "zookeeper"]
        (container,) = manifests.pod_template(workload)["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["ZOO_4LW_COMMANDS_WHITELIST"] == ",".join(FOUR_LETTER_WORDS), overlay
        assert env["ZOO_ADMINSERVER_ENABLED"] == "false", overlay
        probes = [
            container[name]
            for name in ("readinessProbe", "livenessProbe", "startupProbe")
            if name in container
        ]
        words = {
            word
            for probe in probes
            for word in re.findall(r"echo (\w{4}) \|", " ".join(probe["exec"]["command"]))
        }
        assert words, overlay
        assert words <= set(FOUR_LETTER_WORDS), (overlay, words)
