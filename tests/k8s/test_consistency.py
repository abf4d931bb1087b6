"""The manifests agree with the code: config keys, ports, probe paths, commands, labels, grace period.

Every rendered overlay is checked. Broker configuration goes through the real loader
(``ops.config.load_broker_settings``) with the ConfigMap's file, the pod's environment as the
kubelet builds it (downward API, Secrets, ``$(VAR)`` expansion) and the container's own
``--override`` flags, once per pod ordinal, with the files on its volumes where its paths point
(Secrets the user creates as stand-ins, cert-manager's as the ``issued`` fixture writes them): a
key the broker does not know fails. Every container command that is ``actorlog ...`` (and the
SparkApplication's main file and arguments) is parsed by that subcommand's own argparse parser
(intercepted before the command runs). Probe and scrape paths must be routes the broker serves, in
its listener's scheme. Selectors must select what they are meant to. The grace period must cover
the controlled-shutdown worst case computed from the effective configuration. Only broker pods
hold the broker identity.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from actors.server.config import BrokerConfig
from ops.broker_main import health_routes
from ops.cli.main import COMMANDS
from ops.clients.connection import SECRET_ENV
from ops.config import BrokerSettings, load_broker_settings
from ops.properties import ConfigError
from ops.snapshots import parse_bootstrap_servers
from runtime.metrics import NodeMetrics
from tests.k8s import dockerfile, manifests
from tests.k8s.manifests import POD_INDEX_LABEL, Doc, PodIdentity, SecretData

pytestmark = pytest.mark.k8s

# Secrets the user creates (k8s/README.md, "Secrets"); a stand-in value of the required length.
EXTERNAL_SECRETS = {
    ("actorlog-internal-auth", "internal.auth.secret"): "x" * 32,
    ("actorlog-zookeeper-digest", "zookeeper.digest.password"): "z" * 32,
    ("actorlog-exporter-user", "password"): "e" * 32,
}
# Commands other than `actorlog` allowed in the actorlog images (present in every Debian image;
# python: the image's own interpreter, which runs actorlog).
OTHER_TOOLS = {"find", "sh", "python"}
SHUTDOWN_MARGIN_MS = 30_000
# overlay -> the Secrets cert-manager would write for its Certificates (the `issued` fixture).
IssuedSecrets = Mapping[str, Mapping[str, SecretData]]


# --- parsing commands with the subcommands' own parsers ---------------------------------------


class _Parsed(Exception):
    def __init__(self, namespace: argparse.Namespace) -> None:
        super().__init__("parsed")
        self.namespace = namespace


def parse_actorlog(argv: list[str]) -> tuple[str, argparse.Namespace]:
    """``actorlog <command> ...`` parsed by that command's parser, without running the command."""
    assert argv[0] == "actorlog", argv
    command = argv[1]
    assert command in COMMANDS, f"{command!r} is not an actorlog command ({sorted(COMMANDS)})"
    module = importlib.import_module(COMMANDS[command][0])
    original = argparse.ArgumentParser.parse_args

    def intercept(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        raise _Parsed(original(self, args, namespace))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", intercept)
        try:
            module.main(argv[2:])
        except _Parsed as parsed:
            return command, parsed.namespace
        except SystemExit as exit_:
            raise AssertionError(
                f"`{' '.join(argv)}` is rejected by its parser (exit {exit_.code})"
            ) from None
    raise AssertionError(f"`{' '.join(argv)}` did not parse its arguments")


def test_parse_actorlog_rejects_what_the_command_rejects() -> None:
    assert parse_actorlog(["actorlog", "snapshots", "export", "--bootstrap-server", "h:1", "--out", "d"])[0]
    with pytest.raises(AssertionError, match="rejected"):
        parse_actorlog(["actorlog", "snapshots", "export", "--bootstrap-servers", "h:1", "--out", "d"])
    with pytest.raises(AssertionError, match="not an actorlog command"):
        parse_actorlog(["actorlog", "brokers", "start"])


# --- what each pod sees ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunningContainer:
    overlay: str
    workload: Doc
    pod: PodIdentity
    pod_spec: Doc
    container: Doc
    env: dict[str, str]
    argv: list[str]


def _pods(overlay: str, docs: list[Doc]) -> Iterator[RunningContainer]:
    """One entry per container per pod (every StatefulSet ordinal; one pod for other workloads)."""
    for workload in manifests.workloads(docs):
        template = manifests.pod_template(workload)
        name = workload["metadata"]["name"]
        namespace = workload["metadata"].get("namespace", "default")
        replicas = workload["spec"].get("replicas", 1) if workload["kind"] == "StatefulSet" else 1
        for ordinal in range(replicas):
            labels = dict(template["metadata"].get("labels", {}))
            pod_name = f"{name}-{ordinal}" if workload["kind"] == "StatefulSet" else f"{name}-pod"
            if workload["kind"] == "StatefulSet":
                labels[POD_INDEX_LABEL] = str(ordinal)
            pod = PodIdentity(pod_name, namespace, labels, node_name=f"node-{ordinal}")
            for container in manifests.all_containers(template["spec"]):
                env = manifests.container_environment(container, pod, docs, EXTERNAL_SECRETS)
                argv = manifests.command_line(container, env)
                yield RunningContainer(overlay, workload, pod, template["spec"], container, env, argv)


def all_pods(rendered: dict[str, list[Doc]]) -> list[RunningContainer]:
    return [running for overlay, docs in rendered.items() for running in _pods(overlay, docs)]


def broker_pods(rendered: dict[str, list[Doc]]) -> list[RunningContainer]:
    brokers = [r for r in all_pods(rendered) if r.argv[:3] == ["actorlog", "broker", "start"]]
    assert {r.overlay for r in brokers} == set(rendered), "every overlay runs brokers"
    return brokers


def secret_source(overlay: str, docs: list[Doc], issued: IssuedSecrets) -> Callable[[str], SecretData]:
    """A Secret's data as the pod would get it: rendered (dev's generated Secrets), written by
    cert-manager for a rendered Certificate, or created by the user (EXTERNAL_SECRETS' stand-ins)."""

    def lookup(name: str) -> SecretData:
        found = manifests.rendered_secret(docs, name) or issued[overlay].get(name)
        if found is None:
            found = {
                key: value.encode() for (secret, key), value in EXTERNAL_SECRETS.items() if secret == name
            }
            assert found, f"{overlay}: Secret {name} is neither rendered, issued nor documented as the user's"
        return found

    return lookup


def pod_files(
    running: RunningContainer, docs: list[Doc], issued: IssuedSecrets, tmp_path: Path
) -> manifests.PodFiles:
    """The pod's volumes (ConfigMaps, Secrets, certificates) as files in a new directory of tmp_path."""
    root = Path(tempfile.mkdtemp(prefix=f"{running.overlay}-{running.pod.name}-", dir=tmp_path))
    return manifests.pod_files(running.workload, docs, root, secret_source(running.overlay, docs, issued))


def run_init_containers(running: RunningContainer, docs: list[Doc], files: manifests.PodFiles) -> None:
    """Run the pod's init containers here, in order, as the kubelet does before its containers
    start: on the pod's files, with the Kubernetes API a stand-in serving the pod's node
    (``manifests.fake_node``)."""
    api = manifests.fake_kubernetes_api(files.root / "kubernetes-api", [running.pod.node_name])
    for init in running.pod_spec.get("initContainers", []):
        env = manifests.container_environment(init, running.pod, docs, EXTERNAL_SECRETS)
        done = manifests.run_container(init, env, files, extra_env={"KUBERNETES_API_URL": api})
        assert done.returncode == 0, f"{running.overlay}: init container {init['name']}: {done.stderr}"


def load(
    running: RunningContainer, docs: list[Doc], tmp_path: Path, issued: IssuedSecrets, extra: str = ""
) -> BrokerSettings:
    """The broker's settings through the real loader, from what the pod sees: the ConfigMap's file,
    its environment, and the files on its volumes (keystore, truststore) where its paths point."""
    _, arguments = parse_actorlog(running.argv)
    files = pod_files(running, docs, issued, tmp_path)
    name = running.container["name"]
    config = files.local(name, arguments.config)
    if not config.is_file():
        run_init_containers(running, docs, files)  # an init container writes it (the rack component)
    assert config.is_file(), f"--config {arguments.config} is not a file on a mounted volume"
    if extra:
        config.write_text(config.read_text(encoding="utf-8") + extra, encoding="utf-8")
    environ = {key: files.localize(name, value) for key, value in running.env.items()}
    return load_broker_settings(config_file=str(config), overrides=arguments.override, environ=environ)


def _port(container: Doc, name_or_number: str | int) -> int:
    if isinstance(name_or_number, int):
        return name_or_number
    ports = [p["containerPort"] for p in container.get("ports", []) if p.get("name") == name_or_number]
    assert len(ports) == 1, f"no container port named {name_or_number!r}"
    return int(ports[0])


def _served_paths() -> set[str]:
    return {route.path for route in health_routes(lambda: None)} | {NodeMetrics().route().path}


# --- broker configuration ----------------------------------------------------------------------


def test_broker_configuration_loads_through_the_real_loader(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    brokers = broker_pods(rendered)
    for running in brokers:
        docs = rendered[running.overlay]
        settings = load(running, docs, tmp_path, issued)
        ordinal = int(running.pod.labels[POD_INDEX_LABEL])
        assert settings.broker.broker_id == ordinal
        headless = manifests.named(docs, "Service", running.workload["spec"]["serviceName"])
        assert settings.advertised_listener.host == (
            f"{running.pod.name}.{headless['metadata']['name']}.{running.pod.namespace}.svc"
        )
        assert settings.advertised_listener.port == settings.listener.port
        assert settings.listener.port in {p["port"] for p in headless["spec"]["ports"]}
        claims = {t["metadata"]["name"] for t in running.workload["spec"]["volumeClaimTemplates"]}
        data_mounts = [m["mountPath"] for m in running.container["volumeMounts"] if m["name"] in claims]
        assert any(settings.log_dir.startswith(mount.rstrip("/") + "/") for mount in data_mounts), (
            settings.log_dir
        )
        assert len(settings.internal_auth_secret) >= 16
    assert len(brokers) >= 3 * len(rendered)


def test_brokers_serve_kafka_clients_on_the_kafka_port_of_both_services(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    """The KAFKA listener: bound on the container port named kafka, advertised under the pod's name in
    the headless Service on that port, reachable through both Services, and SASL_SSL exactly where
    the HTTP listener is HTTPS (with its own TLS context), SASL_PLAINTEXT elsewhere."""
    for running in broker_pods(rendered):
        docs = rendered[running.overlay]
        settings = load(running, docs, tmp_path, issued)
        kafka, advertised = settings.kafka_listener, settings.advertised_kafka_listener
        assert kafka is not None, f"{running.overlay}: no KAFKA listener"
        assert advertised is not None
        assert kafka.port == _port(running.container, "kafka") != settings.listener.port
        assert (advertised.host, advertised.port) == (settings.advertised_listener.host, kafka.port)
        services = [
            s
            for s in manifests.of_kind(docs, "Service")
            if manifests.selector_matches(s["spec"]["selector"], running.pod.labels)
        ]
        assert {s["metadata"]["name"] for s in services} == {"actorlog-brokers", "actorlog-bootstrap"}
        for service in services:
            assert {"name": "kafka", "port": kafka.port, "targetPort": "kafka"} in service["spec"]["ports"], (
                f"{running.overlay}: Service {service['metadata']['name']} has no Kafka port"
            )
        tls = settings.listener.tls
        assert (
            advertised.security_protocol
            == kafka.security_protocol
            == ("SASL_SSL" if tls else "SASL_PLAINTEXT")
        )
        assert (settings.kafka_ssl_context is not None) == tls, running.overlay


def test_brokers_secure_their_znodes_with_a_password_from_a_secret(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    for running in broker_pods(rendered):
        security = load(running, rendered[running.overlay], tmp_path, issued).zookeeper_security
        assert security.secure_acls
        assert security.credential is not None
        (source,) = [
            e for e in running.container["env"] if e["name"] == "ACTORLOG_CFG_ZOOKEEPER_DIGEST_PASSWORD"
        ]
        assert "secretKeyRef" in source["valueFrom"], "the ZooKeeper password comes from a Secret"
        assert security.credential.password == running.env["ACTORLOG_CFG_ZOOKEEPER_DIGEST_PASSWORD"]


def test_a_key_the_broker_does_not_know_fails(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    running = broker_pods(rendered)[0]
    with pytest.raises(ConfigError, match="unknown configuration key"):
        load(running, rendered[running.overlay], tmp_path, issued, extra="\nreplica.lag.time.max.msec=1000\n")
    broken = dict(running.env, ACTORLOG_CFG_BROKER_IDENTIFIER="1")
    with pytest.raises(ConfigError, match="unknown configuration key"):
        load(
            RunningContainer(**{**_fields(running), "env": broken}),
            rendered[running.overlay],
            tmp_path,
            issued,
        )


def _fields(running: RunningContainer) -> dict[str, Any]:
    return {name: getattr(running, name) for name in RunningContainer.__slots__}


def test_zookeeper_connect_points_at_the_ensemble(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    checked = 0
    for running in broker_pods(rendered):
        docs = rendered[running.overlay]
        servers = load(running, docs, tmp_path, issued).zookeeper_connect.partition("/")[0]
        zookeepers = [w for w in manifests.workloads(docs) if _runs_zookeeper(w)]
        assert len(zookeepers) == 1
        zk_labels = manifests.pod_template(zookeepers[0])["metadata"]["labels"]
        for server in servers.split(","):
            host, _, port = server.rpartition(":")
            service = manifests.named(docs, "Service", host)
            assert manifests.selector_matches(service["spec"]["selector"], zk_labels)
            assert int(port) in {p["port"] for p in service["spec"]["ports"]}
            checked += 1
    assert checked


def _runs_zookeeper(workload: Doc) -> bool:
    containers = manifests.pod_template(workload)["spec"]["containers"]
    return any("zkServer.sh" in " ".join(c.get("command", []) + c.get("args", [])) for c in containers)


def test_zookeeper_servers_list_every_member(rendered: dict[str, list[Doc]]) -> None:
    checked = 0
    for docs in rendered.values():
        (zookeeper,) = [w for w in manifests.workloads(docs) if _runs_zookeeper(w)]
        name, spec = zookeeper["metadata"]["name"], zookeeper["spec"]
        container = manifests.pod_template(zookeeper)["spec"]["containers"][0]
        env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        headless = manifests.named(docs, "Service", spec["serviceName"])
        assert headless["spec"]["clusterIP"] == "None"
        assert headless["spec"]["publishNotReadyAddresses"]
        expected = [
            f"server.{ordinal + 1}={name}-{ordinal}.{spec['serviceName']}:{ports['tcp-clustering']}:"
            f"{ports['tcp-election']};{ports['tcp-clients']}"
            for ordinal in range(spec["replicas"])
        ]
        assert env["ZOO_SERVERS"].split() == expected
        # myid = ordinal + 1, computed by the shell from the pod name ($$ is Kubernetes' escape).
        script = manifests.command_line(container, env)[-1]
        assert "ZOO_MY_ID=$((${HOSTNAME##*-} + 1))" in script
        checked += len(expected)
    assert checked


# --- ports, probes, paths ----------------------------------------------------------------------


def test_ports_and_probes_match_the_broker(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    served = _served_paths()
    assert {"/healthz", "/readyz", "/metrics"} <= served
    for running in broker_pods(rendered):
        settings = load(running, rendered[running.overlay], tmp_path, issued)
        container = running.container
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        # An HTTPS listener answers nothing to plain HTTP: the probes and scrapes must speak its scheme.
        scheme = settings.listener.scheme
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            get = container[probe]["httpGet"]
            assert get["path"] in served, f"{probe} {get['path']} is not a route"
            assert _port(container, get["port"]) == settings.listener.port
            assert get.get("scheme", "HTTP") == scheme.upper(), f"{running.overlay}: {probe} scheme"
        annotations = manifests.pod_template(running.workload)["metadata"]["annotations"]
        assert int(annotations["prometheus.io/port"]) == settings.listener.port
        assert annotations["prometheus.io/path"] in served
        assert annotations.get("prometheus.io/scheme", "http") == scheme, running.overlay


def test_services_target_named_ports_of_the_pods_they_select(rendered: dict[str, list[Doc]]) -> None:
    checked = 0
    for overlay, docs in rendered.items():
        for service in manifests.of_kind(docs, "Service"):
            selected = [
                manifests.pod_template(w)
                for w in manifests.workloads(docs)
                if manifests.selector_matches(
                    service["spec"]["selector"], manifests.pod_template(w)["metadata"]["labels"]
                )
            ]
            assert len(selected) == 1, (
                f"{overlay}: Service {service['metadata']['name']} selects {len(selected)}"
            )
            container = selected[0]["spec"]["containers"][0]
            for port in service["spec"]["ports"]:
                assert _port(container, port["targetPort"]) == port["port"]
                checked += 1
    assert checked


def test_scrape_endpoints_match_ports_paths_and_labels(rendered: dict[str, list[Doc]]) -> None:
    served = _served_paths()
    checked = 0
    for overlay, docs in rendered.items():
        for monitor in manifests.of_kind(docs, "ServiceMonitor"):
            services = [
                s
                for s in manifests.of_kind(docs, "Service")
                if manifests.selector_matches(
                    manifests.match_labels(monitor["spec"]["selector"]), s["metadata"]["labels"]
                )
            ]
            assert len(services) == 1, (
                f"{overlay}: ServiceMonitor selects {len(services)} Services (double scrape)"
            )
            assert services[0]["spec"].get("clusterIP") == "None", "scrape every broker, ready or not"
            for endpoint in monitor["spec"]["endpoints"]:
                assert endpoint["port"] in {p["name"] for p in services[0]["spec"]["ports"]}
                assert endpoint["path"] in served
                targets = {r["targetLabel"]: r["sourceLabels"] for r in endpoint["relabelings"]}
                # The dashboards and rules select on `cluster` and `broker`; broker = broker.id = ordinal.
                assert targets["broker"] == [manifests.prometheus_label_for_pod_label(POD_INDEX_LABEL)]
                assert "cluster" in targets
                checked += 1
        for monitor in manifests.of_kind(docs, "PodMonitor"):
            selector = manifests.match_labels(monitor["spec"]["selector"])
            pods = [
                manifests.pod_template(w)
                for w in manifests.workloads(docs)
                if manifests.selector_matches(selector, manifests.pod_template(w)["metadata"]["labels"])
            ]
            assert len(pods) == 1
            for endpoint in monitor["spec"]["podMetricsEndpoints"]:
                assert _port(pods[0]["spec"]["containers"][0], endpoint["port"])
                checked += 1
    assert checked


# --- commands ----------------------------------------------------------------------------------


def test_every_actorlog_command_parses(rendered: dict[str, list[Doc]]) -> None:
    commands = set()
    for running in all_pods(rendered):
        image = running.container["image"]
        if running.argv and running.argv[0] == "actorlog":
            command, _ = parse_actorlog(running.argv)
            commands.add(command)
            # The rollup needs Java: it runs from the rollup image; everything else from the broker image.
            expected = "actorlog-rollup" if command == "rollup" else "actorlog"
            assert _image_name(image) == expected, f"{running.overlay}: actorlog {command} in {image}"
        elif "actorlog" in image:
            assert running.argv, f"{running.overlay}: no command"
            assert running.argv[0] in OTHER_TOOLS, f"{running.overlay}: {running.argv}"
    assert {"broker", "snapshots", "rollup"} <= commands


def _image_name(image: str) -> str:
    return image.rpartition("/")[2].partition(":")[0].partition("@")[0]


def test_spark_application_runs_the_rollup_job(rendered: dict[str, list[Doc]]) -> None:
    applications = [a for docs in rendered.values() for a in manifests.of_kind(docs, "SparkApplication")]
    assert applications, "no overlay renders the SparkApplication"
    site_packages = str(Path(dockerfile.parse().stage("rollup").env()["SPARK_HOME"]).parent)
    for application in applications:
        spec = application["spec"]
        assert _image_name(spec["image"]) == "actorlog-rollup"
        main_file = spec["mainApplicationFile"].removeprefix("local://")
        assert main_file.startswith(site_packages + "/"), "the file is in the image's virtual environment"
        relative = main_file.removeprefix(site_packages + "/")
        assert (manifests.REPO / relative).is_file()
        module = relative.removesuffix(".py").replace("/", ".")
        (command,) = [name for name, (target, _) in COMMANDS.items() if target == module]
        parse_actorlog(["actorlog", command, *spec["arguments"]])


def test_snapshot_exporter_bootstraps_from_the_client_service(rendered: dict[str, list[Doc]]) -> None:
    checked = 0
    for running in all_pods(rendered):
        if running.argv[:3] != ["actorlog", "snapshots", "export"]:
            continue
        docs = rendered[running.overlay]
        _, arguments = parse_actorlog(running.argv)
        broker_labels = manifests.pod_template(manifests.named(docs, "StatefulSet", "actorlog-broker"))[
            "metadata"
        ]["labels"]
        for server in parse_bootstrap_servers(arguments.bootstrap_server):
            url = urlsplit(server)
            assert url.hostname is not None, server
            assert url.port is not None, server
            host, port = url.hostname, url.port
            service = manifests.named(docs, "Service", host)
            assert manifests.selector_matches(service["spec"]["selector"], broker_labels)
            assert "clusterIP" not in service["spec"], "the client Service routes to ready brokers only"
            # actorlog's own clients speak HTTP: the Service's http port, not its kafka one.
            assert int(port) in {p["port"] for p in service["spec"]["ports"] if p["targetPort"] == "http"}
            checked += 1
    assert checked


def secret_names(pod_spec: Doc) -> set[str]:
    """Every Secret a pod's spec names (env, envFrom, volumes), without kustomize's hash suffix."""
    names = set()
    for node in manifests.walk(pod_spec):
        for key, field in (("secretKeyRef", "name"), ("secretRef", "name"), ("secret", "secretName")):
            if isinstance(node.get(key), dict) and field in node[key]:
                names.add(node[key][field])
    return {re.sub(r"-[a-z0-9]{10}$", "", name) for name in names}


def test_only_broker_pods_carry_the_brokers_secret(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    """The broker identity stays in broker pods: they carry it for `kubectl exec` client tools. Every
    other client (the snapshot exporter) is a user (test_client_users.py)."""
    secrets = {
        r.overlay: load(r, rendered[r.overlay], tmp_path, issued).internal_auth_secret
        for r in broker_pods(rendered)
    }
    broker_workloads = {(r.overlay, r.workload["metadata"]["name"]) for r in broker_pods(rendered)}
    checked = 0
    for running in all_pods(rendered):
        if running.argv[:3] == ["actorlog", "broker", "start"]:
            assert running.env.get(SECRET_ENV) == secrets[running.overlay], f"{running.overlay}: {SECRET_ENV}"
            continue
        name = f"{running.overlay}: {running.workload['metadata']['name']}/{running.container['name']}"
        assert SECRET_ENV not in running.env, name
        assert secrets[running.overlay] not in running.env.values(), name
        if (running.overlay, running.workload["metadata"]["name"]) in broker_workloads:
            continue  # another container of a broker pod (the rack init container): not in its env
        assert "actorlog-internal-auth" not in secret_names(running.pod_spec), name
        checked += 1
    assert checked


# --- selectors ---------------------------------------------------------------------------------


def test_workload_and_disruption_budget_selectors(rendered: dict[str, list[Doc]]) -> None:
    checked = 0
    for overlay, docs in rendered.items():
        templates = {
            w["metadata"]["name"]: manifests.pod_template(w)["metadata"]["labels"]
            for w in manifests.workloads(docs)
        }
        for workload in manifests.workloads(docs):
            if "selector" in workload["spec"]:
                selector = manifests.match_labels(workload["spec"]["selector"])
                assert manifests.selector_matches(selector, templates[workload["metadata"]["name"]])
                others = [
                    n
                    for n, labels in templates.items()
                    if n != workload["metadata"]["name"] and manifests.selector_matches(selector, labels)
                ]
                assert not others, f"{overlay}: {workload['metadata']['name']} selects the pods of {others}"
                checked += 1
        for budget in manifests.of_kind(docs, "PodDisruptionBudget"):
            selector = manifests.match_labels(budget["spec"]["selector"])
            selected = [n for n, labels in templates.items() if manifests.selector_matches(selector, labels)]
            assert len(selected) == 1, f"{overlay}: PDB {budget['metadata']['name']} selects {selected}"
            assert budget["spec"]["maxUnavailable"] == 1
            checked += 1
    assert checked


def test_affinity_selectors_select_pods(rendered: dict[str, list[Doc]]) -> None:
    checked = 0
    for overlay, docs in rendered.items():
        templates = [manifests.pod_template(w)["metadata"]["labels"] for w in manifests.workloads(docs)]
        for owner in [*manifests.workloads(docs), *manifests.of_kind(docs, "SparkApplication")]:
            for node in manifests.walk(owner["spec"]):
                for term in (
                    [node.get("podAffinityTerm", node)]
                    if "topologyKey" in node or "podAffinityTerm" in node
                    else []
                ):
                    selector = manifests.match_labels(term["labelSelector"])
                    assert any(manifests.selector_matches(selector, labels) for labels in templates), (
                        f"{overlay}: {owner['metadata']['name']}: {selector} selects no pods"
                    )
                    checked += 1
    assert checked


def test_statefulsets_use_a_headless_service_selecting_their_pods(rendered: dict[str, list[Doc]]) -> None:
    checked = 0
    for docs in rendered.values():
        for statefulset in manifests.of_kind(docs, "StatefulSet"):
            service = manifests.named(docs, "Service", statefulset["spec"]["serviceName"])
            assert service["spec"]["clusterIP"] == "None"
            assert service["spec"]["publishNotReadyAddresses"] is True, "peers resolve before they are Ready"
            labels = manifests.pod_template(statefulset)["metadata"]["labels"]
            assert manifests.selector_matches(service["spec"]["selector"], labels)
            checked += 1
    assert checked


# --- rolling restarts and shutdown -------------------------------------------------------------


def _shutdown_budget_ms(config: BrokerConfig) -> int:
    """ops/wiring.controlled_shutdown's worst case: every attempt waits controller.socket.timeout.ms,
    with controlled.shutdown.retry.backoff.ms between attempts; then the ZooKeeper session closes."""
    attempts = config.controlled_shutdown_max_retries
    return (
        attempts * config.controller_socket_timeout_ms
        + (attempts - 1) * config.controlled_shutdown_retry_backoff_ms
        + config.zookeeper_session_timeout_ms
    )


def test_grace_period_covers_the_controlled_shutdown(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    defaults = BrokerConfig(broker_id=0)
    for running in broker_pods(rendered):
        config = load(running, rendered[running.overlay], tmp_path, issued).broker
        assert config.controlled_shutdown_enable
        grace_ms = 1000 * running.pod_spec["terminationGracePeriodSeconds"]
        # The preStop hook runs first, inside the same grace period.
        hook_ms = int(1000 * parse_actorlog(pre_stop_argv(running))[1].wait)
        for effective in (config, defaults):
            budget = _shutdown_budget_ms(effective)
            assert (
                budget
                >= effective.controlled_shutdown_max_retries * effective.controlled_shutdown_retry_backoff_ms
            )
            assert grace_ms >= hook_ms + budget + SHUTDOWN_MARGIN_MS, (
                f"{running.overlay}: {grace_ms} ms < hook {hook_ms} ms + {budget} ms + margin"
            )


_SHELL_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def pre_stop_argv(running: RunningContainer) -> list[str]:
    """The broker's preStop hook as the command it runs: ``sh -c 'exec actorlog ...'`` with sh's
    ``$VAR`` expansion from the container's environment (the kubelet expands no ``$(VAR)`` in a
    hook); an undefined variable fails."""
    hook = running.container.get("lifecycle", {}).get("preStop")
    assert hook is not None, f"{running.overlay}: the broker has no preStop hook"
    command = hook["exec"]["command"]
    assert command[:2] == ["sh", "-c"], command
    assert len(command) == 3, command

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in running.env, f"{running.overlay}: the preStop hook uses ${name}, which is not set"
        return running.env[name]

    words = shlex.split(_SHELL_VARIABLE.sub(value, command[2]))
    assert words[0] == "exec", "the hook execs the tool (its exit status is the hook's)"
    return words[1:]


def test_the_pre_stop_hook_waits_until_the_restart_keeps_min_isr(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    """``kubectl rollout restart`` never takes a partition below min ISR: each broker's preStop
    hook is ``actorlog cluster health --broker <its own broker.id> --wait S``, asking its own
    listener, in its scheme, bounded by the grace period (checked above)."""
    for running in broker_pods(rendered):
        docs = rendered[running.overlay]
        settings = load(running, docs, tmp_path, issued)
        command, arguments = parse_actorlog(pre_stop_argv(running))
        assert (command, arguments.command) == ("cluster", "health")
        assert arguments.broker == settings.broker.broker_id == int(running.pod.labels[POD_INDEX_LABEL])
        listener = settings.advertised_listener
        assert arguments.bootstrap_server == f"{listener.host}:{listener.port}", "its own listener"
        assert arguments.wait > 0, "the hook waits for the restart to be allowed"
        assert arguments.output == "text"
        client_properties = ""
        if arguments.command_config is not None:
            files = manifests.config_map_files(docs, running.pod_spec, running.container)
            assert arguments.command_config in files, f"{arguments.command_config} is not mounted"
            client_properties = files[arguments.command_config]
        # Over HTTPS the tool must be told SSL (and the CA); over HTTP it must not be.
        assert ("security.protocol=SSL" in client_properties) == listener.tls, running.overlay
        # The broker identity the tool authenticates with is in the broker pod's environment.
        assert running.env.get(SECRET_ENV) == running.env["ACTORLOG_CFG_INTERNAL_AUTH_SECRET"]


def test_rolling_restart_is_gated_by_readiness(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    for running in broker_pods(rendered):
        docs, spec = rendered[running.overlay], running.workload["spec"]
        assert spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        assert spec["updateStrategy"]["type"] == "RollingUpdate"
        assert "maxUnavailable" not in spec["updateStrategy"].get("rollingUpdate", {})
        assert running.container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        broker = load(running, docs, tmp_path, issued).broker
        # One broker away keeps every partition at min ISR or above (replication factor and replicas).
        assert broker.default_replication_factor - 1 >= broker.min_insync_replicas
        assert spec["replicas"] >= broker.default_replication_factor
        budgets = [
            b for b in manifests.of_kind(docs, "PodDisruptionBudget")
            if manifests.selector_matches(manifests.match_labels(b["spec"]["selector"]), running.pod.labels)
        ]  # fmt: skip
        assert [b["spec"]["maxUnavailable"] for b in budgets] == [1]


def test_external_secrets_are_documented_and_dev_generates_its_own(rendered: dict[str, list[Doc]]) -> None:
    readme = (manifests.K8S / "README.md").read_text(encoding="utf-8")
    for name, key in EXTERNAL_SECRETS:
        assert f"create secret generic {name}" in readme
        assert key in readme
    for name, key in EXTERNAL_SECRETS:
        assert manifests.secret_value(rendered["dev"], name, key) is None  # hash-suffixed: generated
    generated = sorted(secret["metadata"]["name"] for secret in manifests.of_kind(rendered["dev"], "Secret"))
    assert len(generated) == len(EXTERNAL_SECRETS)
    for (name, _), secret in zip(sorted(EXTERNAL_SECRETS), generated, strict=True):
        assert secret.startswith(f"{name}-")
