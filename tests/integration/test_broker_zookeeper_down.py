"""A broker whose ZooKeeper ensemble is down (``zookeeper.connect`` names a closed port), as a real
process: every failed connection attempt is one log line (server, ensemble, attempt, the error's
class and message), never a traceback; when ``zookeeper.connection.timeout.ms`` runs out the broker
exits 1 with one line saying how many attempts failed and how; and SIGTERM while it waits ends it at
once (exit 0), without waiting for that timeout.

Every wait is bounded: ``timeout=`` on the process, a watchdog that kills a broker whose output
never shows the expected line."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runtime.clock import LoopClock

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
ATTEMPT = re.compile(
    r"WARNING +actorlog\.runtime\.coordination\.zk: ZooKeeper 127\.0\.0\.1:(\d+) unreachable "
    r"\(ensemble 127\.0\.0\.1:\1, attempt (\d+)\): ConnectionRefusedError: .*Connect call failed.*"
)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _config(tmp_path: Path, connection_timeout_ms: int) -> tuple[Path, int]:
    zookeeper_port = _closed_port()
    config = tmp_path / "broker.properties"
    config.write_text(
        "broker.id=1\n"
        f"listeners=HTTP://127.0.0.1:{_closed_port()}\n"
        f"log.dirs={tmp_path / 'logs'}\n"
        f"zookeeper.connect=127.0.0.1:{zookeeper_port}\n"
        f"zookeeper.connection.timeout.ms={connection_timeout_ms}\n"
        "internal.auth.secret=a-secret-of-enough-characters\n"
    )
    return config, zookeeper_port


def _broker(config: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ops",
        "broker",
        "start",
        "--config",
        str(config),
        "--log-format",
        "console",
    ]


def test_connection_retries_are_one_line_each_and_the_start_fails_in_one_line(tmp_path: Path) -> None:
    # aiozk retries after 2^n s: attempts at about 0 s and 4 s fit in 7 s.
    config, zookeeper_port = _config(tmp_path, connection_timeout_ms=7_000)
    result = subprocess.run(
        _broker(config),
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output
    attempts = [match for line in output.splitlines() if (match := ATTEMPT.search(line))]
    assert [int(m.group(1)) for m in attempts] == [zookeeper_port] * len(attempts), output
    assert [int(m.group(2)) for m in attempts] == list(range(1, len(attempts) + 1))
    assert len(attempts) >= 2, output
    # Nothing else mentions the refused connection: no traceback lines, no second report of it.
    assert sum("Connect call failed" in line for line in output.splitlines()) == len(attempts) + 1
    assert result.stderr.splitlines()[-1].startswith(
        f"actorlog broker: connection loss during start 127.0.0.1:{zookeeper_port}: no session within "
        f"7000 ms ({len(attempts)} connection attempt(s) failed, the last with ConnectionRefusedError: "
    )


def test_sigterm_while_waiting_for_zookeeper_stops_the_broker_at_once(tmp_path: Path) -> None:
    config, _ = _config(tmp_path, connection_timeout_ms=600_000)
    process = subprocess.Popen(
        _broker(config),
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(60, process.kill)  # a broker that never tries fails the test
    watchdog.start()
    seen: list[str] = []
    try:
        assert process.stderr is not None
        for line in process.stderr:
            seen.append(line)
            if ATTEMPT.search(line):
                break
        clock = LoopClock()
        signalled = clock.now_ms()
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=30)
        elapsed_ms = clock.now_ms() - signalled
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    output = "".join(seen) + rest
    assert process.returncode == 0, output
    assert "broker 1 stopped while waiting for ZooKeeper" in output
    assert "Traceback" not in output
    assert elapsed_ms < 2_000
