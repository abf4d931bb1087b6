"""A local Prometheus server from the installed package, for ``actorlog cluster up --prometheus``,
the demo and the dashboard tests.

What it owns: finding ``prometheus`` and ``promtool``; writing ``prometheus.yml`` and a file-based
service-discovery file (``targets.json``) into its own directory; starting the server as a child
process on a chosen or free loopback port; knowing when it is ready; the few HTTP API calls the
project needs (instant and range queries, label values, targets, rules); bounded waits for a
condition on what Prometheus has scraped; and stopping it (SIGTERM, then SIGKILL after a grace
period). The server's log goes to ``<data_dir>/prometheus.log``.

Rules kept here:

* A missing binary is a ``PrometheusNotInstalledError`` naming it and the fix
  (``apt-get install prometheus``).
* Targets are added and removed while the server runs: ``set_targets`` rewrites the file-SD JSON
  with write-then-rename, so Prometheus never reads half a file. Every target carries the labels
  the dashboards and alerts select on: ``cluster`` (one per LocalPrometheus) and, when given,
  ``broker`` (the broker id), next to Prometheus's own ``job`` and ``instance``.
* Readiness is event-driven: the server's log is read line by line (it must be drained anyway) and
  the server is ready when it logs that it serves web requests; ``/-/ready`` then confirms it.
  A server that exits first is reported with the tail of its log.
* ``wait_until`` is the one polling loop: Prometheus is an external system that cannot notify us
  when a scrape lands. Each attempt is an HTTP call; the pause between attempts is spent waiting
  for the server process to exit (so a crash is noticed at once), never a sleep, and the whole
  wait is bounded.
* HTTPS targets (``ca_file`` given: brokers with ``listeners=HTTPS://``) are scraped with
  ``scheme: https`` and ``tls_config.ca_file``, so Prometheus verifies each broker's certificate
  and host name as the brokers' clients do; every target of one server has the same scheme.
* Times come from Prometheus's own clock (``now()`` evaluates ``time()``), so callers never read
  ambient time to build a range query.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import aiohttp

__all__ = [
    "InstantSample",
    "LocalPrometheus",
    "PrometheusNotInstalledError",
    "PrometheusQueryError",
    "PrometheusStartError",
    "RangeSeries",
    "ScrapeTarget",
    "find_prometheus",
    "find_promtool",
]

T = TypeVar("T")

_PACKAGE_DIR = Path("/usr/bin")  # where the Debian package installs both binaries
_INSTALL_HINT = "install the `prometheus` package (Debian/Ubuntu: `apt-get install prometheus`)"
_READY_LOG_MESSAGE = "Server is ready to receive web requests."
_LOG_TAIL_LINES = 20


class PrometheusNotInstalledError(RuntimeError):
    """``prometheus`` or ``promtool`` cannot be found. The message says how to get it."""


class PrometheusStartError(RuntimeError):
    """The server did not come up (it exited, or was not ready before the deadline)."""


class PrometheusQueryError(RuntimeError):
    """Prometheus answered a query with an error (bad PromQL, timeout...)."""


def _find_binary(name: str, environ: Mapping[str, str] | None, package_dir: Path) -> Path:
    env = os.environ if environ is None else environ
    found = shutil.which(name, path=env.get("PATH"))
    if found is not None:
        return Path(found)
    # The package's location, for environments whose PATH leaves it out.
    packaged = package_dir / name
    if packaged.is_file() and os.access(packaged, os.X_OK):
        return packaged
    raise PrometheusNotInstalledError(f"`{name}` not found: {_INSTALL_HINT}")


def find_prometheus(environ: Mapping[str, str] | None = None, *, package_dir: Path = _PACKAGE_DIR) -> Path:
    """The ``prometheus`` server binary, or ``PrometheusNotInstalledError``."""
    return _find_binary("prometheus", environ, package_dir)


def find_promtool(environ: Mapping[str, str] | None = None, *, package_dir: Path = _PACKAGE_DIR) -> Path:
    """The ``promtool`` binary (same package), or ``PrometheusNotInstalledError``."""
    return _find_binary("promtool", environ, package_dir)


@dataclass(frozen=True, slots=True)
class ScrapeTarget:
    """One ``host:port`` serving ``/metrics``, with extra target labels (e.g. ``broker``)."""

    address: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InstantSample:
    labels: dict[str, str]
    timestamp: float
    value: float


@dataclass(frozen=True, slots=True)
class RangeSeries:
    labels: dict[str, str]
    values: list[tuple[float, float]]

    def finite_values(self) -> list[float]:
        return [value for _, value in self.values if math.isfinite(value)]


def _duration(seconds: float) -> str:
    """A Prometheus duration; milliseconds keep sub-second intervals exact."""
    return f"{round(seconds * 1000)}ms"


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


class LocalPrometheus:
    """One Prometheus server scraping ``/metrics`` of the targets given to ``set_targets``.

    ``async with LocalPrometheus(dir, scrape_interval_s=1, rule_files=[...]) as prometheus:``
    then ``prometheus.set_targets([...])``, ``await prometheus.query("...")``.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        scrape_interval_s: float = 5.0,
        evaluation_interval_s: float | None = None,
        rule_files: Sequence[str | os.PathLike[str]] = (),
        cluster: str = "local",
        job: str = "actorlog-brokers",
        retention: str = "15d",
        start_timeout_s: float = 30.0,
        stop_grace_s: float = 10.0,
        binary: Path | None = None,
        ca_file: str | os.PathLike[str] | None = None,
    ) -> None:
        if scrape_interval_s <= 0:
            raise ValueError("scrape_interval_s must be positive")
        self.data_dir = Path(data_dir)
        self.host = host
        self.scrape_interval_s = scrape_interval_s
        self.evaluation_interval_s = evaluation_interval_s or scrape_interval_s
        self.rule_files = tuple(Path(path).resolve() for path in rule_files)
        self.cluster = cluster
        self.job = job
        self._port = port
        self._retention = retention
        self._start_timeout_s = start_timeout_s
        self._stop_grace_s = stop_grace_s
        self._binary = binary
        self._process: asyncio.subprocess.Process | None = None
        self._log_pump: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._targets: list[ScrapeTarget] = []
        # The CA the targets' certificates chain to; given, they are scraped at https://.
        self.ca_file = None if ca_file is None else Path(ca_file).resolve()

    # ------------------------------------------------------------------------------ observing

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the port is chosen when the server starts")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "prometheus.yml"

    @property
    def targets_path(self) -> Path:
        return self.data_dir / "targets.json"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "prometheus.log"

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    # ------------------------------------------------------------------------------ targets

    def set_targets(self, targets: Iterable[str | ScrapeTarget]) -> None:
        """Replace the scraped targets (``host:port`` or ``ScrapeTarget``). Safe while running."""
        self._targets = [t if isinstance(t, ScrapeTarget) else ScrapeTarget(t) for t in targets]
        groups = [
            {"targets": [target.address], "labels": {"cluster": self.cluster, **target.labels}}
            for target in self._targets
        ]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Write-then-rename: Prometheus watches the file and must never see half of it. The
        # temporary name does not match the file_sd pattern, so it is never read itself.
        temporary = self.targets_path.with_name(self.targets_path.name + ".tmp")
        temporary.write_text(json.dumps(groups, indent=2) + "\n")
        os.replace(temporary, self.targets_path)

    # ------------------------------------------------------------------------------ lifecycle

    def _write_config(self) -> None:
        job: dict[str, Any] = {
            "job_name": self.job,
            "metrics_path": "/metrics",
            # Changes are picked up at once through file-system notifications; the refresh
            # interval is only the backstop.
            "file_sd_configs": [{"files": [str(self.targets_path)], "refresh_interval": "30s"}],
        }
        if self.ca_file is not None:
            job["scheme"] = "https"
            job["tls_config"] = {"ca_file": str(self.ca_file)}
        config = {
            "global": {
                "scrape_interval": _duration(self.scrape_interval_s),
                # The default timeout (10 s) would exceed short intervals, which Prometheus refuses.
                "scrape_timeout": _duration(self.scrape_interval_s),
                "evaluation_interval": _duration(self.evaluation_interval_s),
            },
            "rule_files": [str(path) for path in self.rule_files],
            "scrape_configs": [job],
        }
        # JSON is YAML: no YAML library needed at run time.
        self.config_path.write_text(json.dumps(config, indent=2) + "\n")

    async def start(self) -> None:
        if self.is_running:
            return
        binary = self._binary or find_prometheus()
        for path in self.rule_files:
            if not path.is_file():
                raise PrometheusStartError(f"rule file {path} does not exist")
        if self._port is None:
            self._port = _free_port(self.host)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.targets_path.exists():
            self.set_targets(self._targets)
        self._write_config()
        self._ready.clear()
        self._process = await asyncio.create_subprocess_exec(
            str(binary),
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.data_dir / 'data'}",
            f"--storage.tsdb.retention.time={self._retention}",
            f"--web.listen-address={self.host}:{self._port}",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            # A new session: Ctrl-C in the user's terminal reaches us, and we stop the server.
            start_new_session=True,
        )
        self._log_pump = asyncio.ensure_future(self._pump_log(self._process))
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        try:
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise

    async def _pump_log(self, process: asyncio.subprocess.Process) -> None:
        """Copy the server's log to ``prometheus.log`` (the pipe must be drained or the server
        blocks) and notice the line saying it serves requests."""
        assert process.stderr is not None
        with self.log_path.open("ab") as log:
            while line := await process.stderr.readline():
                log.write(line)
                log.flush()
                if _READY_LOG_MESSAGE.encode() in line:
                    self._ready.set()

    async def _wait_ready(self) -> None:
        process, pump = self._process, self._log_pump
        assert process is not None
        assert pump is not None
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            # The pump ends when the server closes its log, i.e. exits.
            done, _ = await asyncio.wait(
                {ready, pump}, timeout=self._start_timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ready.cancel()
        if ready not in done:
            if pump in done:
                returncode = await process.wait()
                raise self._start_error(f"exited with status {returncode}")
            raise self._start_error(f"was not ready within {self._start_timeout_s} s")
        status, body = await self._get_text("/-/ready")
        if status != 200:
            raise self._start_error(f"logged readiness but /-/ready answered {status}: {body.strip()}")

    def _start_error(self, reason: str) -> PrometheusStartError:
        tail = ""
        with contextlib.suppress(OSError):
            tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:])
        return PrometheusStartError(f"Prometheus on {self.url} {reason}; log {self.log_path}:\n{tail}")

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), self._stop_grace_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        pump, self._log_pump = self._log_pump, None
        if pump is not None:
            # The server has exited, so its log pipe is at end of file and the pump finishes.
            await pump
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def __aenter__(self) -> LocalPrometheus:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    # ------------------------------------------------------------------------------ HTTP API

    async def _get_text(self, path: str) -> tuple[int, str]:
        assert self._session is not None, "the server is not started"
        async with self._session.get(self.url + path) as response:
            return response.status, await response.text()

    async def _api(
        self, path: str, params: Mapping[str, str] | Sequence[tuple[str, str]] = (), *, method: str = "GET"
    ) -> Any:
        """One ``/api/v1`` call; its ``data``, or ``PrometheusQueryError``. Queries are POSTed (long
        PromQL does not fit in a URL); the other endpoints are GET-only in Prometheus 2.x."""
        assert self._session is not None, "the server is not started"
        url = self.url + "/api/v1/" + path
        if method == "POST":
            request = self._session.post(url, data=params)
        else:
            request = self._session.get(url, params=params)
        async with request as response:
            body = await response.json(content_type=None)
        if body.get("status") != "success":
            raise PrometheusQueryError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    async def query(self, expr: str, *, at: float | None = None) -> list[InstantSample]:
        """An instant query; a scalar result comes back as one sample without labels."""
        params = {"query": expr} if at is None else {"query": expr, "time": repr(at)}
        data = await self._api("query", params, method="POST")
        if data["resultType"] in ("scalar", "string"):
            timestamp, value = data["result"]
            return [InstantSample({}, float(timestamp), float(value))]
        return [
            InstantSample(item["metric"], float(item["value"][0]), float(item["value"][1]))
            for item in data["result"]
        ]

    async def query_range(self, expr: str, *, start: float, end: float, step_s: float) -> list[RangeSeries]:
        data = await self._api(
            "query_range",
            {"query": expr, "start": repr(start), "end": repr(end), "step": repr(step_s)},
            method="POST",
        )
        return [
            RangeSeries(item["metric"], [(float(t), float(v)) for t, v in item["values"]])
            for item in data["result"]
        ]

    async def label_values(
        self, label: str, *, match: str | None = None, start: float | None = None, end: float | None = None
    ) -> list[str]:
        """Values of ``label`` over series matching the selector ``match`` (Grafana's
        ``label_values(match, label)``)."""
        params: list[tuple[str, str]] = []
        if match is not None:
            params.append(("match[]", match))
        if start is not None:
            params.append(("start", repr(start)))
        if end is not None:
            params.append(("end", repr(end)))
        return [str(value) for value in await self._api(f"label/{label}/values", params)]

    async def now(self) -> float:
        """Prometheus's clock (the evaluation time of ``time()``)."""
        (sample,) = await self.query("time()")
        return sample.value

    async def active_targets(self) -> list[dict[str, Any]]:
        targets: list[dict[str, Any]] = (await self._api("targets", {"state": "active"}))["activeTargets"]
        return targets

    async def rule_groups(self) -> list[dict[str, Any]]:
        groups: list[dict[str, Any]] = (await self._api("rules", {}))["groups"]
        return groups

    # ------------------------------------------------------------------------------ waiting

    async def wait_until(
        self,
        probe: Callable[[], Awaitable[T | None]],
        *,
        timeout_s: float,
        what: str,
        first_pause_s: float = 0.1,
    ) -> T:
        """Call ``probe`` until it returns something other than None or False; return that.

        Between attempts the pause grows from ``first_pause_s`` to the scrape interval (nothing
        new can be scraped faster) and is spent waiting for the server to exit.
        """
        process = self._process
        assert process is not None, "the server is not started"
        pause = first_pause_s
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    result = await probe()
                    if result is not None and result is not False:
                        return result
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(process.wait(), pause)
                    if process.returncode is not None:
                        raise self._start_error(f"exited with status {process.returncode} while waiting")
                    pause = min(pause * 2, self.scrape_interval_s)
        except TimeoutError:
            raise TimeoutError(f"{what}: not within {timeout_s} s") from None

    async def wait_for_targets_up(self, count: int, *, timeout_s: float = 30.0) -> None:
        """Wait until ``count`` targets have been scraped successfully."""

        async def probe() -> bool:
            targets = await self.active_targets()
            return sum(1 for target in targets if target.get("health") == "up") >= count

        await self.wait_until(probe, timeout_s=timeout_s, what=f"{count} targets up")
