"""The benchmarks that start their own cluster, run small as a user runs them (``python -m
ops.bench...``) with ``--tls``: the cluster they start has HTTPS listeners and every client of
theirs verifies the certificates, so the figures with and without ``--tls`` are TLS's cost. The
figures themselves are not asserted (timed assertions do not belong in tests)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ops.bench.producer import main as producer_benchmark
from ops.clients.connection import SECRET_ENV

pytestmark = [
    pytest.mark.integration,
    pytest.mark.zk,
    pytest.mark.skipif(shutil.which("openssl") is None, reason="--tls needs the openssl command"),
]

ROOT = Path(__file__).resolve().parents[2]


def bench(module: str, *arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Run from an empty directory: no actorlog-data/client.properties to fall back on.
    environment = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    return subprocess.run(
        [sys.executable, "-m", f"ops.bench.{module}", *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**environment, "PYTHONPATH": str(ROOT)},
        check=False,
    )


def test_the_producer_benchmark_runs_over_tls(tmp_path: Path, zookeeper_server: object) -> None:
    run = bench(
        "producer", "--tls", "--brokers", "1", "--partitions", "1", "--cases", "rf1-acks1",
        "--sizes", "100", "--records", "2000",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(
        r"^cluster: 1 brokers at https://127\.0\.0\.1:\d+, 1 partitions$", run.stdout, re.MULTILINE
    )
    assert re.search(
        r"^RF1 acks=1 +100 B: 2000 records sent, .*; 0 retries, 0 errors;", run.stdout, re.MULTILINE
    )


def test_tls_is_for_the_producer_benchmarks_own_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        producer_benchmark(["--tls", "--bootstrap-server", "127.0.0.1:9092"])
    assert exited.value.code == 2
    assert "--tls is for the cluster this benchmark starts" in capsys.readouterr().err


@pytest.mark.slow
def test_the_replication_benchmark_runs_over_tls(tmp_path: Path, zookeeper_server: object) -> None:
    run = bench(
        "replication", "--tls", "--records", "5000", "--sizes", "100", "--partitions", "3",
        "--latency-records", "200",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    listeners = re.search(r"^cluster: 3 broker processes at (.*), topic", run.stdout, re.MULTILINE)
    assert listeners is not None, run.stdout
    assert [url.split("://")[0] for url in listeners[1].split(", ")] == ["https"] * 3
    assert re.search(r"^throughput, 100 B records: 5000 records sent", run.stdout, re.MULTILINE), run.stdout
    assert "idle acks=all latency over 200 sequential records" in run.stdout
