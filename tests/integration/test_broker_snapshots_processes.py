"""metrics.snapshot.dir: a broker writes its own metric snapshots (the exporter's Parquet format),
one at start, one per interval and a last one when it stops, and beside them the state-change
events recorded since the previous one."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from ops.metric_catalog import CATALOG
from ops.snapshots import read_snapshots, read_state_changes, snapshot_files
from tests.support.process_cluster import ProcessCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk]


async def test_a_broker_writes_its_own_snapshots(zk_connect_string: str, tmp_path: Path) -> None:
    snapshots = tmp_path / "snapshots"
    properties = {"metrics.snapshot.dir": str(snapshots), "metrics.snapshot.interval.ms": "1000"}
    async with ProcessCluster(zk_connect_string, tmp_path, properties) as cluster:
        await cluster.start(1)
        # Broker 1 is the controller: it writes the new partition's state (a leader election).
        await cluster.create_topic("orders", {0: [1]})
        assert await cluster.kill(1, signal.SIGTERM) == 0
    files = snapshot_files(snapshots)
    assert len(files) >= 2  # at start and at shutdown
    assert all(path.name.startswith("1-") for path in files)
    table = read_snapshots(snapshots).to_pylist()
    names = {row["metric"] for row in table}
    catalogued = {name for spec in CATALOG for name in spec.sample_names}
    assert "kafka_server_replicamanager_isrshrinks_total" in names
    assert names <= catalogued | {n for n in names if n.startswith(("process_", "python_"))}
    assert {row["broker"] for row in table} == {"1"}
    events = read_state_changes(snapshots).to_pylist()
    elections = [(e["kind"], e["topic"], e["partition"], e["leader"], e["isr"], e["reason"]) for e in events]
    assert ("leader_election", "orders", 0, 1, [1], "new_partition") in elections
    # Each event once: the files of later rounds hold only what was recorded after the earlier ones.
    assert len({(e["incarnation"], e["sequence"]) for e in events}) == len(events)
