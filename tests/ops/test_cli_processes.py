"""The command line against a real local cluster: ``actorlog cluster up`` in the background, then
``topics``, ``produce``, ``consume`` and ``perf`` as a user types them, checking output lines and
exit codes. Clients run from the directory that holds ``actorlog-data/``, so they find the
cluster's credential on their own, as the README says."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from ops.clients.connection import SECRET_ENV
from runtime.clock import LoopClock, wait_ms
from tests.support.cluster_up import start_cluster_up

pytestmark = [pytest.mark.integration, pytest.mark.zk]

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RunningCluster:
    process: subprocess.Popen[str]
    workdir: Path
    banner: list[str]

    @property
    def data_dir(self) -> Path:
        return self.workdir / "actorlog-data"

    @property
    def description(self) -> dict[str, object]:
        parsed: dict[str, object] = orjson.loads((self.data_dir / "cluster.json").read_bytes())
        return parsed

    @property
    def bootstrap(self) -> str:
        return str(self.description["bootstrap_servers"]).split(",")[0]


def actorlog(
    workdir: Path,
    *arguments: str,
    stdin: str | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    environment.update(env or {})
    environment["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "ops", *arguments],
        cwd=workdir,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
        check=False,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: object) -> Iterator[RunningCluster]:
    """``actorlog cluster up`` with its own ZooKeeper, started once for the module; it counts as up
    when it prints its banner (read from its stdout, no polling)."""
    workdir = tmp_path_factory.mktemp("cli")
    process, banner = start_cluster_up(["--base-port", "0", "--brokers", "3"], workdir)
    running = RunningCluster(process, workdir, banner)
    try:
        yield running
    finally:
        brokers = running.description["brokers"]
        assert isinstance(brokers, list)
        pids = [int(b["pid"]) for b in brokers]
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=120)
        assert process.returncode == 0, rest
        assert "stopped." in rest
        assert not (running.data_dir / "cluster.json").exists()
        for pid in pids:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)  # every broker process is gone


def test_cluster_up_describes_itself(cluster: RunningCluster) -> None:
    assert cluster.banner[0].startswith("actorlog: 3 broker(s) up; controller is broker ")
    description = cluster.description
    brokers = description["brokers"]
    assert isinstance(brokers, list)
    assert [b["broker_id"] for b in brokers] == [1, 2, 3]
    assert all(str(b["endpoint"]).startswith("http://127.0.0.1:") for b in brokers)
    assert description["zookeeper"]
    properties = (cluster.data_dir / "client.properties").read_text()
    # Clients get a user of their own (SCRAM-SHA-256), never the brokers' internal secret.
    assert "internal.auth.secret" not in properties
    assert "sasl.mechanism=SCRAM-SHA-256" in properties
    assert 'ScramLoginModule required username="admin" password="' in properties
    assert oct((cluster.data_dir / "client.properties").stat().st_mode & 0o777) == "0o600"


def test_topics_create_describe_list_alter_delete(cluster: RunningCluster) -> None:
    b = cluster.bootstrap
    created = actorlog(cluster.workdir, "topics", "--bootstrap-server", b, "--create", "--topic", "orders",
                       "--partitions", "3", "--config", "retention.ms=86400000")  # fmt: skip
    assert (created.returncode, created.stdout) == (0, "Created topic orders.\n"), created.stderr
    again = actorlog(cluster.workdir, "topics", "--bootstrap-server", b, "--create", "--topic", "orders")
    assert again.returncode == 1
    assert again.stderr.strip() == "Error while executing topic command : Topic 'orders' already exists."
    quiet = actorlog(cluster.workdir, "topics", "--bootstrap-server", b, "--create", "--topic", "orders",
                     "--if-not-exists")  # fmt: skip
    assert (quiet.returncode, quiet.stdout) == (0, "")

    described = actorlog(
        cluster.workdir, "topics", "--bootstrap-server", b, "--describe", "--topic", "orders"
    )
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert (
        lines[0] == "Topic: orders\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: retention.ms=86400000"
    )
    partition_line = re.compile(
        r"^\tTopic: orders\tPartition: (\d)\tLeader: ([123])\tReplicas: ([123],[123],[123])\t"
        r"Isr: ([123],[123],[123])\tLeaderEpoch: 0$"
    )
    matches = [partition_line.match(line) for line in lines[1:]]
    assert all(matches), lines
    assert [m.group(1) for m in matches if m] == ["0", "1", "2"]
    for m in matches:
        assert m is not None
        assert m.group(2) == m.group(3).split(",")[0]  # the preferred replica leads

    listed = actorlog(cluster.workdir, "topics", "--bootstrap-server", b, "--list")
    assert "orders" in listed.stdout.splitlines()
    grown = actorlog(cluster.workdir, "topics", "--bootstrap-server", b, "--alter", "--topic", "orders",
                     "--partitions", "4")  # fmt: skip
    assert grown.returncode == 0, grown.stderr
    assert "Adding partitions succeeded!" in grown.stdout
    described = actorlog(
        cluster.workdir, "topics", "--bootstrap-server", b, "--describe", "--topic", "orders"
    )
    assert "PartitionCount: 4" in described.stdout
    healthy = actorlog(cluster.workdir, "topics", "--bootstrap-server", b, "--describe",
                       "--under-replicated-partitions")  # fmt: skip
    assert (healthy.returncode, healthy.stdout) == (0, "")

    actorlog(cluster.workdir, "topics", "--bootstrap-server", b, "--create", "--topic", "scratch")
    deleted = actorlog(cluster.workdir, "topics", "--bootstrap-server", b, "--delete", "--topic", "scratch")
    assert (deleted.returncode, deleted.stdout) == (0, "Topic scratch is deleted.\n"), deleted.stderr
    assert "scratch" not in actorlog(cluster.workdir, "topics", "--bootstrap-server", b, "--list").stdout
    missing = actorlog(cluster.workdir, "topics", "--bootstrap-server", b, "--delete", "--topic", "scratch")
    assert missing.returncode == 1
    assert (
        missing.stderr.strip()
        == "Error while executing topic command : Topic 'scratch' does not exist as expected"
    )


def test_produce_then_consume_with_keys(cluster: RunningCluster) -> None:
    b = cluster.bootstrap
    actorlog(
        cluster.workdir,
        "topics",
        "--bootstrap-server",
        b,
        "--create",
        "--topic",
        "lines",
        "--partitions",
        "1",
    )
    produced = actorlog(cluster.workdir, "produce", "--bootstrap-server", b, "--topic", "lines",
                        "--property", "parse.key=true", "--property", "key.separator=:",
                        stdin="k1:first\nk2:second\nk1:third\n")  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = actorlog(cluster.workdir, "consume", "--bootstrap-server", b, "--topic", "lines",
                        "--from-beginning", "--max-messages", "3", "--property", "print.key=true",
                        "--property", "print.offset=true")  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [
        "Offset:0\tk1\tfirst",
        "Offset:1\tk2\tsecond",
        "Offset:2\tk1\tthird",
    ]
    assert consumed.stderr.strip().endswith("Processed a total of 3 messages")
    # Without --from-beginning a consumer starts at the end: nothing within the timeout.
    latest = actorlog(
        cluster.workdir, "consume", "--bootstrap-server", b, "--topic", "lines", "--timeout-ms", "1500"
    )
    assert (latest.returncode, latest.stdout) == (0, "")
    assert "Processed a total of 0 messages" in latest.stderr


def test_client_errors_are_one_clear_line(cluster: RunningCluster, tmp_path: Path) -> None:
    b = cluster.bootstrap
    unknown = actorlog(
        cluster.workdir, "consume", "--bootstrap-server", b, "--topic", "nope", "--max-messages", "1"
    )
    assert unknown.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    illegal = actorlog(cluster.workdir, "topics", "--bootstrap-server", b, "--create", "--topic", "bad/name")
    assert illegal.returncode == 1
    assert illegal.stderr.startswith('Error while executing topic command : Topic name "bad/name" is illegal')
    # Elsewhere there is no credential, unless given: the error says how to give one.
    elsewhere = actorlog(tmp_path, "topics", "--bootstrap-server", b, "--list")
    assert elsewhere.returncode == 1
    assert "sasl.jaas.config" in elsewhere.stderr
    wrong = actorlog(tmp_path, "topics", "--bootstrap-server", b, "--list", env={SECRET_ENV: "x" * 24})
    assert wrong.returncode == 1
    assert "refused this client's credential" in wrong.stderr
    config = tmp_path / "client.properties"
    config.write_text((cluster.data_dir / "client.properties").read_text())
    explicit = actorlog(
        tmp_path, "topics", "--bootstrap-server", b, "--list", "--command-config", str(config)
    )
    assert explicit.returncode == 0, explicit.stderr
    usage = actorlog(cluster.workdir, "topics", "--bootstrap-server", b, "--create")
    assert usage.returncode == 2
    assert "--topic is required" in usage.stderr
    bad_property = actorlog(cluster.workdir, "produce", "--bootstrap-server", b, "--topic", "x",
                            "--property", "parse.keys=true", stdin="")  # fmt: skip
    assert bad_property.returncode == 2
    assert "unknown --property parse.keys" in bad_property.stderr


def test_perf_produce_and_consume_print_kafkas_lines(cluster: RunningCluster) -> None:
    b = cluster.bootstrap
    actorlog(
        cluster.workdir, "topics", "--bootstrap-server", b, "--create", "--topic", "perf", "--partitions", "3"
    )
    produced = actorlog(cluster.workdir, "perf", "produce", "--topic", "perf", "--num-records", "3000",
                        "--record-size", "100", "--throughput", "-1",
                        "--producer-props", f"bootstrap.servers={b}", "linger.ms=5")  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    final = produced.stdout.splitlines()[-1]
    assert re.fullmatch(
        r"3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, "
        r"\d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.",
        final,
    ), final
    consumed = actorlog(cluster.workdir, "perf", "consume", "--bootstrap-server", b, "--topic", "perf",
                        "--messages", "3000")  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    header, line = consumed.stdout.splitlines()
    assert header == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    fields = [field.strip() for field in line.split(",")]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", fields[0])
    assert fields[4] == "3000"
    assert float(fields[2]) == pytest.approx(3000 * 100 / 1024 / 1024, rel=1e-3)


def test_the_command_itself() -> None:
    bare = subprocess.run(
        [sys.executable, "-m", "ops"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert bare.returncode == 2
    assert "usage: actorlog <command>" in bare.stdout
    unknown = subprocess.run(
        [sys.executable, "-m", "ops", "frobnicate"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert unknown.returncode == 2
    assert "unknown command 'frobnicate'" in unknown.stderr


@pytest.mark.prometheus
def test_cluster_up_with_prometheus_scrapes_every_broker(tmp_path: Path, zookeeper_server: object) -> None:
    """`cluster up --prometheus` runs a real Prometheus (from the installed package) that scrapes
    every broker, loads the alert rules, and prints its URL; Ctrl-C stops it with the rest. With
    --tls (the plain HTTP scrape is the dashboard tests'): Prometheus scrapes https:// and verifies
    each broker's certificate against the cluster's CA."""
    if shutil.which("prometheus") is None and not os.environ.get("ACTORLOG_REQUIRE_PROMETHEUS"):
        pytest.skip("prometheus is not installed (make test installs it)")
    if shutil.which("openssl") is None:
        pytest.skip("--tls needs the openssl command")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ops",
            "cluster",
            "up",
            "--base-port",
            "0",
            "--brokers",
            "2",
            "--prometheus",
            "--tls",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    watchdog = threading.Timer(120, process.kill)
    watchdog.start()
    banner: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        banner.append(line.rstrip("\n"))
        if line.startswith("Press Ctrl-C"):
            break
    watchdog.cancel()
    try:
        url = next(line.split()[-1] for line in banner if line.strip().startswith("Prometheus"))
        assert url.startswith("http://127.0.0.1:")

        async def observe() -> tuple[list[dict[str, Any]], str]:
            """Prometheus's own view, asked over its HTTP API until both brokers are scraped (its
            file discovery and first scrape take a few seconds: a bounded poll of an external
            process, 250 ms apart)."""
            clock = LoopClock()
            async with aiohttp.ClientSession() as session:

                async def healthy() -> list[dict[str, Any]]:
                    while True:
                        async with session.get(f"{url}/api/v1/targets") as response:
                            active = (await response.json())["data"]["activeTargets"]
                        up = [t for t in active if t.get("health") == "up"]
                        if len(up) == 2:
                            return up
                        await wait_ms(clock, 250)

                up = await asyncio.wait_for(healthy(), timeout=60)
                async with session.get(f"{url}/api/v1/rules") as response:
                    return up, await response.text()

        up, rules = asyncio.run(observe())
        assert sorted(t["labels"]["broker"] for t in up) == ["1", "2"]
        assert all(t["scrapeUrl"].startswith("https://127.0.0.1:") for t in up), up
        assert "ActorlogUnderReplicatedPartitions" in rules
    finally:
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=120)
    assert process.returncode == 0, rest
