"""Metric snapshot files: rows from a scrape or a registry, the atomic writer, the reader, the exporter.

What it owns:

* turning a Prometheus exposition (``rows_from_exposition``) or a broker's own
  ``CollectorRegistry`` (``rows_from_registry``) into snapshot rows, one per exposed sample, in the
  schema of ``ops/rollup/schema.py``;
* writing one scrape of one broker as one Parquet file (``write_snapshot``) at
  ``DIR/date=YYYY-MM-DD/hour=HH/<broker>-<epoch_ms>.parquet``, atomically;
* listing and reading the complete files back without Spark (``snapshot_files``, ``read_snapshots``);
* ``actorlog snapshots export``: every ``--interval``, ask the cluster for its live brokers
  (``GET /v1/cluster``), scrape each broker's ``/metrics`` concurrently and write one file per broker.
  Each broker is reached with the scheme its membership entry's ``security_protocol`` says (SSL:
  ``https://``, verified with the client's ``ssl.truststore.location``, docs/tls.md).

Rules kept here:

* Never import pyspark: brokers import this module to write their own snapshots
  (``metrics.snapshot.dir``), and a broker must not start a JVM. pyarrow is enough.
* A file appears under its final name only when complete: it is written as ``<name>.tmp`` in the same
  directory, flushed and fsynced, renamed, and then the directory is fsynced so the rename itself
  survives a crash. Readers only consider names ending in ``.parquet``, so a crash mid-write leaves
  at worst a ``.tmp`` that every reader skips.
* ``_created`` samples are dropped: they are the creation time of a series, not a measurement, and
  would double the series count (docs/operations.md §2).
* The exporter follows membership: each round asks the bootstrap servers (then every broker it has
  seen) for the live brokers. A broker whose scrape fails is logged and skipped for that round; a
  membership lookup that fails on the first round is fatal (the cluster is unreachable), later it
  falls back to the last membership seen.
* A scheme the cluster does not speak is named, not left as a bare disconnect: ``http://`` to an
  HTTPS listener is checked with a TLS handshake and reported as "serves HTTPS: set
  security.protocol=SSL...", ``https://`` to an HTTP listener and a certificate that does not verify
  each say which key to set.
* Rounds are paced by deadlines on the event loop's clock (``loop.time()``), waiting on the stop
  event with a timeout, never by sleeping; scrape timestamps are wall-clock UTC, truncated to ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from ops.clients.connection import ClientCredential
from ops.rollup.schema import (
    SNAPSHOT_ARROW_SCHEMA,
    SNAPSHOT_GLOB,
    SNAPSHOT_SUFFIX,
    STATE_CHANGE_ARROW_SCHEMA,
    STATE_CHANGE_COLUMNS,
    STATE_CHANGES_GLOB,
    STATE_CHANGES_SUFFIX,
    TMP_SUFFIX,
)
from ops.tls import SECURITY_PROTOCOL, SSL_TRUSTSTORE_LOCATION

__all__ = [
    "BrokerEndpoint",
    "ClusterMembership",
    "ExportOptions",
    "MembershipError",
    "RoundResult",
    "SnapshotExporter",
    "SnapshotRow",
    "fetch_membership",
    "parse_bootstrap_servers",
    "parse_duration_ms",
    "parse_membership",
    "read_snapshots",
    "read_state_changes",
    "rows_from_exposition",
    "rows_from_registry",
    "rows_to_table",
    "run_export",
    "snapshot_files",
    "snapshot_path",
    "state_change_files",
    "state_changes_path",
    "state_changes_to_table",
    "write_registry_snapshot",
    "write_snapshot",
    "write_state_changes",
]

log = logging.getLogger(__name__)

# Family types as the snapshot schema names them. OpenMetrics-only types are folded onto the five
# the schema allows: info and stateset samples are gauges (constant 1 / 0-or-1 values), a gauge
# histogram's buckets can go down so they must not be treated as counters, and "unknown" is the
# OpenMetrics spelling of "untyped".
_TYPE_NAMES: dict[str, str] = {
    "counter": "counter",
    "gauge": "gauge",
    "histogram": "histogram",
    "summary": "summary",
    "untyped": "untyped",
    "unknown": "untyped",
    "info": "gauge",
    "stateset": "gauge",
    "gaugehistogram": "gauge",
}
# Families whose samples include a ``<family>_created`` series.
_FAMILIES_WITH_CREATED = frozenset({"counter", "histogram", "summary", "gaugehistogram"})


# --- rows ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    """One exposed sample of one scrape (see ``ops/rollup/schema.py`` for the columns)."""

    ts_ms: int
    broker: str
    metric: str
    labels: Mapping[str, str]
    value: float
    type: str


def _rows_from_families(families: Iterable[Metric], broker: str, ts_ms: int) -> list[SnapshotRow]:
    families = list(families)
    # In the text format a counter's creation time arrives as a separate gauge family named
    # ``<family>_created``; from a registry it is a sample of the family itself. Either way the
    # sample is named ``<family>_created`` after a counter/histogram/summary family.
    created = {f"{family.name}_created" for family in families if family.type in _FAMILIES_WITH_CREATED}
    rows: list[SnapshotRow] = []
    for family in families:
        family_type = _TYPE_NAMES.get(family.type, "untyped")
        for sample in family.samples:
            if sample.name in created:
                continue
            rows.append(
                SnapshotRow(
                    ts_ms=ts_ms,
                    broker=broker,
                    metric=sample.name,
                    labels=dict(sample.labels),
                    value=float(sample.value),
                    type=family_type,
                )
            )
    return rows


def rows_from_exposition(text: str, broker: str, ts_ms: int) -> list[SnapshotRow]:
    """Rows for every sample of a Prometheus text-format exposition (``_created`` samples dropped).

    Raises ``ValueError`` when the text is not valid exposition format.
    """
    return _rows_from_families(text_string_to_metric_families(text), broker, ts_ms)


def rows_from_registry(registry: CollectorRegistry, broker: str, ts_ms: int) -> list[SnapshotRow]:
    """Rows for every sample a registry would expose now: how a broker snapshots itself."""
    return _rows_from_families(registry.collect(), broker, ts_ms)


def rows_to_table(rows: Sequence[SnapshotRow]) -> pa.Table:
    """The rows as a table in the snapshot schema, sorted by metric then labels.

    Sorting keeps each metric's rows together, which compresses well and lets Parquet's
    statistics skip pages when a reader filters on ``metric``.
    """
    ordered = sorted(rows, key=lambda row: (row.metric, sorted(row.labels.items())))
    columns = [
        pa.array([row.ts_ms for row in ordered], type=pa.int64()).cast(
            SNAPSHOT_ARROW_SCHEMA.field("ts").type
        ),
        pa.array([row.broker for row in ordered], type=pa.string()),
        pa.array([row.metric for row in ordered], type=pa.string()),
        pa.array(
            [list(row.labels.items()) for row in ordered], type=SNAPSHOT_ARROW_SCHEMA.field("labels").type
        ),
        pa.array([row.value for row in ordered], type=pa.float64()),
        pa.array([row.type for row in ordered], type=pa.string()),
    ]
    return pa.Table.from_arrays(columns, schema=SNAPSHOT_ARROW_SCHEMA)


# --- files --------------------------------------------------------------------------------------


def snapshot_path(out_dir: Path, broker: str, ts_ms: int) -> Path:
    """``out_dir/date=YYYY-MM-DD/hour=HH/<broker>-<epoch_ms>.parquet`` (UTC partitions)."""
    if not broker or "/" in broker or broker.startswith("."):
        raise ValueError(f"broker id {broker!r} cannot be used in a file name")
    instant = datetime.fromtimestamp(ts_ms / 1000, tz=UTC)
    return out_dir / f"date={instant:%Y-%m-%d}" / f"hour={instant:%H}" / f"{broker}-{ts_ms}{SNAPSHOT_SUFFIX}"


def _fsync_directory(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _make_directories_durable(directory: Path) -> None:
    """Create ``directory`` and its missing parents, fsyncing each parent that gained an entry."""
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another writer may create it concurrently
            path.mkdir()
        _fsync_directory(path.parent)


def write_table_atomically(table: pa.Table, path: Path) -> Path:
    """Write ``table`` as Parquet at ``path`` so that ``path`` is either absent or complete."""
    _make_directories_durable(path.parent)
    temporary = path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(temporary, "wb") as sink:
            pq.write_table(table, sink, compression="zstd")
            sink.flush()
            os.fsync(sink.fileno())
        os.replace(temporary, path)
    except BaseException:
        # Best effort: a process killed before this line leaves the .tmp, which readers ignore.
        temporary.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)
    return path


def write_snapshot(rows: Sequence[SnapshotRow], out_dir: Path) -> Path:
    """Write one broker's scrape as one Parquet file, atomically; returns the file's path.

    All rows must share one broker and one timestamp (they name the file).
    """
    if not rows:
        raise ValueError("a snapshot needs at least one row")
    keys = {(row.broker, row.ts_ms) for row in rows}
    if len(keys) != 1:
        raise ValueError(f"a snapshot file holds one broker's scrape at one time, got {sorted(keys)[:3]}...")
    ((broker, ts_ms),) = keys
    return write_table_atomically(rows_to_table(rows), snapshot_path(out_dir, broker, ts_ms))


def write_registry_snapshot(registry: CollectorRegistry, broker: str, out_dir: Path, ts_ms: int) -> Path:
    """A broker's own snapshot (``metrics.snapshot.dir``): collect the registry and write it.

    Blocking (it fsyncs): call it from a worker thread, e.g. ``asyncio.to_thread``.
    """
    return write_snapshot(rows_from_registry(registry, broker, ts_ms), out_dir)


def snapshot_files(directory: Path) -> list[Path]:
    """The complete snapshot files under ``directory``, sorted; ``*.tmp`` leftovers and
    state-change files are skipped."""
    if not directory.is_dir():
        return []
    return sorted(path for path in directory.rglob(SNAPSHOT_GLOB) if path.is_file())


# --- state-change files --------------------------------------------------------------------------


def state_changes_path(out_dir: Path, broker: str, ts_ms: int) -> Path:
    """``out_dir/date=YYYY-MM-DD/hour=HH/<broker>-<epoch_ms>.state-changes.parquet``."""
    snapshot = snapshot_path(out_dir, broker, ts_ms)
    return snapshot.with_name(f"{broker}-{ts_ms}{STATE_CHANGES_SUFFIX}")


def state_changes_to_table(events: Sequence[Mapping[str, Any]]) -> pa.Table:
    """State-change events (the ``GET /v1/state-changes`` documents: ``ts`` in epoch ms, the other
    keys named as the columns, absent keys null) as a table in ``STATE_CHANGE_ARROW_SCHEMA``."""
    columns: dict[str, list[Any]] = {name: [] for name in STATE_CHANGE_COLUMNS}
    for event in events:
        for name in STATE_CHANGE_COLUMNS:
            value = event.get(name)
            if name == "ts":
                value = datetime.fromtimestamp(int(event["ts"]) / 1000, tz=UTC)
            elif name == "broker":
                value = str(value)
            columns[name].append(value)
    return pa.table(columns, schema=STATE_CHANGE_ARROW_SCHEMA)


def write_state_changes(events: Sequence[Mapping[str, Any]], out_dir: Path, broker: str, ts_ms: int) -> Path:
    """Write one collection round's events of one broker as one Parquet file, atomically."""
    if not events:
        raise ValueError("a state-change file needs at least one event")
    return write_table_atomically(state_changes_to_table(events), state_changes_path(out_dir, broker, ts_ms))


