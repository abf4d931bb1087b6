"""Helpers for the manifest tests: render overlays with kubectl, find objects, resolve what a pod sees.

What it owns: locating ``k8s/`` (overlays, components), rendering a kustomization with
``kubectl kustomize``, selecting rendered objects, matching label selectors, and reproducing what
Kubernetes hands a container: its environment (plain values with ``$(VAR)`` expansion, downward-API
``fieldRef``s, Secret and ConfigMap keys), its expanded command line, and its volumes laid out as
local files (``PodFiles``: ConfigMaps, Secrets, emptyDirs at the paths the container sees). No
network, no cluster.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
OVERLAYS_DIR = K8S / "overlays"
COMPONENTS_DIR = K8S / "components"
# The label the StatefulSet controller puts on each pod with its ordinal (Kubernetes >= 1.28).
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"})

Doc = dict[str, Any]


def overlays() -> list[str]:
    return sorted(p.name for p in OVERLAYS_DIR.iterdir() if (p / "kustomization.yaml").is_file())


def components() -> list[str]:
    return sorted(p.name for p in COMPONENTS_DIR.iterdir() if (p / "kustomization.yaml").is_file())


def kubectl() -> str | None:
    return shutil.which("kubectl")


def render(directory: Path, kubectl_path: str) -> list[Doc]:
    """``kubectl kustomize DIR`` parsed into objects (raises with kubectl's message on failure)."""
    result = subprocess.run(
        [kubectl_path, "kustomize", str(directory)], capture_output=True, text=True, timeout=120, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory} failed:\n{result.stderr}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def of_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [doc for doc in docs if doc["kind"] == kind]


def named(docs: list[Doc], kind: str, name: str) -> Doc:
    found = [doc for doc in of_kind(docs, kind) if doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def pod_template(workload: Doc) -> Doc:
    """The pod template (metadata + spec) of a Deployment/StatefulSet/DaemonSet/Job/CronJob."""
    spec = workload["spec"]
    if workload["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    template: Doc = spec["template"]
    return template


def workloads(docs: list[Doc]) -> list[Doc]:
    return [doc for doc in docs if doc["kind"] in WORKLOAD_KINDS]


def all_containers(pod_spec: Doc) -> list[Doc]:
    return [*pod_spec.get("initContainers", []), *pod_spec["containers"]]


def selector_matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """A non-empty equality selector matches labels that contain all its pairs."""
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def match_labels(label_selector: Doc) -> dict[str, str]:
    assert set(label_selector) == {"matchLabels"}, f"only matchLabels selectors are used: {label_selector}"
    labels: dict[str, str] = label_selector["matchLabels"]
    return labels


def prometheus_label_for_pod_label(label: str) -> str:
    """Prometheus' Kubernetes SD meta label for a pod label (non-alphanumerics become ``_``)."""
    return "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label)


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: defined variables are substituted, ``$$`` is a literal ``$``,
    and an undefined reference is left as written."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i) and (end := text.find(")", i + 2)) != -1:
            name = text[i + 2 : end]
            out.append(env[name] if name in env else text[i : end + 1])
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class PodIdentity:
    """What the downward API reports for one pod."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    node_name: str = "node-0"  # spec.nodeName: the node the scheduler put it on


def _field_ref(path: str, pod: PodIdentity) -> str:
    if path == "metadata.name":
        return pod.name
    if path == "metadata.namespace":
        return pod.namespace
    if path == "spec.nodeName":
        return pod.node_name
    match = re.fullmatch(r"metadata\.labels\['([^']+)'\]", path)
    if match:
        # Kubernetes resolves a missing label to an empty string.
        return pod.labels.get(match.group(1), "")
    raise AssertionError(f"fieldRef {path!r} is not reproduced by these tests")


def secret_value(docs: list[Doc], name: str, key: str) -> str | None:
    """A key of a rendered Secret (data is base64, stringData plain), or None when not rendered."""
    for secret in of_kind(docs, "Secret"):
        if secret["metadata"]["name"] == name:
            if key in secret.get("stringData", {}):
                return str(secret["stringData"][key])
            return base64.b64decode(secret["data"][key]).decode()
    return None


def container_environment(
    container: Doc, pod: PodIdentity, docs: list[Doc], external_secrets: Mapping[tuple[str, str], str]
) -> dict[str, str]:
    """The container's environment, in order, as the kubelet builds it."""
    env: dict[str, str] = {}
    for variable in container.get("env", []):
        name = variable["name"]
        if "value" in variable:
            env[name] = expand(str(variable["value"]), env)
            continue
        source = variable["valueFrom"]
        if "fieldRef" in source:
            env[name] = _field_ref(source["fieldRef"]["fieldPath"], pod)
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            value = secret_value(docs, ref["name"], ref["key"])
            if value is None:
                assert (ref["name"], ref["key"]) in external_secrets, (
                    f"{name}: Secret {ref['name']} is neither rendered nor documented as created by the user"
                )
                value = external_secrets[(ref["name"], ref["key"])]
            env[name] = value
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            env[name] = str(named(docs, "ConfigMap", ref["name"])["data"][ref["key"]])
        else:
            raise AssertionError(f"{name}: valueFrom {sorted(source)} is not reproduced by these tests")
    return env


def command_line(container: Doc, env: Mapping[str, str]) -> list[str]:
    """command + args with ``$(VAR)`` expanded (the image's entrypoint when no command is given)."""
    return [expand(str(part), env) for part in [*container.get("command", []), *container.get("args", [])]]


def config_map_files(docs: list[Doc], pod_spec: Doc, container: Doc) -> dict[str, str]:
    """Files a container sees from ConfigMap volumes: mount path/key -> content."""
    volumes = {volume["name"]: volume for volume in pod_spec.get("volumes", [])}
    files: dict[str, str] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        if "configMap" in volume:
            data = named(docs, "ConfigMap", volume["configMap"]["name"])["data"]
            for key, content in data.items():
                files[f"{mount['mountPath'].rstrip('/')}/{key}"] = content
    return files


def walk(value: Any) -> Iterator[Doc]:
    """Every mapping nested in a value (for finding selectors and probes wherever they are)."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


SecretData = Mapping[str, bytes]


@dataclass(frozen=True, slots=True)
class PodFiles:
    """A pod's volumes laid out under a local directory: where each container's mount paths are here.

    ConfigMap and Secret volumes hold their keys (or the ``items`` they select) as files; emptyDir and
    PersistentVolumeClaim volumes start empty and are shared by the pod's containers, as in a pod."""

    root: Path
    mounts: Mapping[str, tuple[tuple[str, Path], ...]]  # container -> (mount path, local dir), deepest first

    def local(self, container: str, path: str) -> Path:
        """Where a path the container sees is here (AssertionError when no volume is mounted there)."""
        for mount_path, directory in self.mounts[container]:
            prefix = mount_path.rstrip("/") + "/"
            if path.startswith(prefix):
                return directory / path.removeprefix(prefix)
        raise AssertionError(f"{container}: {path} is on no mounted volume")

    def localize(self, container: str, value: str) -> str:
        """``value`` with a path on a mounted volume replaced by its local path; others unchanged."""
        for mount_path, directory in self.mounts[container]:
            prefix = mount_path.rstrip("/") + "/"
            if value.startswith(prefix):
                return str(directory / value.removeprefix(prefix))
        return value


def _volume_items(volume: Doc, data: Mapping[str, bytes]) -> dict[str, bytes]:
    source = volume.get("secret") or volume.get("configMap") or {}
    if "items" not in source:
        return dict(data)
    selected = {}
    for item in source["items"]:
        assert item["key"] in data, f"volume {volume['name']}: no key {item['key']}"
        selected[item["path"]] = data[item["key"]]
    return selected


def pod_files(workload: Doc, docs: list[Doc], root: Path, secret: Callable[[str], SecretData]) -> PodFiles:
    """Lay out the volumes of ``workload``'s pod under ``root`` (a StatefulSet's volume claim
    templates as empty volumes); ``secret(name)`` is a Secret's data."""
    pod_spec = pod_template(workload)["spec"]
    directories: dict[str, Path] = {}
    for claim in workload["spec"].get("volumeClaimTemplates", []):
        directories[claim["metadata"]["name"]] = root / claim["metadata"]["name"]
        directories[claim["metadata"]["name"]].mkdir(parents=True)
    for volume in pod_spec.get("volumes", []):
        directory = root / volume["name"]
        directory.mkdir(parents=True)
        directories[volume["name"]] = directory
        if "configMap" in volume:
            config_map = named(docs, "ConfigMap", volume["configMap"]["name"])
            data = {key: str(value).encode() for key, value in config_map.get("data", {}).items()}
        elif "secret" in volume:
            data = dict(secret(volume["secret"]["secretName"]))
        elif "projected" in volume:
            data = _projected(volume["projected"], docs)
        else:
            assert {"emptyDir", "persistentVolumeClaim"} & set(volume), (
                f"volume {volume['name']} not reproduced"
            )
            data = {}
        for name, content in _volume_items(volume, data).items():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_bytes(content)
    mounts = {}
    for container in all_containers(pod_spec):
        entries = []
        for mount in container.get("volumeMounts", []):
            assert "subPath" not in mount, "subPath mounts are not reproduced"
            entries.append((mount["mountPath"], directories[mount["name"]]))
        mounts[container["name"]] = tuple(sorted(entries, key=lambda entry: -len(entry[0])))
    return PodFiles(root, mounts)


# What the kubelet projects from cluster-provided sources (no rendered object holds them).
PROJECTED_TOKEN = b"service-account-token-for-tests"
CLUSTER_CONFIG_MAPS = {"kube-root-ca.crt": {"ca.crt": b"-----BEGIN CERTIFICATE-----\ncluster CA\n"}}


def _projected(projected: Doc, docs: list[Doc]) -> dict[str, bytes]:
    """A projected volume's files: a service account token (a stand-in), ConfigMap keys (rendered,
    or the cluster's own ``kube-root-ca.crt``)."""
    files: dict[str, bytes] = {}
    for source in projected["sources"]:
        if "serviceAccountToken" in source:
            files[source["serviceAccountToken"]["path"]] = PROJECTED_TOKEN
        elif "configMap" in source:
            name = source["configMap"]["name"]
            if name in CLUSTER_CONFIG_MAPS:
                data = CLUSTER_CONFIG_MAPS[name]
            else:
                data = {k: str(v).encode() for k, v in named(docs, "ConfigMap", name).get("data", {}).items()}
            files.update(_volume_items({"configMap": source["configMap"], "name": name}, data))
        else:
            raise AssertionError(f"projected source {sorted(source)} is not reproduced by these tests")
    return files


def fake_node(name: str) -> Doc:
    """The Node object the stand-in API serves for ``name``: its zone label is ``zone-<last part of
    the name>`` (node-2 → zone-2), so each test pod's rack is known in advance."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, ZONE_LABEL: f"zone-{name.rpartition('-')[2]}"},
        },
    }


ZONE_LABEL = "topology.kubernetes.io/zone"


def fake_kubernetes_api(root: Path, nodes: Iterable[str | Doc]) -> str:
    """A stand-in Kubernetes API for ``GET /api/v1/nodes/<name>``: the Node objects as files under
    ``root``, whose ``file:`` URL is returned (what a container gets as ``KUBERNETES_API_URL``)."""
    for node in nodes:
        document = fake_node(node) if isinstance(node, str) else node
        path = root / "api" / "v1" / "nodes" / document["metadata"]["name"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document), encoding="utf-8")
    return root.as_uri()


def run_container(
    container: Doc, env: Mapping[str, str], files: PodFiles, *, extra_env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A container's command run here (``python`` as this interpreter), its arguments' and
    environment's paths pointing at the pod's files."""
    name = container["name"]
    argv = [files.localize(name, part) for part in command_line(container, env)]
    if argv[0] == "python":
        argv[0] = sys.executable
    localized = {key: files.localize(name, value) for key, value in env.items()}
    return subprocess.run(
        argv,
        env={**localized, **(extra_env or {}), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def rendered_secret(docs: list[Doc], name: str) -> SecretData | None:
    """A rendered Secret's data (base64 ``data`` and plain ``stringData``), or None."""
    for secret in of_kind(docs, "Secret"):
        if secret["metadata"]["name"] == name:
            data = {key: base64.b64decode(value) for key, value in secret.get("data", {}).items()}
            data.update({key: str(value).encode() for key, value in secret.get("stringData", {}).items()})
            return data
    return None
