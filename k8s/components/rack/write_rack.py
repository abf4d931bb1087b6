"""Init container of a broker pod (k8s/components/rack): ``broker.rack`` from its node's zone.

Strimzi's way: the pod's node (``NODE_NAME``, the downward API's ``spec.nodeName``) is read from the
Kubernetes API with the pod's service account token (a ClusterRole allows ``get nodes``, nothing
else), its label ``RACK_TOPOLOGY_KEY`` (``topology.kubernetes.io/zone``) is the rack, and
``CONFIG_OUT`` is written: the properties file ``CONFIG_TEMPLATE`` (the ConfigMap's
server.properties), then ``broker.rack=<zone>``. The broker starts with ``--config CONFIG_OUT``.

A node without the label stops the pod with one line: a broker without a rack among brokers with
one makes topic creation fail (Kafka refuses rack-aware placement over mixed brokers), so it must
not start quietly without it. Standard library only (the image's Python); the API address is
``KUBERNETES_API_URL`` when set, else the in-cluster one the kubelet puts in the environment.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import NoReturn

# A label value: at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric.
LABEL_VALUE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")


def fail(message: str) -> NoReturn:
    sys.stderr.write(f"broker.rack: {message}\n")
    raise SystemExit(1)


def api_url() -> str:
    explicit = os.environ.get("KUBERNETES_API_URL")
    if explicit:
        return explicit.rstrip("/")
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def read_node(node: str) -> dict[str, object]:
    url = f"{api_url()}/api/v1/nodes/{urllib.parse.quote(node, safe='')}"
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    context = None
    if url.startswith("https:"):
        account = Path(os.environ.get("SERVICE_ACCOUNT_DIR", "/var/run/secrets/kubernetes.io/serviceaccount"))
        token = (account / "token").read_text(encoding="utf-8").strip()
        request.add_header("Authorization", f"Bearer {token}")
        context = ssl.create_default_context(cafile=str(account / "ca.crt"))
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            found: dict[str, object] = json.load(response)
    except urllib.error.HTTPError as error:
        fail(f"GET {url}: HTTP {error.code} {error.reason} (may the service account get nodes?)")
    except (OSError, ValueError) as error:
        fail(f"GET {url}: {error}")
    return found


def main() -> None:
    node = os.environ.get("NODE_NAME", "")
    if not node:
        fail("NODE_NAME is not set (the downward API's spec.nodeName)")
    key = os.environ.get("RACK_TOPOLOGY_KEY", "topology.kubernetes.io/zone")
    metadata = read_node(node).get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    rack = labels.get(key) if isinstance(labels, dict) else None
    if not isinstance(rack, str) or not LABEL_VALUE.fullmatch(rack):
        fail(f"node {node} has no label {key} (label it, or leave the rack component out)")
    template = Path(os.environ.get("CONFIG_TEMPLATE", "/etc/actorlog/server.properties"))
    out = Path(os.environ.get("CONFIG_OUT", "/var/run/actorlog-config/server.properties"))
    text = template.read_text(encoding="utf-8")
    # The rack goes last: in a properties file the last occurrence of a key wins.
    partial = out.with_name(out.name + ".tmp")
    partial.write_text(
        f"{text.rstrip(chr(10))}\n# from node {node}, label {key}\nbroker.rack={rack}\n", encoding="utf-8"
    )
    partial.replace(out)
    sys.stdout.write(f"broker.rack={rack} (node {node})\n")


if __name__ == "__main__":
    main()
