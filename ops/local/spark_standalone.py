"""A Spark standalone cluster from the installed PySpark, and ``spark-submit`` against it.

For tests that run the rollup job the way a real cluster runs it: a master and N workers on
loopback, each a JVM started with ``<pyspark>/bin/spark-class``, the job's driver started by
``<pyspark>/bin/spark-submit --master spark://...`` in client mode, its executors started by the
workers. Nothing here is needed to run the rollup itself (``actorlog rollup`` uses local mode).

What it owns: finding Java and the Spark distribution PySpark ships (``SPARK_HOME`` is the
``pyspark`` package directory: ``bin/``, ``jars/``); the environment every Spark process gets; free
loopback ports; starting the daemons; knowing when every worker has registered; the master's and
the workers' JSON state; running a command in a process group of its own; and stopping everything.

Rules kept here:

* A missing ``java`` is a ``SparkNotInstalledError`` naming the fix.
* The machine's Spark settings never leak in: ``SPARK_CONF_DIR`` is an empty directory of the
  cluster's own (no ``spark-defaults.conf``, no ``spark-env.sh``), every process binds and
  advertises 127.0.0.1 (``SPARK_LOCAL_IP``), the master's REST submission server is off (it would
  take the fixed port 6066), and the daemons' heaps are small (``SPARK_DAEMON_MEMORY``). Python
  drivers and Python workers run ``python`` (the caller's interpreter by default).
* Every daemon and every command runs in a process group of its own (``start_new_session``). An
  executor is a child of its worker and a Python driver a child of ``spark-submit``, so stopping a
  group (SIGTERM, SIGKILL after a grace period) takes them too; ``stop`` returns once no live
  process of those groups is left, and ``live_group_members`` lets a test check that.
* Readiness is the master's own JSON (``/json/``) counting the ALIVE workers. Waiting for an
  external process is the one place a bounded retry loop is acceptable: each attempt is an HTTP
  call with its own timeout, the pause between attempts is spent waiting for the master process
  to exit (so a daemon that dies is noticed at once), never a sleep, and the deadline is read
  from a ``Clock`` (runtime/clock.py). Logs go to ``<base_dir>/logs/`` and a failure quotes them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from runtime.clock import Clock, LoopClock

__all__ = [
    "CommandResult",
    "GroupProcess",
    "SparkNotInstalledError",
    "SparkStartError",
    "StandaloneCluster",
    "find_java",
    "free_ports",
    "live_group_members",
    "spark_environment",
    "spark_home",
]

HOST = "127.0.0.1"
_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_PROBE_INTERVAL_S = 0.2  # each readiness attempt waits this long for the master to exit first
_LOG_TAIL_LINES = 25
# The daemons only route messages: the C1 JIT and the serial GC start them faster on few cores.
_DAEMON_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# Inherited settings that would make a child believe it runs under someone else's launcher.
_LAUNCHER_VARIABLES = ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "PYSPARK_SUBMIT_ARGS")


class SparkNotInstalledError(RuntimeError):
    """Java or PySpark's Spark distribution cannot be found. The message says how to get it."""


class SparkStartError(RuntimeError):
    """The cluster did not come up (a daemon exited, or the workers did not register in time)."""


def find_java(environ: Mapping[str, str] | None = None) -> Path:
    """``$JAVA_HOME/bin/java`` when JAVA_HOME is set, else ``java`` on the PATH."""
    env = os.environ if environ is None else environ
    java_home = env.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return Path(java_home) / "bin" / "java"
    found = shutil.which("java", path=env.get("PATH"))
    if found is None:
        raise SparkNotInstalledError(
            "`java` not found: install a Java runtime, 17 or 21 for Spark 4 "
            "(Debian: `apt-get install default-jre-headless`), or set JAVA_HOME"
        )
    return Path(found)


def spark_home() -> Path:
    """The Spark distribution inside the installed ``pyspark`` package."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SparkNotInstalledError("the `pyspark` package is not installed (pip install pyspark)")
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-submit").is_file():
        raise SparkNotInstalledError(f"no bin/spark-submit in the pyspark package at {home}")
    return home


def spark_environment(
    home: Path,
    conf_dir: Path,
    *,
    python: str = sys.executable,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of every Spark process here: this machine's, minus launcher variables,
    plus the distribution, an empty configuration directory, loopback and ``python``."""
    base = dict(os.environ if environ is None else environ)
    for name in _LAUNCHER_VARIABLES:
        base.pop(name, None)
    java = find_java(base)
    base.setdefault("JAVA_HOME", str(java.resolve().parent.parent))
    return {
        **base,
        "SPARK_HOME": str(home),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": HOST,
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
    }


