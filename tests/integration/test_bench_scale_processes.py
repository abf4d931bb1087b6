"""``python -m ops.bench.scale`` end to end, small (30 partitions, a 6 s idle phase): its own
cluster of three broker processes, every phase, one table whose every figure was measured. The
figures themselves are not asserted (timed assertions do not belong in tests)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ops.clients.connection import SECRET_ENV

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"\d+(\.\d+)?"


def test_the_scale_benchmark_measures_every_phase(tmp_path: Path, zookeeper_server: object) -> None:
    environment = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    run = subprocess.run(
        [sys.executable, "-m", "ops.bench.scale", "--partitions", "30", "--idle-minutes", "0.1"],
        cwd=tmp_path,  # no actorlog-data/ to fall back on
        capture_output=True,
        text=True,
        timeout=300,
        env={**environment, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert re.search(
        r"^Scale figures, \d{4}-\d\d-\d\d \d\d:\d\d UTC: "
        r"`python -m ops\.bench\.scale --partitions 30 --idle-minutes 0\.1`$",
        out,
        re.MULTILINE,
    ), out
    assert (
        "30 partitions, RF 3, min.insync.replicas=2, 3 broker processes, zookeeper.session.timeout.ms=6000"
        in out
    )
    assert "n/a" not in out, out  # every figure was measured
    per_broker = ", ".join(f"broker {b}: {NUMBER}" for b in (1, 2, 3))
    for row in (
        r"\| then: partitions not led by their preferred replica \(elected\) \| \d+ \| — \|",
        rf"\| idle 0\.1 min: CPU, % of one core \| broker 1: {NUMBER} %, broker 2: {NUMBER} %, "
        rf"broker 3: {NUMBER} % \| — \|",
        rf"\| idle 0\.1 min: ZooKeeper CPU, % of one core \| {NUMBER} % \| — \|",
        rf"\| idle 0\.1 min: follower fetches answered/s \| {per_broker} \| — \|",
        rf"\| idle 0\.1 min: ISR shrinks \| {per_broker} \| 0 \|",
        # Broker 1 leads 10 of the 30; each of them moved, and came back before the kill.
        r"\| controlled shutdown \(SIGTERM\): all 10 leaderships moved \| \d+ ms \| ≤ 2000 ms \|",
        r"\| controlled shutdown \(SIGTERM\): per partition p50 / p99 \| \d+ ms / \d+ ms \| — \|",
        r"\| restart: preferred election, broker 1 leads again \| \d+ ms \| — \|",
        r"\| hard kill \(SIGKILL\)( of the controller)?: all 10 leaderships moved \| \d+ ms \| ≤ 7000 ms \|",
    ):
        assert re.search(f"^{row}$", out, re.MULTILINE), f"{row}\n{out}"


def test_an_unknown_phase_is_one_line_and_exit_2(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "ops.bench.scale", "--phases", "idle,reboot"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert run.returncode == 2
    assert "unknown phase(s) reboot: choose from idle,shutdown,kill" in run.stderr
    assert "Traceback" not in run.stderr
