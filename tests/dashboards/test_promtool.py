"""promtool over the project's Prometheus artefacts: the alert rules parse (``check rules``), every
alert fires and stays silent where its unit tests say (``test rules``), and a live broker's
``/metrics`` passes the exposition linter (``check metrics``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
import yaml

from actors.common.types import TopicPartition
from tests.dashboards.promtool import ALERT_RULES, ALERT_TESTS, lint_exposition, run_promtool
from tests.support.process_cluster import ProcessCluster


@pytest.mark.prometheus
def test_promtool_check_rules_accepts_the_alert_rules(promtool: Path) -> None:
    result = run_promtool(promtool, "check", "rules", str(ALERT_RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    rules = sum(len(group["rules"]) for group in yaml.safe_load(ALERT_RULES.read_text())["groups"])
    assert rules > 0
    assert f"SUCCESS: {rules} rules found" in result.stdout


@pytest.mark.prometheus
@pytest.mark.parametrize("test_file", ALERT_TESTS, ids=lambda path: path.name)
def test_promtool_unit_tests_of_the_alert_rules_pass(promtool: Path, test_file: Path) -> None:
    result = run_promtool(promtool, "test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.asyncio
@pytest.mark.integration
@pytest.mark.zk
@pytest.mark.prometheus
async def test_promtool_check_metrics_accepts_a_live_brokers_exposition(
    promtool: Path, zk_connect_string: str, tmp_path: Path
) -> None:
    async with ProcessCluster(zk_connect_string, tmp_path) as cluster:
        broker = await cluster.start(1)
        # A hosted partition adds the per-topic and per-partition families.
        await cluster.create_topic("lint", {0: [1]})
        await cluster.wait_for_partition_state(
            TopicPartition("lint", 0), lambda s: s.leader == 1, timeout_s=30
        )
        async with aiohttp.ClientSession() as session, session.get(broker.url + "/metrics") as response:
            assert response.status == 200
            exposition = await response.text()
    assert 'kafka_log_log_size{partition="0",topic="lint"}' in exposition
    assert await asyncio.to_thread(lint_exposition, promtool, exposition) == []