def free_ports(count: int, host: str = HOST) -> list[int]:
    """``count`` distinct ports free right now (all probes are held open until all are chosen)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            probe = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            probe.bind((host, 0))
            ports.append(int(probe.getsockname()[1]))
        return ports


def live_group_members(pgids: Iterable[int]) -> list[tuple[int, int, str]]:
    """(pid, pgid, command line) of every process, zombies excepted, in one of the groups."""
    wanted = set(pgids)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
            state, _ppid, pgrp = stat[stat.rindex(")") + 2 :].split()[:3]
            if int(pgrp) not in wanted or state in ("Z", "X"):
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue  # gone meanwhile
        found.append((int(entry.name), int(pgrp), command.strip()))
    return found


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass(frozen=True, slots=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str


class GroupProcess:
    """A command in a process group of its own, its output in two files under ``log_dir``."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        log_dir: Path,
        name: str,
        *,
        cwd: Path | None = None,
    ) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.argv = list(argv)
        self.stdout_path = log_dir / f"{name}.out"
        self.stderr_path = log_dir / f"{name}.log"
        with self.stdout_path.open("wb") as stdout, self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                self.argv,
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
            )
        self.pgid = self.process.pid

    def poll(self) -> int | None:
        return self.process.poll()

    def wait(self, timeout_s: float) -> CommandResult:
        """Wait for the command to end; past ``timeout_s`` its group is stopped and this raises."""
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            raise TimeoutError(
                f"{self.name} did not finish within {timeout_s} s; stderr:\n{_tail(self.stderr_path)}"
            ) from None
        return CommandResult(
            returncode=self.process.returncode,
            stdout=self.stdout_path.read_text(errors="replace"),
            stderr=self.stderr_path.read_text(errors="replace"),
        )

    @property
    def group_is_ours(self) -> bool:
        """False once the number may name someone else's group: Linux reuses a pid only when no
        process has it as its group id, so a live process of that pid after our leader was reaped
        means our group is empty and the number was handed out again."""
        return self.process.returncode is None or not Path(f"/proc/{self.pgid}").exists()

    def signal_group(self, signum: int) -> None:
        if self.group_is_ours:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, signum)

    def stop(self, grace_s: float = 10.0) -> None:
        stop_groups([self], grace_s)

    def log_tail(self) -> str:
        return _tail(self.stderr_path)


def stop_groups(processes: Sequence[GroupProcess], grace_s: float = 10.0, clock: Clock | None = None) -> None:
    """SIGTERM every group, wait up to ``grace_s`` for all of it to go, then SIGKILL what is left."""
    clock = clock or LoopClock()
    pgids = [p.pgid for p in processes if p.group_is_ours]
    for process in processes:
        process.signal_group(signal.SIGTERM)
    if not _wait_for_groups(pgids, clock.now_ms() + int(grace_s * 1000), clock):
        for process in processes:
            process.signal_group(signal.SIGKILL)
        _wait_for_groups(pgids, clock.now_ms() + 5_000, clock)
    for process in processes:
        process.process.wait()  # reap the leaders (our children)


def _wait_for_groups(pgids: Sequence[int], deadline_ms: int, clock: Clock) -> bool:
    """Until no live process is left in the groups (True) or the deadline passes (False).

    Members other than the leaders (executors, Python workers) are not our children: each wait is
    on a pidfd, which becomes readable when that process exits."""
    while members := live_group_members(pgids):
        remaining_ms = deadline_ms - clock.now_ms()
        if remaining_ms <= 0:
            return False
        try:
            descriptor = os.pidfd_open(members[0][0])
        except ProcessLookupError:
            continue
        try:
            select.select([descriptor], [], [], remaining_ms / 1000)
        finally:
            os.close(descriptor)
    return True


