"""Static checks of the checked-in dashboards and alert rules, no Prometheus needed.

Dashboards follow Grafana's dashboard JSON model (schemaVersion, uid, panels with gridPos, targets
with expr and refId, templating.list) and query only catalogued metrics (ops/metric_catalog.py)
through the data-source variable; alert rules likewise use only catalogued metrics, carry a
severity, a summary, a description and a runbook, and keep the severity ladder's order.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from ops.metric_catalog import metric_names
from tests.dashboards.grafana import (
    BUILT_IN_VARIABLES,
    Dashboard,
    load_dashboards,
    referenced_variables,
    variable_query,
)
from tests.dashboards.promql import metric_names as names_in
from tests.dashboards.promql import split_label_values
from tests.dashboards.promtool import ALERT_RULES, ALERT_TESTS

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# The variables every dashboard offers (issue 8): data source, cluster, broker, topic.
REQUIRED_VARIABLES = {"datasource", "cluster", "broker", "topic"}
LADDER = (
    "ActorlogUnderReplicatedPartitions",
    "ActorlogPartitionsAtMinIsr",
    "ActorlogPartitionsUnderMinIsr",
    "ActorlogOfflinePartitions",
)
SEVERITIES = ("info", "warning", "critical")
ROLLING_RESTART_ABSENCE_S = 120  # one broker down for about 1-2 minutes at a time


def dashboards() -> list[Dashboard]:
    found = load_dashboards()
    assert len(found) >= 2, "the replication and the partitions dashboards"
    return found


def alert_rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(ALERT_RULES.read_text())
    rules = [rule for group in document["groups"] for rule in group["rules"]]
    assert rules, "no rules"
    return rules


def seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    parts = re.findall(r"(\d+)(ms|s|m|h|d)", duration)
    assert "".join(n + u for n, u in parts) == duration, duration
    return sum(int(n) * units[u] for n, u in parts)


# ------------------------------------------------------------------------------ dashboards


@pytest.mark.parametrize("dashboard", dashboards(), ids=lambda d: d.path.name)
def test_dashboard_follows_grafanas_json_model(dashboard: Dashboard) -> None:
    model = dashboard.model
    assert isinstance(model["schemaVersion"], int)
    assert model["schemaVersion"] >= 36
    assert re.fullmatch(r"[a-z0-9-]{1,40}", model["uid"])
    assert model["title"]
    assert "actorlog" in model["tags"]
    panels = list(dashboard.panels())
    assert len([p for p in panels if p["type"] != "row"]) >= 10
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels:
        grid = panel["gridPos"]
        assert {"h", "w", "x", "y"} <= set(grid), panel["title"]
        assert grid["w"] > 0
        assert grid["h"] > 0
        assert grid["x"] >= 0
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["title"], panel
        assert panel.get("description"), f"{panel['title']}: say what the panel shows"
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["fieldConfig"]["defaults"].get("unit"), f"{panel['title']}: no unit"
        targets = panel["targets"]
        assert targets, panel["title"]
        ref_ids = [t["refId"] for t in targets]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in targets:
            assert target["expr"].strip(), panel["title"]
            assert target["datasource"] == DATASOURCE, panel["title"]


@pytest.mark.parametrize("dashboard", dashboards(), ids=lambda d: d.path.name)
def test_panels_do_not_overlap(dashboard: Dashboard) -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard.panels():
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


@pytest.mark.parametrize("dashboard", dashboards(), ids=lambda d: d.path.name)
def test_template_variables_are_defined_before_use(dashboard: Dashboard) -> None:
    variables = dashboard.variables()
    names = [v["name"] for v in variables]
    assert set(names) >= REQUIRED_VARIABLES
    (datasource,) = [v for v in variables if v["name"] == "datasource"]
    assert datasource["type"] == "datasource"
    assert datasource["query"] == "prometheus"
    defined: set[str] = set()
    for variable in variables:
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, variable["name"]
            query = variable_query(variable)
            # A variable's query may use only variables defined above it (Grafana resolves in order).
            assert referenced_variables(query) <= defined, variable["name"]
            split_label_values(query)
        defined.add(variable["name"])
    for target in dashboard.targets():
        undefined = referenced_variables(target.expr) - defined - BUILT_IN_VARIABLES
        assert not undefined, f"{target.key}: {undefined}"
    # Every variable the dashboard offers narrows at least one panel (else it is decoration).
    used = set().union(*(referenced_variables(t.expr) for t in dashboard.targets()))
    assert REQUIRED_VARIABLES - {"datasource"} <= used


def test_every_metric_name_in_every_dashboard_query_is_catalogued() -> None:
    catalogued = metric_names()
    checked: dict[str, set[str]] = {}
    for dashboard in dashboards():
        for target in dashboard.targets():
            checked[target.key] = names_in(target.expr)
        for variable in dashboard.query_variables():
            selector, _ = split_label_values(variable_query(variable))
            checked[f"{dashboard.title} / ${variable['name']}"] = names_in(selector)
    assert len(checked) > 50
    assert all(checked.values()), [key for key, names in checked.items() if not names]
    unknown = {key: names - catalogued for key, names in checked.items() if names - catalogued}
    assert unknown == {}
    # The health row and ISR dynamics are all there.
    used = set().union(*checked.values())
    assert {
        "kafka_controller_kafkacontroller_activecontrollercount",
        "kafka_server_replicamanager_underreplicatedpartitions",
        "kafka_server_replicamanager_atminisrpartitioncount",
        "kafka_server_replicamanager_underminisrpartitioncount",
        "kafka_controller_kafkacontroller_offlinepartitionscount",
        "kafka_server_replicamanager_isrshrinks_total",
        "kafka_server_replicamanager_isrexpands_total",
        "kafka_server_replicamanager_failedisrupdates_total",
        "kafka_server_isrchangepropagation_checks_total",
        "kafka_server_isrchangepropagation_pending_changes",
        "kafka_server_isrchangepropagation_delay_seconds_bucket",
        "kafka_server_replicafetchermanager_maxlag",
        "kafka_network_request_duration_seconds_bucket",
        "kafka_controller_controllerstats_leaderelection_duration_seconds_count",
        "kafka_controller_controllereventmanager_eventqueuesize",
    } <= used


# ------------------------------------------------------------------------------ alert rules


def test_every_metric_name_in_every_alert_rule_is_catalogued() -> None:
    catalogued = metric_names()
    rules = alert_rules()
    names = {rule["alert"]: names_in(rule["expr"]) for rule in rules}
    assert all(names.values())
    assert {alert: used - catalogued for alert, used in names.items() if used - catalogued} == {}


def test_every_alert_has_a_severity_a_summary_a_description_and_a_runbook() -> None:
    for rule in alert_rules():
        assert rule["alert"].startswith("Actorlog"), rule["alert"]
        assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
        assert {"summary", "description", "runbook"} <= set(rule["annotations"]), rule["alert"]
        assert all(len(rule["annotations"][key]) > 20 for key in ("summary", "description", "runbook"))


def test_the_severity_ladder_escalates_and_waits_out_a_rolling_restart() -> None:
    rules = {rule["alert"]: rule for rule in alert_rules()}
    ladder = [rules[name] for name in LADDER]
    severities = [SEVERITIES.index(rule["labels"]["severity"]) for rule in ladder]
    assert severities == sorted(severities)
    assert severities[0] < severities[-1]
    waits = [seconds(rule["for"]) for rule in ladder]
    # The worse the state, the sooner it alerts; none before a restarted broker is back.
    assert waits == sorted(waits, reverse=True)
    assert min(waits) > ROLLING_RESTART_ABSENCE_S
    # A controller failover lasts at most a ZooKeeper session timeout (18 s by default).
    assert seconds(rules["ActorlogActiveControllerCount"]["for"]) >= 60


def test_every_alert_has_promtool_cases_where_it_fires_and_where_it_stays_silent() -> None:
    alerts = {rule["alert"] for rule in alert_rules()}
    fires: set[str] = set()
    silent: set[str] = set()
    assert ALERT_TESTS
    for path in ALERT_TESTS:
        document = yaml.safe_load(path.read_text())
        assert document["rule_files"] == ["../actorlog-alerts.yaml"], path.name
        for case in document["tests"]:
            for check in case["alert_rule_test"]:
                (fires if check.get("exp_alerts") else silent).add(check["alertname"])
    assert fires == alerts
    assert silent == alerts
