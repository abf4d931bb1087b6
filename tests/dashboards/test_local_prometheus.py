"""ops/local/prometheus.py against the installed Prometheus: it starts on a free loopback port, scrapes
what ``set_targets`` names (added and removed while it runs) with the ``cluster`` and ``broker``
labels, answers queries, reports a server that cannot start with its log, and stops cleanly.

Prometheus scrapes itself here (its own ``/metrics`` is a real target), so no broker is needed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ops.local.prometheus import (
    InstantSample,
    LocalPrometheus,
    PrometheusNotInstalledError,
    PrometheusStartError,
    ScrapeTarget,
    find_prometheus,
    find_promtool,
)
from tests.dashboards.promtool import run_promtool

pytestmark = [pytest.mark.prometheus]


def test_a_missing_installation_names_the_package(tmp_path: Path) -> None:
    for find in (find_prometheus, find_promtool):
        with pytest.raises(PrometheusNotInstalledError, match=r"apt-get install prometheus"):
            find({"PATH": str(tmp_path)}, package_dir=tmp_path)


@pytest.mark.asyncio
async def test_scrapes_the_targets_it_is_given_with_cluster_and_broker_labels(
    prometheus_binary: Path, promtool: Path, tmp_path: Path
) -> None:
    prometheus = LocalPrometheus(
        tmp_path / "prometheus", scrape_interval_s=0.5, cluster="unit", binary=prometheus_binary
    )
    async with prometheus:
        assert prometheus.url.startswith("http://127.0.0.1:")
        config = run_promtool(promtool, "check", "config", str(prometheus.config_path))
        assert config.returncode == 0, config.stdout + config.stderr

        prometheus.set_targets([ScrapeTarget(f"127.0.0.1:{prometheus.port}", {"broker": "7"})])
        await prometheus.wait_for_targets_up(1, timeout_s=30)

        async def scraped() -> list[InstantSample] | None:
            return await prometheus.query('up{job="actorlog-brokers"} == 1') or None

        (sample,) = await prometheus.wait_until(scraped, timeout_s=30, what="a scrape stored")
        assert sample.labels["cluster"] == "unit"
        assert sample.labels["broker"] == "7"
        assert await prometheus.label_values("broker", match="up") == ["7"]
        now = await prometheus.now()
        series = await prometheus.query_range("up", start=now - 10, end=now, step_s=0.5)
        assert [s.labels["broker"] for s in series] == ["7"]
        assert series[0].finite_values()

        # Removed while running: discovery drops the target.
        prometheus.set_targets([])

        async def no_targets() -> bool:
            return not await prometheus.active_targets()

        await prometheus.wait_until(no_targets, timeout_s=30, what="the target dropped")
        port = prometheus.port
    assert not prometheus.is_running
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", port)  # nothing listens any more


@pytest.mark.asyncio
async def test_a_server_that_cannot_start_is_reported_with_its_log(
    prometheus_binary: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "broken-rules.yaml"
    rules.write_text("groups:\n  - name: broken\n    rules:\n      - alert: Broken\n        expr: sum(\n")
    prometheus = LocalPrometheus(tmp_path / "prometheus", rule_files=[rules], binary=prometheus_binary)
    with pytest.raises(PrometheusStartError, match=r"(?s)exited with status 1.*broken-rules.*parse error"):
        await prometheus.start()
    assert not prometheus.is_running
