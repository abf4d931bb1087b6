"""``actorlog cluster up`` as a child process for a test module: started, and up once it prints its
banner (read from its stdout, no polling; a cluster that never comes up fails after two minutes)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_UP_TIMEOUT_S = 120


def start_cluster_up(arguments: Sequence[str], workdir: Path) -> tuple[subprocess.Popen[str], list[str]]:
    """``actorlog cluster up ARGUMENTS`` run in ``workdir``; returns the process and its banner,
    whose last line is ``Press Ctrl-C ...``. Its output goes on in the process's stdout."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ops", "cluster", "up", *arguments],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    watchdog = threading.Timer(_UP_TIMEOUT_S, process.kill)
    watchdog.start()
    banner: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        banner.append(line.rstrip("\n"))
        if line.startswith("Press Ctrl-C"):
            break
    watchdog.cancel()
    assert banner, "cluster up printed nothing"
    assert banner[-1].startswith("Press Ctrl-C"), "\n".join(banner)
    return process, banner
