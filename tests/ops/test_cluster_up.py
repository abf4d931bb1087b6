"""``actorlog cluster up`` as a user meets it: the ports it picks and the children it watches.

* The port probe binds as the broker's server does, so the TIME_WAIT connections a cluster stopped
  a moment ago leaves behind do not count as taken, while a port something listens on does; two
  runs in a row both get the ports asked for; a port really taken is said loudly, with the
  ``--bootstrap-server`` to use instead.
* A child that dies while the cluster runs is reported at once, with the end of its log, and the
  run ends with exit code 1 and a summary naming it.

The process tests ask for ports in 20000-29999, below the OS's ephemeral range (32768 and up on
Linux), so the random ports other tests running in parallel bind never land on them.
"""

from __future__ import annotations

import asyncio
import os
import queue
import secrets
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import orjson
import pytest

from ops.local.cluster import ChildExit, port_is_free
from runtime.transport.http import HttpServer

ROOT = Path(__file__).resolve().parents[2]
_HOST = "127.0.0.1"
_STARTUP_TIMEOUT_S = 120.0
_REPORT_TIMEOUT_S = 10.0  # generous: the report is printed the moment the process is reaped


# ----------------------------------------------------------------------------------- the probe


async def _time_wait_port() -> int:
    """A port whose server was stopped with a connection it closed first: TIME_WAIT on the
    server's side of that port, as a broker stopped by Ctrl-C leaves it."""
    server = HttpServer(_HOST, 0, routes=[], max_body_bytes=1024)  # the broker's own server class
    await server.start()
    assert server.port is not None
    port = server.port
    reader, writer = await asyncio.open_connection(_HOST, port)
    try:
        await server.stop()  # closes the idle connection from the server's side first
        assert await asyncio.wait_for(reader.read(), timeout=10) == b""
    finally:
        writer.close()  # our FIN: the server's end moves to TIME_WAIT
        await writer.wait_closed()
    return port


@pytest.mark.integration
@pytest.mark.asyncio
async def test_a_port_left_in_time_wait_counts_as_free() -> None:
    port = await _time_wait_port()
    # Negative control: a bare bind (what the probe used to do) trips over the TIME_WAIT socket.
    with socket.socket() as bare, pytest.raises(OSError):
        bare.bind((_HOST, port))
    assert await port_is_free(port)
    # And the broker's server really can listen there again.
    server = HttpServer(_HOST, port, routes=[], max_body_bytes=1024)
    await server.start()
    await server.stop()


@pytest.mark.integration
@pytest.mark.asyncio
async def test_a_port_something_listens_on_is_taken() -> None:
    server = HttpServer(_HOST, 0, routes=[], max_body_bytes=1024)
    await server.start()
    try:
        assert server.port is not None
        assert not await port_is_free(server.port)
    finally:
        await server.stop()


def test_child_exit_says_how_it_ended(tmp_path: Path) -> None:
    log = tmp_path / "broker.log"
    log.write_text("".join(f"line {n}\n" for n in range(30)))
    killed = ChildExit("broker 2", 4242, -9, log)
    assert killed.how == "killed by SIGKILL"
    report = killed.report().splitlines()
    assert report[0] == f"broker 2 (pid 4242) killed by SIGKILL; the end of {log}:"
    assert report[1:] == [f"    line {n}" for n in range(10, 30)]  # the last 20 lines
    assert ChildExit("ZooKeeper", 1, 3, tmp_path / "missing.log").report().splitlines() == [
        f"ZooKeeper (pid 1) exited with status 3; the end of {tmp_path / 'missing.log'}:",
        "    (the log is empty)",
    ]


# --------------------------------------------------------------------------- the real command


@dataclass
class ClusterUp:
    """A running ``actorlog cluster up``: its banner (stdout up to "Press Ctrl-C") and its stderr
    lines as they come (a reader thread feeds the queue, so tests wait on the stream itself)."""

    process: subprocess.Popen[str]
    data_dir: Path
    banner: list[str] = field(default_factory=list)
    errors: queue.Queue[str | None] = field(default_factory=queue.Queue)

    @property
    def description(self) -> dict[str, object]:
        parsed: dict[str, object] = orjson.loads((self.data_dir / "cluster.json").read_bytes())
        return parsed

    def broker_field(self, broker_id: int, key: str) -> object:
        brokers = self.description["brokers"]
        assert isinstance(brokers, list)
        return next(b[key] for b in brokers if b["broker_id"] == broker_id)

    def port(self, broker_id: int) -> int:
        return int(str(self.broker_field(broker_id, "endpoint")).rsplit(":", 1)[1])

    def next_error(self, timeout_s: float) -> str:
        line = self.errors.get(timeout=timeout_s)  # queue.Empty: nothing came in time
        assert line is not None, "cluster up closed its stderr"
        return line

    def stop(self, sig: signal.Signals = signal.SIGINT) -> tuple[int, str, str]:
        """Signal it and wait for it to end: exit code, the rest of stdout, the rest of stderr."""
        self.process.send_signal(sig)
        return self.wait()

    def wait(self) -> tuple[int, str, str]:
        # Not communicate(): it would read stderr too, racing the thread that feeds the queue.
        assert self.process.stdout is not None
        watchdog = threading.Timer(120, self.process.kill)  # a stop that hangs fails, bounded
        watchdog.start()
        try:
            with self.process.stdout:
                rest = self.process.stdout.read()
            self.process.wait()
        finally:
            watchdog.cancel()
        errors: list[str] = []
        while (line := self.errors.get(timeout=30)) is not None:
            errors.append(line)
        return self.process.returncode, rest, "\n".join(errors)