class StandaloneCluster:
    """A master and ``workers`` workers on 127.0.0.1. ``with`` it, or call start/stop yourself.

    Each worker offers ``worker_cores`` cores and ``worker_memory`` to executors and has its own
    work directory (``<base_dir>/worker-<n>``: the executors' working directories and their logs).
    """

    def __init__(
        self,
        base_dir: Path,
        *,
        workers: int = 2,
        worker_cores: int = 1,
        worker_memory: str = "512m",
        daemon_memory: str = "256m",
        python: str = sys.executable,
        start_timeout_s: float = 60.0,
        stop_grace_s: float = 10.0,
        clock: Clock | None = None,
    ) -> None:
        if workers < 1 or worker_cores < 1:
            raise ValueError("a cluster needs at least one worker with at least one core")
        self.base_dir = base_dir
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.home = spark_home()
        self.log_dir = base_dir / "logs"
        self.conf_dir = base_dir / "conf"
        self._daemon_memory = daemon_memory
        self._python = python
        self._start_timeout_s = start_timeout_s
        self._stop_grace_s = stop_grace_s
        self._clock = clock or LoopClock()
        self.port, self.web_port, *self.worker_web_ports = free_ports(2 + workers)
        self._master: GroupProcess | None = None
        self._workers: list[GroupProcess] = []
        self._commands: list[GroupProcess] = []

    # ------------------------------------------------------------------------------ observing

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def master_web_url(self) -> str:
        return f"http://{HOST}:{self.web_port}"

    @property
    def process_groups(self) -> list[int]:
        """Every process group started here (daemons and commands) whose number is still ours."""
        return [p.pgid for p in self._daemons() + self._commands if p.group_is_ours]

    def environment(self) -> dict[str, str]:
        env = spark_environment(self.home, self.conf_dir, python=self._python)
        env["SPARK_DAEMON_MEMORY"] = self._daemon_memory
        env["SPARK_DAEMON_JAVA_OPTS"] = _DAEMON_JAVA_OPTIONS
        env["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false"
        return env

    def master_state(self) -> dict[str, Any]:
        """The master's JSON (``workers``, ``aliveworkers``, ``activeapps``, ``completedapps``...)."""
        return _get_json(f"{self.master_web_url}/json/")

    def worker_state(self, index: int) -> dict[str, Any]:
        """Worker ``index``'s JSON (``executors``, ``finishedexecutors``...); index from 0."""
        return _get_json(f"http://{HOST}:{self.worker_web_ports[index]}/json/")

    def alive_workers(self) -> int:
        try:
            return int(self.master_state().get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    # ------------------------------------------------------------------------------ running

    def start(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        env = self.environment()
        spark_class = str(self.home / "bin" / "spark-class")
        master = [
            spark_class, _MASTER_CLASS, "--host", HOST, "--port", str(self.port),
            "--webui-port", str(self.web_port),
        ]  # fmt: skip
        try:
            self._master = GroupProcess(master, env, self.log_dir, "master", cwd=self.base_dir)
            for index, web_port in enumerate(self.worker_web_ports):
                name = f"worker-{index + 1}"
                work_dir = self.base_dir / name
                work_dir.mkdir(parents=True, exist_ok=True)
                worker = [
                    spark_class, _WORKER_CLASS, "--host", HOST, "--cores", str(self.worker_cores),
                    "--memory", self.worker_memory, "--webui-port", str(web_port),
                    "--work-dir", str(work_dir), self.master_url,
                ]  # fmt: skip
                self._workers.append(GroupProcess(worker, env, self.log_dir, name, cwd=work_dir))
            self.wait_until(
                lambda: self.alive_workers() == self.workers,
                self._start_timeout_s,
                f"{self.workers} workers registered with the master",
            )
        except BaseException:
            self.stop()
            raise

    def wait_until(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Until ``condition()`` holds; SparkStartError if a daemon exits or the time runs out."""
        master = self._master
        if master is None:
            raise RuntimeError("the cluster is not started")
        deadline_ms = self._clock.now_ms() + int(timeout_s * 1000)
        while not condition():
            for daemon in self._daemons():
                if daemon.poll() is not None:
                    raise SparkStartError(
                        f"Spark {daemon.name} exited with status {daemon.poll()} while waiting for {what}; "
                        f"log {daemon.stderr_path}:\n{daemon.log_tail()}"
                    )
            if self._clock.now_ms() >= deadline_ms:
                logs = "\n".join(f"--- {d.name}:\n{d.log_tail()}" for d in self._daemons())
                raise SparkStartError(f"no {what} within {timeout_s} s\n{logs}")
            with contextlib.suppress(subprocess.TimeoutExpired):
                master.process.wait(_PROBE_INTERVAL_S)

    def submit_command(
        self,
        application: Path,
        arguments: Sequence[str],
        *,
        driver_memory: str = "512m",
        executor_memory: str = "512m",
        conf: Mapping[str, str] | None = None,
    ) -> list[str]:
        """``spark-submit`` of a Python file to this cluster in client mode, one executor per core."""
        settings = {
            "spark.executor.cores": "1",
            "spark.cores.max": str(self.workers * self.worker_cores),
            "spark.driver.host": HOST,
            "spark.driver.bindAddress": HOST,
            **(conf or {}),
        }
        return [
            str(self.home / "bin" / "spark-submit"),
            "--master", self.master_url,
            "--deploy-mode", "client",
            "--driver-memory", driver_memory,
            "--executor-memory", executor_memory,
            *(f"--conf={key}={value}" for key, value in settings.items()),
            str(application),
            *arguments,
        ]  # fmt: skip

    def start_command(self, argv: Sequence[str], name: str) -> GroupProcess:
        """Start a command (a spark-submit, a local run) with the cluster's environment; ``stop``
        stops it too if it is still running."""
        process = GroupProcess(argv, self.environment(), self.log_dir, name, cwd=self.base_dir)
        self._commands.append(process)
        return process

    def stop(self) -> None:
        processes = self._commands + self._daemons()
        if processes:
            stop_groups(processes, self._stop_grace_s, self._clock)

    def _daemons(self) -> list[GroupProcess]:
        return ([self._master] if self._master is not None else []) + self._workers

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _get_json(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as response:
            value = json.loads(response.read())
    except urllib.error.URLError as error:
        raise OSError(f"GET {url}: {error.reason}") from error
    if not isinstance(value, dict):
        raise ValueError(f"GET {url}: expected a JSON object")
    return value
