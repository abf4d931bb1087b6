"""The README followed as a new user follows it: its "Using actorlog" commands, read from the README
itself, run in order in a fresh directory against `actorlog cluster up`, each checked to exit as
documented; then the cluster is stopped with Ctrl-C and a second `cluster up` started right after
it must get the default ports again.

Commands come from the README's fenced blocks, so an example that changes is tested as changed.
Each command is either run or skipped for a stated reason (another machine, a variant of one already
run, a long campaign with its own tests); a command that is neither fails the test, so a new
example cannot slip in untested. The tools are found as the README says: on the PATH of the
activated virtual environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

pytestmark = [pytest.mark.integration, pytest.mark.zk]

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
VENV_BIN = Path(sys.executable).parent
BOOTSTRAP = "localhost:9092"

# Commands (by their start) not run here, and why. Each must still be in the README.
SKIPPED = {
    "actorlog cluster up --brokers 5": "a variant of the `cluster up` run here (five brokers, Prometheus)",
    "actorlog cluster up --zookeeper zk1:2181": "needs an external ZooKeeper ensemble named zk1",
    "actorlog rollup": "the PySpark job; its own tests run it (tests/ops/test_rollup_job.py)",
    "actorlog verify check actorlog-verify/seed-7": "needs a `verify run`, a campaign with its own tests",
    "actorlog sim --seeds 1-10000": "a campaign of 10,000 seeds (`make sim`)",
    "actorlog sim --seed 42 --verbose": "the same run as `actorlog sim --seed 42`, printing its events",
    "actorlog verify run": "fault campaigns on real processes: tests/integration/test_verify_campaign.py",
    "actorlog broker start": "what `cluster up` runs for each broker (and Kubernetes)",
    "actorlog cluster health --bootstrap-server localhost:9092 --broker 2 --wait": (
        "the refused check above, asked again for two minutes "
        "(tests/integration/test_cluster_health_processes.py runs --wait)"
    ),
}
# Commands the README says end with another status than 0, and why.
EXIT_CODES = {
    "actorlog cluster health --bootstrap-server localhost:9092 --broker 2": (
        1,
        "orders has min.insync.replicas=3 on 3 replicas: no broker may restart",
    ),
}
# Commands that run until Ctrl-C: started, seen working, then interrupted.
FOREGROUND = {
    "actorlog snapshots export": "round 1",
    "actorlog zookeeper": "ZooKeeper serving on",
}
# Standard input for commands that read it (others get an empty one).
STDIN = {
    "actorlog users --command-config actorlog-data/broker-1/server.properties --add alice": (
        "alice-password\n"
    ),
    "actorlog produce --bootstrap-server localhost:9092 --topic orders --property parse.key=true": (
        "user-1:first\nuser-2:second\n"
    ),
}


@dataclass(frozen=True)
class Block:
    section: str
    language: str
    text: str

    def commands(self) -> list[str]:
        """Shell commands, continuation lines joined and trailing comments dropped."""
        joined = re.sub(r"\\\n\s*", " ", self.text)
        commands = []
        for line in joined.splitlines():
            command = re.sub(r" {2,}", " ", re.sub(r"\s+#\s.*$", "", line)).strip()
            if command and not command.startswith("#"):
                commands.append(command)
        return commands


def readme_blocks(first_section: str, last_section: str) -> list[Block]:
    """The fenced blocks between two ``##`` headings, each with its ``###`` section."""
    start, end = README.index(f"## {first_section}\n"), README.index(f"## {last_section}\n")
    blocks, section = [], first_section
    for match in re.finditer(
        r"^(###? [^\n]+)$|^```(\w*)\n(.*?)^```$", README[start:end], re.MULTILINE | re.DOTALL
    ):
        if match.group(1):
            section = match.group(1).lstrip("# ")
        else:
            blocks.append(Block(section, match.group(2), match.group(3)))
    return blocks


