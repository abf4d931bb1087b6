"""The snapshot exporter against fake brokers: real aiohttp servers on loopback, real files.

Each fake broker serves ``/metrics`` (the text a test sets) and ``/v1/cluster`` (the membership the
test sets, shared by all of them, as every real broker can answer it). Rounds are driven one at a
time through ``SnapshotExporter.export_round`` with pinned timestamps, so nothing depends on timing;
``run_export`` and the command line are exercised with a short interval, waiting on their output,
never sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from actors.common.types import TopicPartition
from actors.server.state_changes import StateChange, StateChangeLog
from ops.cli.snapshots import main
from ops.clients.connection import SECRET_ENV
from ops.snapshots import (
    ExportOptions,
    MembershipError,
    RoundResult,
    SnapshotExporter,
    fetch_membership,
    read_snapshots,
    read_state_changes,
    run_export,
    snapshot_path,
    state_changes_path,
)

ROOT = Path(__file__).resolve().parents[2]
SECRET = "snapshot-export-test-secret-0123"
START = datetime(2026, 1, 1, 0, 0, tzinfo=UTC)


def _exposition(broker_id: int, shrinks: int) -> str:
    return (
        "# TYPE kafka_server_replicamanager_isrshrinks_total counter\n"
        f"kafka_server_replicamanager_isrshrinks_total {shrinks}\n"
        "# TYPE kafka_server_kafkaserver_brokerstate gauge\n"
        f'kafka_server_kafkaserver_brokerstate{{broker="{broker_id}"}} 3\n'
    )


@dataclass
class FakeCluster:
    """Fake brokers on loopback; ``members`` is what /v1/cluster lists."""

    members: set[int] = field(default_factory=set)
    ports: dict[int, int] = field(default_factory=dict)
    texts: dict[int, str] = field(default_factory=dict)
    failing: set[int] = field(default_factory=set)
    runners: dict[int, web.AppRunner] = field(default_factory=dict)
    # Each broker's state-change ring (the real one; a test replaces it to play a restart).
    rings: dict[int, StateChangeLog] = field(default_factory=dict)

    def document(self) -> dict[str, object]:
        return {
            "cluster_id": "fake",
            "controller_id": min(self.members, default=-1),
            "brokers": [
                {"broker_id": b, "host": "127.0.0.1", "port": self.ports[b], "rack": None}
                for b in sorted(self.members)
            ],
        }

    async def start_broker(self, broker_id: int) -> None:
        async def cluster(request: web.Request) -> web.Response:
            # Like a broker's JSON API: the membership needs the cluster's secret.
            if request.headers.get("Authorization") != f"Bearer {SECRET}":
                return web.json_response({"error": "SASL_AUTHENTICATION_FAILED"}, status=401)
            return web.json_response(self.document())

        async def metrics(_request: web.Request) -> web.Response:
            if broker_id in self.failing:
                return web.Response(status=503, text="not ready")
            return web.Response(
                text=self.texts[broker_id], headers={"Content-Type": "text/plain; version=0.0.4"}
            )

        async def state_changes(request: web.Request) -> web.Response:
            if request.headers.get("Authorization") != f"Bearer {SECRET}":
                return web.json_response({"error": "SASL_AUTHENTICATION_FAILED"}, status=401)
            ring = self.rings[broker_id]
            answer = ring.since(
                int(request.query["since"]),
                int(request.query["incarnation"]),
                int(request.query.get("limit", "3")),
            )
            return web.json_response(answer.document())

        app = web.Application()
        app.add_routes(
            [
                web.get("/v1/cluster", cluster),
                web.get("/metrics", metrics),
                web.get("/v1/state-changes", state_changes),
            ]
        )
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.ports[broker_id] = runner.addresses[0][1]
        self.runners[broker_id] = runner
        self.texts[broker_id] = _exposition(broker_id, 0)
        self.rings[broker_id] = StateChangeLog(broker_id, incarnation=1_000)
        self.members.add(broker_id)

    async def stop_broker(self, broker_id: int) -> None:
        await self.runners.pop(broker_id).cleanup()

    def bootstrap(self, broker_id: int) -> str:
        return f"http://127.0.0.1:{self.ports[broker_id]}"

    async def close(self) -> None:
        for runner in self.runners.values():
            await runner.cleanup()


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    fake = FakeCluster()
    try:
        yield fake
    finally:
        await fake.close()


@pytest_asyncio.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {SECRET}"}) as client:
        yield client


def _clock() -> Iterator[datetime]:
    instant = START
    while True:
        yield instant
        instant += timedelta(seconds=10)


def _exporter(session: aiohttp.ClientSession, bootstrap: list[str], out: Path) -> SnapshotExporter:
    times = _clock()
    return SnapshotExporter(session, bootstrap, out, scrape_timeout_s=5.0, now=lambda: next(times))


def _ms(instant: datetime) -> int:
    return int(instant.timestamp() * 1000)


@pytest.mark.asyncio
async def test_exporter_follows_membership_changes_between_rounds(
    cluster: FakeCluster, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    await cluster.start_broker(1)
    await cluster.start_broker(2)
    exporter = _exporter(session, [cluster.bootstrap(1)], tmp_path)

    first = await exporter.export_round()
    # Broker 3 joins, broker 2 leaves the membership (and is no longer scraped).
    await cluster.start_broker(3)
    cluster.members.discard(2)
    cluster.texts[1] = _exposition(1, 5)
    second = await exporter.export_round()

    assert (first.brokers, second.brokers) == ((1, 2), (1, 3))
    t1, t2 = _ms(START), _ms(START + timedelta(seconds=10))
    assert set(first.files) == {snapshot_path(tmp_path, "1", t1), snapshot_path(tmp_path, "2", t1)}
    assert set(second.files) == {snapshot_path(tmp_path, "1", t2), snapshot_path(tmp_path, "3", t2)}
    rows = read_snapshots(tmp_path).to_pylist()
    shrinks = {
        (r["broker"], int(r["ts"].timestamp() * 1000)): r["value"]
        for r in rows
        if r["metric"] == "kafka_server_replicamanager_isrshrinks_total"
    }
    assert shrinks == {("1", t1): 0.0, ("2", t1): 0.0, ("1", t2): 5.0, ("3", t2): 0.0}
    assert {r["type"] for r in rows if r["metric"] == "kafka_server_kafkaserver_brokerstate"} == {"gauge"}
    assert (first.samples, second.samples) == (4, 4)


def _shrink(ts_ms: int, zk_version: int) -> StateChange:
    return StateChange(
        ts_ms=ts_ms, kind="isr_shrink", tp=TopicPartition("orders", 0), leader=1, leader_epoch=0,
        zk_version=zk_version, isr=(1, 2), previous_isr=(1, 2, 3), replicas=(1, 2, 3), reason="lag",
    )  # fmt: skip


@pytest.mark.asyncio
async def test_state_changes_are_collected_once_each_across_pages_restarts_and_overflow(
    cluster: FakeCluster, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """Every event reaches exactly one file: the cursor moves per broker and incarnation, pages of
    the fake's 3-event limit are followed, a restarted broker is read from its start, and events
    the ring dropped before collection are counted."""
    await cluster.start_broker(1)
    exporter = _exporter(session, [cluster.bootstrap(1)], tmp_path)
    for version in range(1, 6):
        cluster.rings[1].record(_shrink(1_000 + version, version))
    first = await exporter.export_round()
    assert first.state_changes == 5
    assert state_changes_path(tmp_path, "1", _ms(START)) in first.files
    assert "5 state changes" in first.line()
    second = await exporter.export_round()
    assert second.state_changes == 0
    # A restart: a new incarnation, its sequences from 1 again, in a ring of 2 that overflowed.
    cluster.rings[1] = StateChangeLog(1, incarnation=2_000, capacity=2)
    for version in range(6, 10):
        cluster.rings[1].record(_shrink(2_000 + version, version))
    third = await exporter.export_round()
    assert (third.state_changes, third.state_changes_dropped) == (2, 2)
    assert "(2 dropped before collection)" in third.line()
    rows = read_state_changes(tmp_path).to_pylist()
    assert sorted((r["incarnation"], r["sequence"], r["zk_version"]) for r in rows) == [
        (1_000, 1, 1), (1_000, 2, 2), (1_000, 3, 3), (1_000, 4, 4), (1_000, 5, 5),
        (2_000, 3, 8), (2_000, 4, 9),
    ]  # fmt: skip
    assert {(r["broker"], r["kind"], r["topic"], r["reason"]) for r in rows} == {
        ("1", "isr_shrink", "orders", "lag")
    }
    assert all(r["isr"] == [1, 2] and r["previous_isr"] == [1, 2, 3] for r in rows)
    # The snapshot reader never mistakes a state-change file for a scrape.
    assert {r["metric"] for r in read_snapshots(tmp_path).to_pylist()} >= {
        "kafka_server_kafkaserver_brokerstate"
    }


@pytest.mark.asyncio
async def test_a_broker_that_fails_its_scrape_is_skipped_for_that_round(
    cluster: FakeCluster, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    await cluster.start_broker(1)
    await cluster.start_broker(2)
    await cluster.start_broker(3)
    cluster.failing.add(2)
    await cluster.stop_broker(3)  # still listed, but nothing answers on its port
    exporter = _exporter(session, [cluster.bootstrap(1)], tmp_path)

    result = await exporter.export_round()

    assert result.brokers == (1, 2, 3)
    assert result.files == (snapshot_path(tmp_path, "1", _ms(START)),)
    assert result.failures[2] == "HTTP 503"
    assert 3 in result.failures
    assert "skipped broker 2 (HTTP 503)" in result.line()


@pytest.mark.asyncio
async def test_when_the_bootstrap_server_leaves_membership_comes_from_known_brokers(
    cluster: FakeCluster, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    await cluster.start_broker(1)
    await cluster.start_broker(2)
    exporter = _exporter(session, [cluster.bootstrap(1)], tmp_path)
    await exporter.export_round()

    await cluster.stop_broker(1)
    cluster.members.discard(1)
    second = await exporter.export_round()

    assert second.brokers == (2,)
    assert second.membership_note is None
    assert [p.name for p in second.files] == [f"2-{_ms(START + timedelta(seconds=10))}.parquet"]


@pytest.mark.asyncio
async def test_membership_lookup_tries_bootstrap_servers_in_order(
    cluster: FakeCluster, session: aiohttp.ClientSession
) -> None:
    await cluster.start_broker(1)
    dead = await _unused_port()

    membership = await fetch_membership(session, [f"http://127.0.0.1:{dead}", cluster.bootstrap(1)], 5.0)

    assert [b.broker_id for b in membership.brokers] == [1]


@pytest.mark.asyncio
async def test_first_round_without_any_reachable_server_raises(
    session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    dead = await _unused_port()
    exporter = _exporter(session, [f"http://127.0.0.1:{dead}"], tmp_path)

    with pytest.raises(MembershipError, match="no server answered"):
        await exporter.export_round()
    assert not await asyncio.to_thread(os.listdir, tmp_path)


@pytest.mark.asyncio
async def test_run_export_stops_after_the_requested_rounds(cluster: FakeCluster, tmp_path: Path) -> None:
    await cluster.start_broker(1)
    options = ExportOptions(
        bootstrap=(cluster.bootstrap(1),), out_dir=tmp_path, interval_ms=20, rounds=3, secret=SECRET
    )
    seen: list[RoundResult] = []

    rounds = await asyncio.wait_for(run_export(options, asyncio.Event(), seen.append), timeout=30)

    assert rounds == 3
    assert [r.number for r in seen] == [1, 2, 3]
    assert len(read_snapshots(tmp_path).to_pylist()) == 3 * 2


@pytest.mark.asyncio
async def test_run_export_stops_when_the_next_round_would_start_after_the_duration(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    await cluster.start_broker(1)
    options = ExportOptions(
        bootstrap=(cluster.bootstrap(1),),
        out_dir=tmp_path,
        interval_ms=60_000,
        duration_ms=1_000,
        secret=SECRET,
    )

    rounds = await asyncio.wait_for(run_export(options, asyncio.Event(), lambda _result: None), timeout=30)

    assert rounds == 1  # the second round would start at 60 s, after the 1 s duration


@pytest.mark.asyncio
async def test_run_export_stops_when_the_stop_event_is_set(cluster: FakeCluster, tmp_path: Path) -> None:
    await cluster.start_broker(1)
    options = ExportOptions(
        bootstrap=(cluster.bootstrap(1),), out_dir=tmp_path, interval_ms=60_000, secret=SECRET
    )
    stop = asyncio.Event()

    def on_round(result: RoundResult) -> None:
        stop.set()  # as SIGTERM would, while the exporter waits an hour-long interval

    rounds = await asyncio.wait_for(run_export(options, stop, on_round), timeout=30)

    assert rounds == 1


async def _unused_port() -> int:
    server = await asyncio.start_server(lambda _r, _w: None, "127.0.0.1", 0)
    port: int = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return port


# --- the command line -----------------------------------------------------------------------


def test_cli_with_an_unreachable_bootstrap_exits_non_zero_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]  # bound, never listening: connections are refused
        arguments = [
            "export",
            "--bootstrap-server",
            f"127.0.0.1:{dead}",
            "--out",
            str(tmp_path),
            "--rounds",
            "1",
        ]
        code = main(arguments)

    captured = capsys.readouterr()
    assert code == 1
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("actorlog snapshots export: cannot reach the cluster: no server answered")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["export", "--bootstrap-server", "h:1", "--out", "x", "--interval", "10x"],
            "invalid duration '10x'",
        ),
        (["export", "--bootstrap-server", "nohost", "--out", "x"], "invalid bootstrap server 'nohost'"),
        (["export", "--out", "x"], "the following arguments are required: --bootstrap-server"),
    ],
)
def test_cli_rejects_bad_arguments_with_one_line(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(arguments)

    captured = capsys.readouterr()
    assert exit_info.value.code == 2
    assert captured.err.count("\n") == 1
    assert message in captured.err


def test_cli_without_a_credential_says_where_to_put_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # no actorlog-data/client.properties here
    code = main(["export", "--bootstrap-server", "127.0.0.1:1", "--out", str(tmp_path / "out")])
    assert code == 2
    assert "sasl.jaas.config" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("properties", "bootstrap", "message"),
    [
        (
            "security.protocol=SSL\nssl.truststore.location=/no/such/ca.pem\n",
            "127.0.0.1:1",
            "ssl.truststore.location: no readable file at '/no/such/ca.pem'",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\n",
            "https://127.0.0.1:1",
            "is https://, but security.protocol is PLAINTEXT or SASL_PLAINTEXT (or unset): "
            "set security.protocol=SSL",
        ),
        ("security.protocol=TLS\n", "127.0.0.1:1", "security.protocol must be PLAINTEXT"),
    ],
)
def test_cli_tls_settings_that_cannot_work_are_one_line(
    properties: str,
    bootstrap: str,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "client.properties"
    config.write_text(f"sasl.username=u\nsasl.password=p\n{properties}")
    arguments = ["export", "--bootstrap-server", bootstrap, "--command-config", str(config), "--out", "x"]
    code = main(arguments)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert message in err


@pytest.mark.asyncio
async def test_a_refused_credential_is_reported_as_such(cluster: FakeCluster, tmp_path: Path) -> None:
    await cluster.start_broker(1)
    options = ExportOptions(
        bootstrap=(cluster.bootstrap(1),), out_dir=tmp_path, interval_ms=20, rounds=1, secret="wrong-secret"
    )
    with pytest.raises(MembershipError, match="HTTP 401"):
        await run_export(options, asyncio.Event(), lambda _result: None)


@pytest.mark.integration
@pytest.mark.asyncio
async def test_exporter_process_exports_until_sigterm(cluster: FakeCluster, tmp_path: Path) -> None:
    await cluster.start_broker(1)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ops", "snapshots", "export",
        "--bootstrap-server", f"127.0.0.1:{cluster.ports[1]}", "--interval", "200ms", "--out", str(tmp_path),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT), SECRET_ENV: SECRET},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        first = (await asyncio.wait_for(process.stdout.readline(), timeout=60)).decode()
        assert first.startswith("round 1 at "), first
        assert "1 brokers, 1 files, 2 samples" in first
        process.send_signal(signal.SIGTERM)
        rest, errors = await asyncio.wait_for(process.communicate(), timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    assert process.returncode == 0, errors.decode()
    assert rest.decode().splitlines()[-1].startswith("exported ")
    assert read_snapshots(tmp_path).num_rows >= 2
