"""k8s/sync.py: the committed copies of dashboards/ in the monitoring component match their sources.

If a test here fails after editing dashboards/, run ``python k8s/sync.py`` and commit the result.
Checked: the generated directory is exactly what the script produces now; the rendered
PrometheusRule's spec is the rules file (same groups, same rules); every dashboard is a ConfigMap
labelled for Grafana's sidecar whose data is the source file byte for byte and small enough for a
client-side ``kubectl apply``. The script's own rules are unit-tested on a scratch repository.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.k8s import manifests
from tests.k8s.manifests import Doc

pytestmark = pytest.mark.k8s

# kubectl's client-side apply stores the object in an annotation limited to 256 KiB.
LAST_APPLIED_LIMIT = 262_144


def _load_sync() -> ModuleType:
    spec = importlib.util.spec_from_file_location("k8s_sync", manifests.K8S / "sync.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("k8s_sync", module)
    spec.loader.exec_module(module)
    return module


sync = _load_sync()
ALERTS = manifests.REPO / sync.ALERTS_SOURCE
DASHBOARDS = sorted((manifests.REPO / sync.DASHBOARDS_SOURCE).glob("*.json"))


def test_generated_copies_are_up_to_date() -> None:
    problems = sync.check(sync.render())
    assert not problems, "k8s copies of dashboards/ are out of date: run `python k8s/sync.py`\n" + "\n".join(
        problems
    )


def _monitoring_overlays(rendered: dict[str, list[Doc]]) -> dict[str, list[Doc]]:
    found = {name: docs for name, docs in rendered.items() if manifests.of_kind(docs, "ServiceMonitor")}
    assert found, "no overlay includes the monitoring component"
    return found


def test_prometheusrule_carries_the_alert_rules(rendered: dict[str, list[Doc]]) -> None:
    if not ALERTS.is_file():
        pytest.skip(f"{sync.ALERTS_SOURCE} does not exist yet")
    source = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    alerts = [rule["alert"] for group in source["groups"] for rule in group["rules"] if "alert" in rule]
    assert alerts
    for overlay, docs in _monitoring_overlays(rendered).items():
        (rule,) = manifests.of_kind(docs, "PrometheusRule")
        assert rule["spec"] == source, f"{overlay}: the PrometheusRule differs from {sync.ALERTS_SOURCE}"


def test_dashboards_are_sidecar_configmaps_identical_to_the_sources(rendered: dict[str, list[Doc]]) -> None:
    if not DASHBOARDS:
        pytest.skip(f"no dashboards in {sync.DASHBOARDS_SOURCE} yet")
    for overlay, docs in _monitoring_overlays(rendered).items():
        labelled = [
            c
            for c in manifests.of_kind(docs, "ConfigMap")
            if c["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
        ]
        assert len(labelled) == len(DASHBOARDS), overlay
        for path in DASHBOARDS:
            configmap = manifests.named(docs, "ConfigMap", sync.configmap_name(path.name))
            assert configmap["data"] == {path.name: path.read_text(encoding="utf-8")}
            json.loads(configmap["data"][path.name])
            assert len(json.dumps(configmap).encode()) < LAST_APPLIED_LIMIT, (
                f"{path.name}: too big for client-side apply"
            )


# --- the script's rules, on a scratch repository -------------------------------------------------

RULES = """\
---
# A comment that must survive.
groups:
  - name: g
    rules:
      - alert: A
        # Folded, with a more-indented line: Go's YAML (kustomize) and PyYAML disagree on this text.
        expr: >-
          count by (cluster) (
            up == 0
          ) > 0
        for: 5m
        annotations:
          description: |
            literal

            text
"""


def test_rule_is_the_source_data_with_its_leading_comments() -> None:
    text = sync.prometheus_rule(RULES, "rules.yaml")
    document = yaml.safe_load(text)
    assert document["kind"] == "PrometheusRule"
    assert document["spec"] == yaml.safe_load(RULES)
    assert "# A comment that must survive." in text


def test_kustomize_reads_the_rule_as_pyyaml_reads_the_source(tmp_path: Path, kubectl_path: str) -> None:
    (tmp_path / "rule.yaml").write_text(sync.prometheus_rule(RULES, "rules.yaml"))
    (tmp_path / "kustomization.yaml").write_text("resources: [rule.yaml]\n")
    (rendered,) = manifests.render(tmp_path, kubectl_path)
    assert rendered["spec"] == yaml.safe_load(RULES)


@pytest.mark.parametrize(
    "bad",
    [
        "groups: []\n",
        "groups: [{name: g}]\nextra: 1\n",
        "- not a mapping\n",
        "groups: [\n",
        "a: 1\n---\nb: 2\n",
    ],
)
def test_rule_files_that_are_not_one_groups_mapping_are_refused(bad: str) -> None:
    with pytest.raises(sync.SyncError):
        sync.prometheus_rule(bad, "rules.yaml")


def test_configmap_names() -> None:
    assert sync.configmap_name("actorlog-replication.json") == "actorlog-dashboard-replication"
    assert sync.configmap_name("My Board_2.json") == "actorlog-dashboard-my-board-2"
    with pytest.raises(sync.SyncError):
        sync.configmap_name("__.json")


def _scratch(tmp_path: Path) -> Path:
    (tmp_path / sync.ALERTS_SOURCE).parent.mkdir(parents=True)
    (tmp_path / sync.ALERTS_SOURCE).write_text(RULES)
    (tmp_path / sync.DASHBOARDS_SOURCE).mkdir(parents=True)
    (tmp_path / sync.DASHBOARDS_SOURCE / "one.json").write_text('{"title": "one"}\n')
    return tmp_path


def test_write_then_check_and_drift_detection(tmp_path: Path) -> None:
    repo = _scratch(tmp_path)
    files = sync.render(repo)
    assert sync.check(files, repo), "nothing written yet"
    sync.write(files, repo)
    assert sync.check(sync.render(repo), repo) == []
    (repo / sync.DASHBOARDS_SOURCE / "one.json").write_text('{"title": "changed"}\n')
    assert any("differs" in problem for problem in sync.check(sync.render(repo), repo))
    (repo / sync.DASHBOARDS_SOURCE / "one.json").unlink()
    assert any("stale" in problem for problem in sync.check(sync.render(repo), repo))
    sync.write(sync.render(repo), repo)
    generated = repo / sync.GENERATED
    assert sorted(p.name for p in generated.rglob("*") if p.is_file()) == [
        "kustomization.yaml",
        "prometheusrule.yaml",
    ]


def test_missing_sources_generate_a_valid_empty_kustomization(tmp_path: Path, kubectl_path: str) -> None:
    files = sync.render(tmp_path)
    assert list(files) == [str(sync.GENERATED / "kustomization.yaml")]
    sync.write(files, tmp_path)
    assert manifests.render(tmp_path / sync.GENERATED, kubectl_path) == []


def test_invalid_dashboard_json_is_refused(tmp_path: Path) -> None:
    repo = _scratch(tmp_path)
    (repo / sync.DASHBOARDS_SOURCE / "bad.json").write_text("{not json")
    with pytest.raises(sync.SyncError, match="not JSON"):
        sync.render(repo)
