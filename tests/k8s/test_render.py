"""Every overlay renders with ``kubectl kustomize`` and validates offline.

Core kinds go through kubernetes-validate in strict mode (unknown fields are errors) against the
oldest Kubernetes the manifests support (1.28: the StatefulSet pod-index label) and the kubectl in
use here (1.32). Custom resources go through the vendored subsets of their CRDs
(``crd_schemas.py``); the Kubernetes types a SparkApplication embeds are validated strictly as the
pod the Spark operator builds from them. A kind that is in neither set fails: nothing is
unchecked. Also: every component is used by some overlay, a registry set once reaches every image,
and ``promtool`` accepts the PrometheusRule's rules.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.k8s import manifests
from tests.k8s.crd_schemas import CRD_SCHEMAS
from tests.k8s.manifests import Doc

pytestmark = pytest.mark.k8s

KUBERNETES_VERSIONS = ("1.28", "1.32")
REQUIRED_OVERLAYS = {"dev", "prod"}
# kind -> why it is not validated. Empty: every rendered kind is checked.
UNCHECKED: dict[str, str] = {}


def _validate_core(doc: Doc) -> None:
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(doc, version, strict=True)


def _validate(doc: Doc) -> None:
    key = (doc["apiVersion"], doc["kind"])
    if key in CRD_SCHEMAS:
        jsonschema.Draft202012Validator(CRD_SCHEMAS[key]).validate(doc)
        if doc["kind"] == "SparkApplication":
            for role in ("driver", "executor"):
                _validate_core(_spark_pod(doc, role))
    elif doc["kind"] not in UNCHECKED:
        _validate_core(doc)


def _spark_pod(application: Doc, role: str) -> Doc:
    """The Kubernetes fields of a SparkApplication's driver or executor, as one Pod."""
    spec, pod = application["spec"], application["spec"][role]
    container = {
        "name": f"spark-kubernetes-{role}",
        "image": pod.get("image", spec["image"]),
        **{key: pod[key] for key in ("env", "envFrom", "volumeMounts", "securityContext") if key in pod},
    }
    pod_spec: Doc = {"containers": [container], "volumes": spec.get("volumes", [])}
    for source, target in (
        ("affinity", "affinity"),
        ("tolerations", "tolerations"),
        ("podSecurityContext", "securityContext"),
        ("serviceAccount", "serviceAccountName"),
        ("nodeSelector", "nodeSelector"),
    ):
        if source in pod:
            pod_spec[target] = pod[source]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{application['metadata']['name']}-{role}", "labels": pod.get("labels", {})},
        "spec": pod_spec,
    }


def test_the_required_overlays_exist() -> None:
    assert set(manifests.overlays()) >= REQUIRED_OVERLAYS


@pytest.mark.parametrize("overlay", manifests.overlays())
def test_overlay_renders_and_validates(rendered: dict[str, list[Doc]], overlay: str) -> None:
    docs = rendered[overlay]
    kinds = {doc["kind"] for doc in docs}
    assert {"StatefulSet", "Service", "PodDisruptionBudget", "ConfigMap"} <= kinds
    for doc in docs:
        try:
            _validate(doc)
        except kubernetes_validate.SchemaNotFoundError:
            pytest.fail(
                f"{overlay}: no schema for {doc['apiVersion']} {doc['kind']}: vendor one in crd_schemas.py"
            )
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as error:
            path = ".".join(str(part) for part in error.path)
            pytest.fail(f"{overlay}: {doc['kind']}/{doc['metadata']['name']}: {path}: {error.message}")


def test_validation_rejects_unknown_fields(rendered: dict[str, list[Doc]]) -> None:
    """The checks above bite: a misspelt field fails both the core and the CRD validation."""
    docs = [doc for docs in rendered.values() for doc in docs]
    statefulset = copy.deepcopy(manifests.of_kind(docs, "StatefulSet")[0])
    statefulset["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(statefulset)
    custom = [doc for doc in docs if (doc["apiVersion"], doc["kind"]) in CRD_SCHEMAS]
    assert {doc["kind"] for doc in custom} == {kind for _, kind in CRD_SCHEMAS}, (
        "every vendored schema is used"
    )
    for doc in custom:
        broken = copy.deepcopy(doc)
        broken["spec"]["selectr"] = {}
        with pytest.raises(jsonschema.ValidationError):
            _validate(broken)


def _components_used(kustomization_dir: Path) -> set[str]:
    kustomization = yaml.safe_load((kustomization_dir / "kustomization.yaml").read_text())
    used = {(kustomization_dir / path).resolve().name for path in kustomization.get("components", [])}
    for resource in kustomization.get("resources", []):
        target = (kustomization_dir / resource).resolve()
        if (target / "kustomization.yaml").is_file() and manifests.OVERLAYS_DIR in target.parents:
            used |= _components_used(target)
    return used


def test_every_component_is_used_by_an_overlay() -> None:
    used = set().union(*(_components_used(manifests.OVERLAYS_DIR / name) for name in manifests.overlays()))
    assert manifests.components(), "no components found"
    assert set(manifests.components()) <= used


def test_a_registry_set_in_the_images_component_reaches_every_actorlog_image(
    kubectl_path: str, tmp_path: Path
) -> None:
    tree = tmp_path / "k8s"
    shutil.copytree(manifests.K8S, tree)
    images_file = tree / "components" / "images" / "kustomization.yaml"
    images = yaml.safe_load(images_file.read_text())
    for image in images["images"]:
        image["newName"] = f"registry.example.com/team/{image['name']}"
        image["newTag"] = "9.9.9"
    images_file.write_text(yaml.safe_dump(images))
    checked = 0
    for overlay in manifests.overlays():
        docs = manifests.render(tree / "overlays" / overlay, kubectl_path)
        found = [node["image"] for node in manifests.walk(docs) if isinstance(node.get("image"), str)]
        ours = [image for image in found if "actorlog" in image]
        assert ours, overlay
        for image in ours:
            assert image.startswith("registry.example.com/team/actorlog"), image
            assert image.endswith(":9.9.9"), image
        checked += len(ours)
    assert checked


@pytest.mark.prometheus
def test_promtool_accepts_the_prometheusrule_spec(rendered: dict[str, list[Doc]], tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("needs promtool")
    rules = [doc for docs in rendered.values() for doc in manifests.of_kind(docs, "PrometheusRule")]
    if not rules:
        pytest.skip("no PrometheusRule rendered (dashboards/alerts/actorlog-alerts.yaml not written yet)")
    for number, rule in enumerate(rules):
        path = tmp_path / f"rules-{number}.yaml"
        path.write_text(yaml.safe_dump(rule["spec"]))
        result = subprocess.run(
            [promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr
