"""The simulation in CI: a fixed set of seeds passes, and a seed replays exactly.

``CI_SEEDS`` seeds of the full fault mix run in parallel processes (the same runner as
``actorlog sim --seeds``); any failure prints its seed and the command that replays it.
``make sim SEEDS=10000`` runs the long campaign.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ops.cli.sim import run_one
from ops.sim.runner import SimOptions, run_seed

pytestmark = pytest.mark.sim

# 40 seeds keep make test within its 15 minutes; `make sim` runs the long campaign.
CI_SEEDS = range(1, 41)
ROOT = Path(__file__).resolve().parents[2]


def test_the_fixed_seeds_pass() -> None:
    context = multiprocessing.get_context("spawn")
    with context.Pool(max(2, os.cpu_count() or 1)) as pool:
        outcomes = pool.map(run_one, [(seed, SimOptions().steps) for seed in CI_SEEDS])
    failures = [f"seed {o[0]}: {o[1]}" for o in outcomes if o[1] is not None]
    faults = sum(sum(o[4].values()) for o in outcomes)
    assert faults > len(CI_SEEDS) * 10, "the fixed seeds inject too few faults to prove anything"
    assert not failures, "\n".join(failures) + "\nreplay: actorlog sim --seed N --verbose"


def test_a_seed_replays_identically_in_process() -> None:
    first, second = run_seed(5), run_seed(5)
    assert first.events.lines == second.events.lines
    assert first.events.digest() == second.events.digest()
    assert len(first.events.lines) > 50


def test_a_seed_replays_identically_in_another_process() -> None:
    """Two ``actorlog sim`` processes (each fixes its hash seed itself) print the same event log
    hash for one seed, and it differs from another seed's."""

    def digest(seed: int) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "ops", "sim", "--seed", str(seed), "--no-shrink"],
            cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONHASHSEED": "1"},
        )  # fmt: skip
        found = re.search(r"event log ([0-9a-f]{16})", done.stdout)
        assert found is not None, done.stdout + done.stderr
        return found.group(1)

    assert digest(11) == digest(11)
    assert digest(11) != digest(12)
