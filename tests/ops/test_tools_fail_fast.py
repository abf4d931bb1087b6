"""The client tools fail fast and clearly, as real processes (``python -m ops ...``), no cluster:

* ``perf produce`` against a bootstrap server nobody listens on gives up after ``max.block.ms``
  (from ``--producer-props`` or ``--producer.config``) with one line naming the condition, exit 1;
* Ctrl-C (SIGINT) or SIGTERM ends perf produce, perf consume, the console producer and consumer and
  topics within 1.5 s, with one line and status 130 / 143, while they wait on a "broker" that
  accepted their connection and never answers (the accepted connection is also the test's sign
  that the tool is running: no sleeping);
* output into a pipe closed after one line ends the tool quietly with 141, no traceback;
* in-process: an error no tool expected is one line (``--debug``: the traceback), and a client tool
  leaves the caller's signal handlers, event loop policy and logging as it found them.

Every wait is bounded: a socket timeout on accept, ``timeout=`` on every process wait."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.cli.main import COMMANDS, main
from ops.clients.connection import SECRET_ENV
from runtime.clock import LoopClock
from runtime.storage.config import LogConfig
from runtime.storage.log import Log
from runtime.storage.os_fs import OsFileSystem
from runtime.storage.record_builder import SimpleRecord, build_batch

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
STOP_BOUND_MS = 1_500


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), SECRET_ENV: "fail-fast-test-secret"}


def _actorlog(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "ops", *arguments]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def silent_broker() -> Iterator[socket.socket]:
    """A listener that accepts connections and never answers: a broker that hangs."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        server.settimeout(30)  # a tool that never connects fails the test instead of hanging it
        yield server


# ------------------------------------------------------------------------------ max.block.ms


PERF_PRODUCE = [
    "perf", "produce", "--topic", "orders", "--num-records", "1000000", "--record-size", "100",
    "--throughput", "-1",
]  # fmt: skip


@pytest.mark.parametrize("how", ["producer-props", "producer.config"])
def test_perf_produce_gives_up_after_max_block_ms_with_one_line(tmp_path: Path, how: str) -> None:
    port = _closed_port()
    if how == "producer-props":
        settings = ["--producer-props", f"bootstrap.servers=127.0.0.1:{port}", "max.block.ms=2000"]
    else:
        config = tmp_path / "producer.properties"
        config.write_text(f"bootstrap.servers=127.0.0.1:{port}\nmax.block.ms=2000\n")
        settings = ["--producer.config", str(config)]
    clock = LoopClock()
    started = clock.now_ms()
    result = subprocess.run(
        _actorlog(*PERF_PRODUCE, *settings),
        cwd=tmp_path,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    elapsed_ms = clock.now_ms() - started
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    assert re.fullmatch(
        "actorlog perf: topic orders not present in metadata after 2000 ms: no broker answered: "
        + re.escape(f"bootstrap server(s) 127.0.0.1:{port} unreachable (")
        + r"\d+ attempt\(s\)\)",
        line,
    ), line
    assert result.stdout == ""
    assert 2_000 <= elapsed_ms < 10_000


# ------------------------------------------------------------------------------ stop signals


TOOLS = {
    "perf produce": [*PERF_PRODUCE, "--bootstrap-server"],
    "perf consume": ["perf", "consume", "--topic", "orders", "--messages", "10", "--bootstrap-server"],
    "produce": ["produce", "--topic", "orders", "--bootstrap-server"],
    "consume": ["consume", "--topic", "orders", "--bootstrap-server"],
    "topics": ["topics", "--list", "--bootstrap-server"],
}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("tool", list(TOOLS))
def test_a_stop_signal_ends_a_waiting_tool_within_a_second_with_one_line(
    tmp_path: Path, silent_broker: socket.socket, tool: str, sig: signal.Signals
) -> None:
    port = silent_broker.getsockname()[1]
    process = subprocess.Popen(
        _actorlog(*TOOLS[tool], f"127.0.0.1:{port}"),
        cwd=tmp_path,
        env=_environment(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdin is not None
        # The console producer talks to a broker once it has a line to send; stdin stays open.
        process.stdin.write(b"a line\n")
        process.stdin.flush()
        connection, _ = silent_broker.accept()  # the tool is waiting for the broker's answer
        with connection:
            clock = LoopClock()
            signalled = clock.now_ms()
            process.send_signal(sig)
            _, err = process.communicate(timeout=10)
            elapsed_ms = clock.now_ms() - signalled
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    what = "interrupted" if sig is signal.SIGINT else "terminated"
    assert err.decode().splitlines() == [f"actorlog {tool.split()[0]}: {what} ({sig.name})"]
    assert process.returncode == 128 + sig
    assert elapsed_ms < STOP_BOUND_MS


# ------------------------------------------------------------------------------ broken pipes


def test_a_tool_whose_reader_goes_away_ends_quietly(tmp_path: Path) -> None:
    """``actorlog dump-log ... --print-data-log | head -1``: about a megabyte of lines into a pipe
    the reader closes after the first one."""
    directory = tmp_path / "orders-0"
    log = Log.open(OsFileSystem(), str(directory), LogConfig(), now_ms=0, rng=random.Random(1))
    for batch in range(200):
        records = [SimpleRecord(b"value-%d-%d" % (batch, n), None, (), 1_000) for n in range(50)]
        log.append_as_leader(build_batch(records), 0, now_ms=0, wall_clock_ms=0)
    log.close(flush=True)
    segment = directory / "00000000000000000000.log"
    with (tmp_path / "stderr").open("w+b") as stderr:
        process = subprocess.Popen(
            _actorlog("dump-log", "--files", str(segment), "--print-data-log"),
            cwd=tmp_path,
            env=_environment(),
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            process.stdout.close()
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
        stderr.seek(0)
        errors = stderr.read().decode()
    assert first == f"Dumping {segment}\n".encode()
    assert errors == ""
    assert process.returncode == 141


# ------------------------------------------------------------------------------ in-process


def test_an_error_no_tool_expected_is_one_line_and_debug_shows_the_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "failing_tool.py").write_text(
        "def main(argv):\n    raise RuntimeError('the disk\\nis on fire')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(COMMANDS, "failing", ("failing_tool", "fails"))
    assert main(["failing"]) == 1
    assert capsys.readouterr().err == "actorlog failing: RuntimeError: the disk is on fire\n"
    with pytest.raises(RuntimeError, match="the disk"):
        main(["--debug", "failing"])


def test_a_client_tool_run_in_process_leaves_handlers_policy_and_logging_as_it_found_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()

    def state() -> tuple[object, ...]:
        return (
            signal.getsignal(signal.SIGINT),
            signal.getsignal(signal.SIGTERM),
            asyncio.get_event_loop_policy(),
            list(root.handlers),
            root.level,
        )

    before = state()
    main(["dump-log", "--files", str(tmp_path / "00000000000000000000.log")])
    capsys.readouterr()
    assert state() == before
