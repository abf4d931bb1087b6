"""``actorlog cluster up`` as a user runs it, for Kafka's tools to point at (``make interop``) and
for ``make bench-vs-kafka`` to measure.

The command runs as a child process (``python -m ops cluster up --base-port 0 --data-dir DIR``,
its own ZooKeeper included) in its own session. It is up when it prints its banner
(``actorlog: N broker(s) up; ...``), which it does after it has written ``DIR/client.properties``
and every broker has registered and a controller is elected: a thread reads its stdout line by
line into ``DIR/cluster-up.log`` and signals the banner, so nothing polls. If the command exits
first, the error quotes the end of that log (stderr goes there too).

``client.properties`` is what Kafka's tools are given, unchanged: ``bootstrap.servers`` (the
brokers' Kafka listeners), ``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``.

``DIR/cluster.json`` (written by the command) names the brokers' HTTP listeners
(``http_bootstrap_servers``: what actorlog's own clients take) and their pids; the ZooKeeper the
command started is its child process whose command line runs ``ZooKeeperServerMain``
(``zookeeper_pid``, read from ``/proc``).

Stopping is the command's own: SIGTERM (a controlled shutdown of each broker, then ZooKeeper),
SIGKILL of its process group only if it has not exited within the grace period.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final

import orjson

from ops.local.cluster import ROOT
from ops.properties import parse_properties

__all__ = ["ActorlogClusterUp", "ActorlogStartError", "children_of"]

BANNER: Final = "broker(s) up"
_ZOOKEEPER_MAIN: Final = b"org.apache.zookeeper.server.ZooKeeperServerMain"
_STOP_GRACE_S: Final = 90.0
_LOG_TAIL_LINES: Final = 30


class ActorlogStartError(RuntimeError):
    """``cluster up`` did not come up; the message quotes the end of its output."""


class ActorlogClusterUp:
    """``with ActorlogClusterUp(tmp_path) as cluster:`` runs ``actorlog cluster up`` there."""

    def __init__(self, data_dir: Path, *, brokers: int = 3, start_timeout_s: float = 180.0) -> None:
        self.data_dir = data_dir.resolve()
        self.brokers = brokers
        self._start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._banner = threading.Event()  # set at the banner or at the end of the output
        self._banner_seen = False

    @property
    def log_path(self) -> Path:
        return self.data_dir / "cluster-up.log"

    @property
    def client_properties_path(self) -> Path:
        return self.data_dir / "client.properties"

    @property
    def bootstrap_servers(self) -> str:
        return parse_properties(self.client_properties_path.read_text())["bootstrap.servers"]

    def broker_logs(self) -> list[Path]:
        return sorted(self.data_dir.glob("broker-*/broker.log"))

    def _cluster_file(self) -> dict[str, Any]:
        described: dict[str, Any] = orjson.loads((self.data_dir / "cluster.json").read_bytes())
        return described

    @property
    def http_bootstrap_servers(self) -> str:
        """The brokers' HTTP listeners, ``host:port,...``: where actorlog's own clients connect."""
        servers: str = self._cluster_file()["bootstrap_servers"]
        return servers

    def broker_pids(self) -> dict[int, int]:
        """Broker id -> pid, from cluster.json (a broker that is not running has no pid there)."""
        return {
            int(broker["broker_id"]): int(broker["pid"])
            for broker in self._cluster_file()["brokers"]
            if broker.get("pid") is not None
        }

    @property
    def zookeeper_pid(self) -> int | None:
        """The command's own ZooKeeper (None with ``--zookeeper`` or when it is not running)."""
        if self._process is None:
            return None
        for pid in children_of(self._process.pid):
            try:
                command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if _ZOOKEEPER_MAIN in command_line:
                return pid
        return None

    def __enter__(self) -> ActorlogClusterUp:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable, "-m", "ops", "cluster", "up",
            "--brokers", str(self.brokers), "--base-port", "0", "--data-dir", str(self.data_dir),
        ]  # fmt: skip
        log = self.log_path.open("a", encoding="utf-8")
        self._process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,  # its brokers and ZooKeeper are its children: one group to end
        )
        assert self._process.stdout is not None
        self._reader = threading.Thread(
            target=self._copy_output, args=(self._process.stdout, log), name="cluster-up-output", daemon=True
        )
        self._reader.start()
        # The banner, or the end of the output (the command exited): whichever comes first.
        woken = self._banner.wait(self._start_timeout_s)
        if not self._banner_seen:
            reason = (
                f"exited with status {self._process.wait()}"
                if woken
                else f"printed no banner within {self._start_timeout_s} s"
            )
            raise ActorlogStartError(
                f"actorlog cluster up {reason}; the end of {self.log_path}:\n{self._tail()}"
            )

    def _copy_output(self, stdout: IO[str], log: IO[str]) -> None:
        with stdout, log:
            for line in stdout:
                log.write(line)
                log.flush()
                if BANNER in line:
                    self._banner_seen = True
                    self._banner.set()
            # The output ended: the command exited. Wake the starter if it is still waiting.
            self._banner.set()

    def _tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:])
        except OSError:
            return ""

    def stop(self) -> None:
        process = self._process
        self._process = None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self._reader is not None:
            self._reader.join(_STOP_GRACE_S)
            self._reader = None


def children_of(pid: int) -> list[int]:
    """The pids whose parent is ``pid``, from each process's ``/proc/<pid>/stat`` (its 4th field)."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it exited meanwhile
        # The command name (2nd field, in parentheses) may hold spaces: split after its last ")".
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            children.append(int(entry.name))
    return sorted(children)