def environment(cwd: Path) -> dict[str, str]:
    """The shell of a user who ran ``source .venv/bin/activate`` (README) in ``cwd``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACTORLOG_")}
    env.update(
        PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(VENV_BIN.parent), PWD=str(cwd)
    )
    env["PYTHONPATH"] = str(ROOT)  # the repository's packages, as the editable install gives them
    return env


@dataclass
class Foreground:
    """A command running until Ctrl-C, its output read as it comes."""

    process: asyncio.subprocess.Process
    output: list[str]

    @classmethod
    async def start(cls, command: str, cwd: Path) -> Foreground:
        process = await asyncio.create_subprocess_shell(
            f"exec {command}",  # the exit status is the command's, not a shell's killed by the Ctrl-C
            cwd=cwd,
            env=environment(cwd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return cls(process, [])

    async def wait_for(self, text: str, *, timeout_s: float) -> None:
        assert self.process.stdout is not None

        async def read() -> None:
            assert self.process.stdout is not None
            while not any(text in line for line in self.output):
                line = await self.process.stdout.readline()
                if not line:
                    raise AssertionError(f"ended before printing {text!r}:\n{''.join(self.output)}")
                self.output.append(line.decode(errors="replace"))

        await asyncio.wait_for(read(), timeout_s)

    async def interrupt(self, *, timeout_s: float) -> int:
        """Ctrl-C, as a terminal sends it: SIGINT to the process group."""
        os.killpg(self.process.pid, signal.SIGINT)
        assert self.process.stdout is not None
        rest = await asyncio.wait_for(self.process.stdout.read(), timeout_s)
        self.output.append(rest.decode(errors="replace"))
        return await asyncio.wait_for(self.process.wait(), timeout_s)

    def kill(self) -> None:
        if self.process.returncode is None:
            os.killpg(self.process.pid, signal.SIGKILL)


async def run(command: str, cwd: Path, *, stdin: str = "", timeout_s: float = 180) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_shell(
        command,
        cwd=cwd,
        env=environment(cwd),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(stdin.encode()), timeout_s)
    except TimeoutError:
        os.killpg(process.pid, signal.SIGKILL)
        raise AssertionError(f"{command!r} did not end within {timeout_s} s") from None
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def skipped(command: str) -> bool:
    return any(command.startswith(prefix) for prefix in SKIPPED)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    directory = tmp_path / "new-user"
    directory.mkdir()
    return directory


@pytest_asyncio.fixture
async def cluster(workdir: Path) -> AsyncIterator[list[Foreground]]:
    """Whatever `cluster up` processes the test starts; killed if the test fails half-way."""
    started: list[Foreground] = []
    yield started
    for foreground in started:
        if foreground.process.returncode is None:
            # Ctrl-C stops the brokers too (they run in their own sessions); a kill would leave them.
            with contextlib.suppress(TimeoutError, ProcessLookupError):
                await foreground.interrupt(timeout_s=90)
        foreground.kill()
        await foreground.process.wait()
    cluster_file = workdir / "actorlog-data" / "cluster.json"
    if cluster_file.exists():  # still there: its brokers outlived cluster up
        for broker in json.loads(cluster_file.read_text()).get("brokers", []):
            if broker.get("pid"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(broker["pid"], signal.SIGKILL)


def test_the_readme_names_every_skipped_command() -> None:
    commands = [
        c
        for b in readme_blocks("Using actorlog", "Configuration")
        if b.language == "sh"
        for c in b.commands()
    ]
    for prefix in [*SKIPPED, *FOREGROUND, *STDIN]:
        assert any(c.startswith(prefix) for c in commands), f"no README command starts with {prefix!r}"


@pytest.mark.asyncio
async def test_the_using_actorlog_examples_work_as_written(workdir: Path, cluster: list[Foreground]) -> None:
    blocks = readme_blocks("Using actorlog", "Configuration")
    activate = blocks[0]
    assert activate.commands() == ["source .venv/bin/activate"]
    assert (VENV_BIN / "activate").is_file()
    assert (VENV_BIN / "actorlog").is_file()

    local_cluster = next(b for b in blocks if b.section == "A local cluster")
    up_command = local_cluster.commands()[0]
    assert up_command == "actorlog cluster up"
    up = await Foreground.start(up_command, workdir)
    cluster.append(up)
    await up.wait_for("Press Ctrl-C to stop.", timeout_s=90)
    banner = "".join(up.output)
    assert "WARNING" not in banner, banner  # the default ports: every example below uses them
    assert json.loads((workdir / "actorlog-data" / "cluster.json").read_text())

    ran: list[str] = []
    for block in blocks[1:]:
        if block.section == "A local cluster":
            assert all(skipped(c) for c in block.commands()[1:])
            continue
        if block.language == "python":
            script = workdir / "readme_example.py"
            script.write_text(block.text)
            code, out, err = await run(f"python {script.name}", workdir)
            assert code == 0, f"the README's Python example ({block.section}) failed:\n{out}\n{err}"
            if block.section == "Kafka clients":
                assert re.search(r"^kafka-python read 0 b'user-1' b'hello'$", out, re.MULTILINE), out
                ran.append("Kafka clients example")
            else:
                assert re.search(r"^\d+ \d+ b'user-1' b'12\.50'$", out, re.MULTILINE), out
                ran.append("python example")
            continue
        if block.language != "sh":
            continue
        if block.section == "JSON API":
            code, out, err = await run(f"set -e\n{block.text}", workdir)
            assert code == 0, f"the README's JSON API example failed:\n{out}\n{err}"
            errors = re.findall(r'\{"error_code":\s*\d+[^}]*\}', out)
            assert errors == [], errors  # every answer a success (the OpenAPI document names the field)
            assert '"openapi":"3.1.0"' in out, out[:2000]
            assert re.search(r'"records":\[\{"offset":0,', out), out[-2000:]
            ran.append("JSON API example")
            continue
        for command in block.commands():
            if skipped(command):
                continue
            foreground = next((FOREGROUND[p] for p in FOREGROUND if command.startswith(p)), None)
            if foreground is not None:
                process = await Foreground.start(command, workdir)
                try:
                    await process.wait_for(foreground, timeout_s=60)
                    code = await process.interrupt(timeout_s=15)
                finally:
                    process.kill()
                # 0, or ended by the SIGINT after its own clean stop (130 in a shell's $?).
                assert code in (0, 130, -signal.SIGINT), (
                    f"{command!r} exited {code} on Ctrl-C:\n{''.join(process.output)}"
                )
            else:
                stdin = next((STDIN[p] for p in STDIN if command.startswith(p)), "")
                code, out, err = await run(command, workdir, stdin=stdin)
                expected = EXIT_CODES[command][0] if command in EXIT_CODES else 0
                assert code == expected, f"{command!r} exited {code}, not {expected}:\n{out}\n{err}"
                assert "Traceback" not in err, err
                _check_output(command, out)
            ran.append(command)

    assert "python example" in ran
    assert "Kafka clients example" in ran
    assert "JSON API example" in ran
    assert any(c.startswith("actorlog perf produce") for c in ran)

    # Ctrl-C stops the cluster cleanly; a second `cluster up` right after gets the same ports.
    assert await up.interrupt(timeout_s=120) == 0, "".join(up.output)
    assert "stopped." in "".join(up.output)
    again = await Foreground.start(up_command, workdir)
    cluster.append(again)
    await again.wait_for("Press Ctrl-C to stop.", timeout_s=90)
    assert "WARNING" not in "".join(again.output), "".join(again.output)
    assert "http://localhost:9092" in "".join(again.output) or "127.0.0.1:9092" in "".join(again.output)
    code, out, err = await run(f"actorlog topics --bootstrap-server {BOOTSTRAP} --list", workdir)
    assert code == 0, (out, err)
    assert "orders" in out.split(), out
    assert await again.interrupt(timeout_s=120) == 0, "".join(again.output)


def _check_output(command: str, out: str) -> None:
    """What the README says a command prints, where it says it."""
    if command.startswith(f"actorlog topics --bootstrap-server {BOOTSTRAP} --describe --topic orders"):
        assert re.search(
            r"^Topic: orders\tPartitionCount: (6|12)\tReplicationFactor: 3", out, re.MULTILINE
        ), out
        assert re.search(
            r"^\tTopic: orders\tPartition: 0\tLeader: \d\tReplicas: [\d,]+\tIsr: [\d,]+\tLeaderEpoch: \d+",
            out,
            re.MULTILINE,
        ), out
    if command.startswith(f"actorlog topics --bootstrap-server {BOOTSTRAP} --list"):
        assert "orders" in out.split(), out
    if command.startswith("actorlog consume") and "--from-beginning" in command:
        assert re.search(r"Offset:\d+\s+user-1\s+first|user-1", out), out
    if command.startswith("actorlog perf produce"):
        assert re.search(r"^1000000 records sent, [\d.]+ records/sec", out, re.MULTILINE), out
    if command.startswith("actorlog perf consume"):
        assert out.strip(), out
    if command == f"actorlog cluster health --bootstrap-server {BOOTSTRAP} --broker 2":
        assert "Restart of broker 2: REFUSED" in out, out
        assert "orders" in out, out
    if command == f"actorlog cluster health --bootstrap-server {BOOTSTRAP}":
        assert "Cluster:" in out, out
    if command.startswith("actorlog dump-log"):
        assert "baseOffset: 0" in out, out