def state_change_files(directory: Path) -> list[Path]:
    """The complete state-change files under ``directory``, sorted."""
    if not directory.is_dir():
        return []
    return sorted(path for path in directory.rglob(STATE_CHANGES_GLOB) if path.is_file())


def read_state_changes(directory: Path) -> pa.Table:
    """Every complete state-change file under ``directory`` as one table (tests, small tools)."""
    tables = [pq.read_table(path, schema=STATE_CHANGE_ARROW_SCHEMA) for path in state_change_files(directory)]
    if not tables:
        return STATE_CHANGE_ARROW_SCHEMA.empty_table()
    return pa.concat_tables(tables)


def read_snapshots(directory: Path) -> pa.Table:
    """Every complete snapshot file under ``directory`` as one table in the snapshot schema.

    For tests and small tools; the rollup reads the same files with Spark.
    """
    tables = [pq.read_table(path, schema=SNAPSHOT_ARROW_SCHEMA) for path in snapshot_files(directory)]
    if not tables:
        return SNAPSHOT_ARROW_SCHEMA.empty_table()
    return pa.concat_tables(tables)


# --- parsing command-line values --------------------------------------------------------------

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def parse_duration_ms(text: str) -> int:
    """``"250ms"``, ``"10s"``, ``"1.5m"``, ``"1h"`` -> milliseconds (> 0). Raises ``ValueError``."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"invalid duration {text!r}: expected a number and a unit (ms, s, m or h), e.g. 10s")
    milliseconds = float(match.group(1)) * _UNIT_MS[match.group(2)]
    if milliseconds < 1 or milliseconds != math.floor(milliseconds):
        raise ValueError(f"invalid duration {text!r}: must be a positive whole number of milliseconds")
    return int(milliseconds)


_TLS_HINT = (
    f"set {SECURITY_PROTOCOL}=SSL (or SASL_SSL) and {SSL_TRUSTSTORE_LOCATION} in the client properties"
)


def parse_bootstrap_servers(text: str, *, tls: bool | None = None) -> list[str]:
    """``[scheme://]host:port[,...]`` -> base URLs, in order. Raises ``ValueError``.

    A bare ``host:port`` is ``https://`` when ``tls`` (the client's ``security.protocol`` is SSL
    or SASL_SSL), else ``http://``. A scheme given must agree with ``tls`` when it is known: an
    ``https://`` server with a plain-text protocol (or the reverse) is a mistake to name, not a
    connection to try."""
    servers: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        scheme, _, address = item.rpartition("://")
        if scheme not in ("", "http", "https"):
            raise ValueError(f"invalid bootstrap server {item!r}: expected host:port, http:// or https://")
        host, separator, port = address.rstrip("/").rpartition(":")
        if not separator or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"invalid bootstrap server {item!r}: expected host:port")
        if scheme == "https" and tls is False:
            raise ValueError(
                f"bootstrap server {item!r} is https://, but {SECURITY_PROTOCOL} is PLAINTEXT or "
                f"SASL_PLAINTEXT (or unset): {_TLS_HINT}"
            )
        if scheme == "http" and tls:
            raise ValueError(
                f"bootstrap server {item!r} is http://, but {SECURITY_PROTOCOL} is SSL or SASL_SSL: "
                "give host:port (or https://), or set it to PLAINTEXT or SASL_PLAINTEXT"
            )
        servers.append(f"{scheme or ('https' if tls else 'http')}://{host}:{int(port)}")
    if not servers:
        raise ValueError("no bootstrap server given: expected host:port[,host:port...]")
    return servers


# --- membership -----------------------------------------------------------------------------


class MembershipError(RuntimeError):
    """No server answered ``GET /v1/cluster`` with a valid membership document."""


_TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    # The broker listener's, from /v1/cluster (absent from older brokers: PLAINTEXT).
    security_protocol: str = "PLAINTEXT"

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self.security_protocol in _TLS_PROTOCOLS else "http"
        return f"{scheme}://{host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"{self.base_url}/metrics"


@dataclass(frozen=True, slots=True)
class ClusterMembership:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerEndpoint, ...]


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(f"invalid /v1/cluster document: {message}")


def parse_membership(document: Any) -> ClusterMembership:
    """Validate a ``/v1/cluster`` JSON document. Raises ``ValueError`` naming what is wrong."""
    _expect(isinstance(document, dict), "not a JSON object")
    cluster_id = document.get("cluster_id")
    controller_id = document.get("controller_id")
    brokers = document.get("brokers")
    _expect(cluster_id is None or isinstance(cluster_id, str), "cluster_id must be a string or null")
    _expect(
        isinstance(controller_id, int) and not isinstance(controller_id, bool), "controller_id must be int"
    )
    _expect(isinstance(brokers, list), "brokers must be a list")
    endpoints: list[BrokerEndpoint] = []
    for broker in brokers:
        _expect(isinstance(broker, dict), "each broker must be an object")
        broker_id, host, port, rack = (broker.get(key) for key in ("broker_id", "host", "port", "rack"))
        protocol = broker.get("security_protocol", "PLAINTEXT")
        _expect(isinstance(broker_id, int) and not isinstance(broker_id, bool), "broker_id must be an int")
        _expect(isinstance(host, str) and bool(host), "host must be a non-empty string")
        _expect(isinstance(port, int) and 0 < port < 65536, "port must be an int in 1..65535")
        _expect(rack is None or isinstance(rack, str), "rack must be a string or null")
        _expect(isinstance(protocol, str) and bool(protocol), "security_protocol must be a string")
        endpoints.append(
            BrokerEndpoint(broker_id=broker_id, host=host, port=port, rack=rack, security_protocol=protocol)
        )
    return ClusterMembership(
        cluster_id=cluster_id,
        controller_id=controller_id,
        brokers=tuple(sorted(endpoints, key=lambda endpoint: endpoint.broker_id)),
    )


def _describe(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, aiohttp.ClientResponseError):
        return f"HTTP {error.status}"
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        reason = getattr(error.certificate_error, "verify_message", None) or "certificate verify failed"
        return (
            f"SSL handshake failed: the broker's certificate did not verify ({reason}): "
            f"set {SSL_TRUSTSTORE_LOCATION} to the PEM of the CA that signed it"
        )
    if isinstance(error, aiohttp.ClientConnectorSSLError) and (
        getattr(error.os_error, "reason", None) == "WRONG_VERSION_NUMBER"
    ):
        return (
            f"it does not speak TLS (an HTTP listener): set {SECURITY_PROTOCOL}=PLAINTEXT or SASL_PLAINTEXT"
        )
    return str(error) or type(error).__name__


def _dropped_by_the_server(error: BaseException) -> bool:
    """The connection was made and then closed without an answer: what an HTTPS listener does
    to a plain HTTP request (a connect that failed is another story)."""
    return isinstance(error, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError) and not isinstance(
        error, aiohttp.ClientConnectorError
    )


async def _serves_tls(url: str, timeout_s: float) -> bool:
    """Whether the server at ``url`` completes a TLS handshake. The context verifies nothing on
    purpose: it only tells an HTTPS listener from a broken one; no request is sent over it."""
    address = urlsplit(url)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(address.hostname, address.port, ssl=context)
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
    except (OSError, TimeoutError, ssl.SSLError):
        return False
    return True


async def fetch_membership(
    session: aiohttp.ClientSession, servers: Sequence[str], timeout_s: float = 5.0
) -> ClusterMembership:
    """Ask each server in order for ``GET {server}/v1/cluster``; the first valid answer wins."""
    failures: list[str] = []
    for server in servers:
        try:
            async with session.get(
                f"{server}/v1/cluster", timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as response:
                response.raise_for_status()
                body = await response.read()
            return parse_membership(orjson.loads(body))
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            reason = _describe(error)
            plain = server.startswith("http://") and _dropped_by_the_server(error)
            if plain and await _serves_tls(server, timeout_s):
                reason = f"it serves HTTPS: {_TLS_HINT}"
            failures.append(f"{server}: {reason}")
    raise MembershipError("no server answered GET /v1/cluster (" + "; ".join(failures) + ")")


# --- the exporter -----------------------------------------------------------------------------

# Pages of GET /v1/state-changes (10,000 events each) one round collects per broker at most; the
# rest waits for the next round.
_STATE_CHANGE_PAGES_PER_ROUND = 10


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What one export round did."""

    number: int
    ts_ms: int
    brokers: tuple[int, ...]
    files: tuple[Path, ...]
    samples: int
    failures: Mapping[int, str] = field(default_factory=dict)
    membership_note: str | None = None
    state_changes: int = 0
    # Events the brokers' rings dropped before this exporter collected them (lost).
    state_changes_dropped: int = 0

    def line(self) -> str:
        instant = datetime.fromtimestamp(self.ts_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
        text = (
            f"round {self.number} at {instant.replace('+00:00', 'Z')}: {len(self.brokers)} brokers, "
            f"{len(self.files)} files, {self.samples} samples, {self.state_changes} state changes"
        )
        if self.state_changes_dropped:
            text += f" ({self.state_changes_dropped} dropped before collection)"
        if self.failures:
            text += "; skipped " + ", ".join(
                f"broker {b} ({why})" for b, why in sorted(self.failures.items())
            )
        if self.membership_note:
            text += f"; {self.membership_note}"
        return text


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SnapshotExporter:
    """One round at a time: membership, concurrent scrapes, one file per broker.

    ``now`` and ``write`` are parameters so tests can pin timestamps; production uses the wall clock
    and ``write_snapshot`` (run in a worker thread, since it fsyncs).
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        bootstrap: Sequence[str],
        out_dir: Path,
        *,
        scrape_timeout_s: float = 5.0,
        now: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._session = session
        self._bootstrap = list(bootstrap)
        self._out_dir = out_dir
        self._timeout_s = scrape_timeout_s
        self._now = now
        self._membership: ClusterMembership | None = None
        self._rounds = 0
        # Per broker: the (incarnation, last sequence) of the state changes collected so far.
        self._cursors: dict[int, tuple[int, int]] = {}
        self._state_changes_refused: set[int] = set()

    @property
    def membership(self) -> ClusterMembership | None:
        return self._membership

    async def _refresh_membership(self) -> str | None:
        """Refresh membership; returns a note when the last known one had to be reused."""
        # Brokers seen before also serve /v1/cluster: asking them keeps the exporter following the
        # cluster when every bootstrap server has left it.
        known = [endpoint.base_url for endpoint in self._membership.brokers] if self._membership else []
        servers = list(dict.fromkeys(self._bootstrap + known))
        try:
            self._membership = await fetch_membership(self._session, servers, self._timeout_s)
        except MembershipError as error:
            if self._membership is None:
                raise
            log.warning("membership lookup failed, reusing the last one: %s", error)
            return "membership lookup failed, reused the last one"
        return None

    async def _scrape(self, endpoint: BrokerEndpoint, ts_ms: int) -> list[SnapshotRow]:
        async with self._session.get(
            endpoint.metrics_url,
            headers={"Accept": "text/plain;version=0.0.4"},
            timeout=aiohttp.ClientTimeout(total=self._timeout_s),
        ) as response:
            response.raise_for_status()
            text = await response.text()
        return rows_from_exposition(text, str(endpoint.broker_id), ts_ms)

    async def _scrape_and_write(
        self, endpoint: BrokerEndpoint, ts_ms: int, failures: dict[int, str]
    ) -> tuple[Path, int] | None:
        try:
            rows = await self._scrape(endpoint, ts_ms)
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            reason = _describe(error)
            log.warning(
                "scrape of broker %d at %s failed: %s", endpoint.broker_id, endpoint.metrics_url, reason
            )
            failures[endpoint.broker_id] = reason
            return None
        if not rows:
            failures[endpoint.broker_id] = "no samples"
            return None
        path = await asyncio.to_thread(write_snapshot, rows, self._out_dir)
        return path, len(rows)

    async def _collect_state_changes(
        self, endpoint: BrokerEndpoint, ts_ms: int
    ) -> tuple[Path | None, int, int]:
        """The broker's state-change events since the last round, written as one file; returns
        (the file, events, events dropped before collection). A failure is logged and retried
        next round from the same cursor, so nothing is collected twice or skipped."""
        incarnation, since = self._cursors.get(endpoint.broker_id, (0, 0))
        events: list[dict[str, Any]] = []
        dropped = 0
        try:
            for _ in range(_STATE_CHANGE_PAGES_PER_ROUND):
                async with self._session.get(
                    f"{endpoint.base_url}/v1/state-changes",
                    params={"since": str(since), "incarnation": str(incarnation)},
                    timeout=aiohttp.ClientTimeout(total=self._timeout_s),
                ) as response:
                    if response.status in (401, 403, 404):
                        if endpoint.broker_id not in self._state_changes_refused:
                            self._state_changes_refused.add(endpoint.broker_id)
                            log.warning(
                                "broker %d refused GET /v1/state-changes (HTTP %d): no ISR history "
                                "from it (does the exporter have the cluster's secret?)",
                                endpoint.broker_id, response.status,
                            )  # fmt: skip
                        return None, 0, 0
                    response.raise_for_status()
                    page = orjson.loads(await response.read())
                page_events = page["events"]
                dropped += int(page["dropped"])
                events.extend(page_events)
                incarnation, since = int(page["incarnation"]), int(page["last_sequence"])
                if not page_events:
                    break
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as error:
            log.warning("state changes of broker %d not collected: %s", endpoint.broker_id, _describe(error))
            return None, 0, 0
        if dropped:
            log.warning(
                "broker %d dropped %d state-change events before they were collected",
                endpoint.broker_id,
                dropped,
            )
        path = None
        if events:
            path = await asyncio.to_thread(
                write_state_changes, events, self._out_dir, str(endpoint.broker_id), ts_ms
            )
        # Moved on only once written: a failed write collects the same events next round.
        self._cursors[endpoint.broker_id] = (incarnation, since)
        return path, len(events), dropped

    async def export_round(self) -> RoundResult:
        """Run one round. Raises ``MembershipError`` if no membership has ever been obtained."""
        now = self._now().astimezone(UTC)
        ts_ms = int(now.timestamp() * 1000)
        note = await self._refresh_membership()
        assert self._membership is not None
        brokers = self._membership.brokers
        failures: dict[int, str] = {}
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(self._scrape_and_write(b, ts_ms, failures)) for b in brokers]
            histories = [group.create_task(self._collect_state_changes(b, ts_ms)) for b in brokers]
        written = [result for task in tasks if (result := task.result()) is not None]
        collected = [task.result() for task in histories]
        self._rounds += 1
        return RoundResult(
            number=self._rounds,
            ts_ms=ts_ms,
            brokers=tuple(endpoint.broker_id for endpoint in brokers),
            files=tuple(path for path, _ in written)
            + tuple(path for path, _, _ in collected if path is not None),
            samples=sum(count for _, count in written),
            failures=failures,
            membership_note=note,
            state_changes=sum(count for _, count, _ in collected),
            state_changes_dropped=sum(lost for _, _, lost in collected),
        )


@dataclass(frozen=True, slots=True)
class ExportOptions:
    bootstrap: tuple[str, ...]
    out_dir: Path
    interval_ms: int
    duration_ms: int | None = None
    rounds: int | None = None
    scrape_timeout_s: float = 5.0
    # A client user's credential (or the broker identity's secret): /v1/cluster needs one.
    secret: str | ClientCredential | None = field(default=None, repr=False)
    # Verifies brokers reached at https:// (ops/tls.py's client_context); None: the system's CAs.
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)


async def run_export(
    options: ExportOptions, stop: asyncio.Event, on_round: Callable[[RoundResult], None]
) -> int:
    """Export until ``stop`` is set, ``options.rounds`` are done or ``options.duration_ms`` has passed.

    Rounds start on a fixed grid (start + k x interval on the loop's clock); a round that overruns
    skips the grid points it missed rather than bunching rounds up. Returns the number of rounds.
    """
    loop = asyncio.get_running_loop()
    interval_s = options.interval_ms / 1000
    connector = aiohttp.TCPConnector(limit=64, limit_per_host=2, ssl=options.ssl_context or True)
    headers = {"Authorization": ClientCredential.of(options.secret).authorization} if options.secret else None
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
        exporter = SnapshotExporter(
            session, options.bootstrap, options.out_dir, scrape_timeout_s=options.scrape_timeout_s
        )
        start = loop.time()
        end = None if options.duration_ms is None else start + options.duration_ms / 1000
        next_round = start
        rounds = 0
        while not stop.is_set():
            on_round(await exporter.export_round())
            rounds += 1
            if options.rounds is not None and rounds >= options.rounds:
                break
            next_round += interval_s
            if loop.time() > next_round:
                missed = math.ceil((loop.time() - next_round) / interval_s)
                next_round += missed * interval_s
            if end is not None and next_round >= end:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=max(0.0, next_round - loop.time()))
        return rounds