def _cluster_up(workdir: Path, *arguments: str) -> ClusterUp:
    data_dir = workdir / "actorlog-data"
    process = subprocess.Popen(
        [sys.executable, "-m", "ops", "cluster", "up", "--data-dir", str(data_dir), *arguments],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    running = ClusterUp(process, data_dir)
    assert process.stdout is not None
    assert process.stderr is not None
    stderr = process.stderr

    def pump() -> None:
        with stderr:
            for line in stderr:
                running.errors.put(line.rstrip("\n"))
        running.errors.put(None)  # after closing it: whoever sees the end sees no open pipe

    threading.Thread(target=pump, daemon=True).start()
    watchdog = threading.Timer(_STARTUP_TIMEOUT_S, process.kill)  # never up: the test fails, not hangs
    watchdog.start()
    try:
        for line in process.stdout:
            running.banner.append(line.rstrip("\n"))
            if line.startswith("Press Ctrl-C"):
                break
    finally:
        watchdog.cancel()
    if not running.banner or not running.banner[-1].startswith("Press Ctrl-C"):
        _, _, errors = running.wait()  # it ended (or the watchdog killed it)
        pytest.fail("cluster up did not come up:\n" + "\n".join([*running.banner, errors]))
    return running


def _free_ports_below_ephemeral(count: int) -> int:
    """A base port P with P..P+count-1 free right now, picked at random in 20000-29999."""

    async def all_free(base: int) -> bool:
        return all([await port_is_free(port) for port in range(base, base + count)])

    for _ in range(50):
        base = 20_000 + secrets.randbelow(10_000 - count)
        if asyncio.run(all_free(base)):
            return base
    pytest.fail("no free ports in 20000-29999")


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port below the ephemeral range that something else listens on for the whole test."""
    base = _free_ports_below_ephemeral(3)
    with socket.create_server((_HOST, base)):
        yield base


@pytest.mark.integration
@pytest.mark.zk
def test_two_runs_in_a_row_both_get_the_ports_asked_for(tmp_path: Path, zookeeper_server: object) -> None:
    base = _free_ports_below_ephemeral(1)
    first = _cluster_up(tmp_path, "--brokers", "1", "--base-port", str(base))
    assert first.port(1) == base
    # A client connected until the broker stops: the broker closes first, so its end of the
    # connection stays in TIME_WAIT on the broker's port for a minute after the run.
    with socket.create_connection((_HOST, base), timeout=60) as client:
        code, _, errors = first.stop()
        assert client.recv(1) == b""
    assert code == 0, errors
    assert "WARNING" not in errors
    with socket.socket() as bare, pytest.raises(OSError):
        bare.bind((_HOST, base))  # the TIME_WAIT is there: a bare bind would have called it taken

    second = _cluster_up(tmp_path, "--brokers", "1", "--base-port", str(base))
    try:
        assert second.port(1) == base
        assert f"--bootstrap-server {_HOST}:{base}" in "\n".join(second.banner)
    finally:
        code, _, errors = second.stop()
    assert code == 0, errors
    assert "WARNING" not in errors


@pytest.mark.integration
@pytest.mark.zk
def test_a_taken_port_is_said_and_a_dead_child_is_reported_at_once(
    tmp_path: Path, zookeeper_server: object, held_port: int
) -> None:
    cluster = _cluster_up(tmp_path, "--brokers", "2", "--base-port", str(held_port))
    try:
        first = cluster.port(1)
        assert first != held_port
        assert cluster.port(2) == held_port + 1  # the free one is kept
        warning = cluster.next_error(_REPORT_TIMEOUT_S)
        assert warning.startswith("actorlog cluster: WARNING: port(s) already in use: ")
        assert f"{held_port} (broker 1 is on {first})" in warning
        assert f"use --bootstrap-server localhost:{first}, not localhost:{held_port}" in warning
        assert str(cluster.data_dir / "cluster.json") in warning
        assert f"HTTP://{_HOST}:{first}" in cast("list[str]", cluster.broker_field(1, "listeners"))
        # client.properties names the Kafka listeners (for Kafka's tools), wherever they ended up.
        kafka = cast("list[str]", cluster.broker_field(1, "listeners"))[1].removeprefix("KAFKA://")
        properties = (cluster.data_dir / "client.properties").read_text()
        assert f"bootstrap.servers={kafka}," in properties

        # The victim is not the controller: the survivor's controlled shutdown then has a
        # controller to ask, instead of retrying until the dead one's session expires.
        controller = int(cluster.banner[0].rsplit(" ", 1)[1])
        victim = 3 - controller
        pid = int(str(cluster.broker_field(victim, "pid")))
        os.kill(pid, signal.SIGKILL)
        report = cluster.next_error(_REPORT_TIMEOUT_S)  # waits on the stream, bounded
        log = cluster.data_dir / f"broker-{victim}" / "broker.log"
        assert report == f"actorlog cluster: broker {victim} (pid {pid}) killed by SIGKILL; the end of {log}:"
        expected = [f"    {line}" for line in log.read_text().splitlines()[-20:]]  # it writes no more
        assert expected
        assert [cluster.next_error(_REPORT_TIMEOUT_S) for _ in expected] == expected
        assert cluster.broker_field(victim, "pid") is None  # the cluster file no longer names it
        survivor = int(str(cluster.broker_field(controller, "pid")))
    finally:
        code, out, errors = cluster.stop()
    assert code == 1, errors
    assert "stopped." in out
    assert (
        f"actorlog cluster: not a clean run: died while the cluster ran: broker {victim} (pid {pid}, "
        f"killed by SIGKILL; log {log})"
    ) in errors.splitlines()
    assert f"broker {controller}" not in errors  # stopped by us: no news
    with pytest.raises(ProcessLookupError):
        os.kill(survivor, 0)
