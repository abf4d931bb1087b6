"""`actorlog demo` end to end, as `make demo` runs it: it ends by itself, reports nothing lost or
duplicated, leaves no process behind, and the rollup's ISR history agrees with its timeline."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ops.rollup import metrics as M
from ops.snapshots import read_snapshots
from tests.ops.test_rollup_job import reference_increase

pytestmark = [pytest.mark.integration, pytest.mark.zk]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.spark
def test_the_demo_runs_through_its_faults_and_loses_nothing(tmp_path: Path, zookeeper_server: object) -> None:
    data_dir = tmp_path / "demo"
    completed = subprocess.run(
        [sys.executable, "-m", "ops", "demo", "--data-dir", str(data_dir)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    out = completed.stdout
    assert completed.returncode == 0, out + completed.stderr
    timeline = out[out.index("Timeline") :]
    for event in (
        "cluster up",
        "stalled (SIGSTOP)",
        "shrank to",
        "expanded to",
        "ISR changes propagated to the controller",
        "killed (SIGKILL)",
        "controller elected broker",
        "rejoined the ISR",
        "cluster stopped",
    ):
        assert event in timeline, event
    read_back = re.search(
        r"read back (\d+) records: (\d+) acknowledged records lost, (\d+) duplicated", timeline
    )
    assert read_back is not None
    assert int(read_back.group(1)) > 1000
    assert (read_back.group(2), read_back.group(3)) == ("0", "0")
    assert not (data_dir / "cluster.json").exists()  # the cluster is gone
    assert list((data_dir / "snapshots").rglob("*.parquet"))

    # The printed counter totals never go backwards (a killed broker keeps what it had counted),
    # the topic's first elections are said to be that, and the exporter's expected scrape failures
    # are a count in the timeline, not connection errors interleaved with it.
    counters = [
        tuple(int(value) for value in found)
        for found in re.findall(
            r"isr shrinks (\d+), isr expands (\d+), .*leader elections (\d+) .*ISR changes propagated (\d+)",
            timeline,
        )
    ]
    assert len(counters) >= 5
    assert all(
        a <= b for earlier, later in itertools.pairwise(counters) for a, b in zip(earlier, later, strict=True)
    ), counters
    assert re.search(r"leader elections [1-9]\d* \([1-9]\d* for the new topic's first leaders\)", timeline)
    assert "scrape of broker" not in completed.stderr
    assert re.search(
        r"broker \d could not be scraped in \d+ rounds? \(stalled or down, as planned\)", timeline
    )

    # The rollup's ISR intervals (from the brokers' state-change events) start within a second of
    # each ISR state the timeline saw: the stalled follower's shrink and expand, the killed leader's
    # successor and its rejoin; and the counted shrinks and expands equal the events.
    check = out[out.index("The timeline against the rollup") :]
    agreements = re.findall(r"^  agrees  (.*)$", check, flags=re.MULTILINE)
    assert "DIFFERS" not in check, check
    for seen in (
        "shrank to",
        "expanded to",
        "elected leader of",
        "rejoined the ISR",
        "isr shrinks:",
        "isr expands:",
    ):
        assert any(seen in line for line in agreements), (seen, check)
    assert (data_dir / "rollup" / "report" / "isr_timeline.png").stat().st_size > 0

    # The rollup's window totals over the real run equal a plain-Python reading of the same
    # snapshot files (reset-aware counter deltas in complete windows), and they show the faults.
    snapshots = data_dir / "snapshots"
    scraped = read_snapshots(snapshots).to_pylist()
    as_of_ms = max(int(row["ts"].timestamp() * 1000) for row in scraped)
    as_of_ms -= as_of_ms % 10_000  # the job leaves the still-open window out
    windows = [
        row
        for row in pq.read_table(data_dir / "rollup" / "tables" / "cluster_windows").to_pylist()
        if str(row["window"]) == "10s"
    ]
    for column, metric in (("isr_shrinks", M.ISR_SHRINKS.name), ("isr_expands", M.ISR_EXPANDS.name)):
        total = sum(row[column] or 0 for row in windows)
        assert total == reference_increase(snapshots, metric, as_of_ms, 10_000), column
        assert total >= 1, column


@pytest.mark.slow
def test_the_demo_over_tls_scrapes_and_loses_nothing(tmp_path: Path, zookeeper_server: object) -> None:
    """`actorlog demo --tls` (without the rollup, about 40 s): HTTPS listeners; the clients, the
    demo's own metric scrapes and the snapshot exporter all verify the brokers' certificates."""
    if shutil.which("openssl") is None:
        pytest.skip("--tls needs the openssl command")
    data_dir = tmp_path / "demo"
    completed = subprocess.run(
        [sys.executable, "-m", "ops", "demo", "--tls", "--no-rollup", "--data-dir", str(data_dir)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    out = completed.stdout
    assert completed.returncode == 0, out + completed.stderr
    timeline = out[out.index("Timeline") :]
    assert "cluster up (3 brokers, HTTPS, ZooKeeper)" in timeline
    assert set(re.findall(r"broker (\d): (\w+)://", timeline)) == {
        ("1", "https"),
        ("2", "https"),
        ("3", "https"),
    }
    read_back = re.search(r"read back (\d+) records: 0 acknowledged records lost, 0 duplicated", timeline)
    assert read_back is not None
    assert int(read_back.group(1)) > 1000
    # The demo's scrapes over https counted the stall's ISR shrink and the kill's election.
    assert re.search(r"isr shrinks [1-9]\d*, .*leader elections [2-9]", timeline), timeline
    scraped = read_snapshots(data_dir / "snapshots")
    assert set(scraped.column("broker").to_pylist()) == {"1", "2", "3"}
