"""Error lines and foreign records against a real local cluster (``actorlog cluster up``, as
``tests/ops/test_cli_processes.py`` starts it): the ``topics`` tool says Kafka's ``Topic 'T' does not
exist as expected`` on every path to a missing topic and Kafka's sentences for impossible partition
counts and replication factors; the console producer stops at a line without the key separator with
Kafka's ``No key found on line N: LINE``; a console-produced line that is not JSON does not block a
``format=json`` read of the JSON API; and ``dump-log`` on a running broker's active segment index
notes that the entries are still in memory."""

from __future__ import annotations

import base64
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from ops.clients.connection import resolve_credential
from ops.properties import parse_properties
from tests.ops.test_cli_processes import RunningCluster, actorlog, cluster

__all__ = ["cluster"]  # the module-scoped fixture, imported so that this module's tests can ask for it

pytestmark = [pytest.mark.integration, pytest.mark.zk]

TOPIC_ERROR = "Error while executing topic command : "


def topics(running: RunningCluster, *arguments: str) -> tuple[int, list[str], list[str]]:
    done = actorlog(running.workdir, "topics", "--bootstrap-server", running.bootstrap, *arguments)
    return done.returncode, done.stdout.splitlines(), done.stderr.splitlines()


def test_every_path_to_a_missing_topic_prints_kafkas_line(cluster: RunningCluster) -> None:
    missing = [TOPIC_ERROR + "Topic 'nowhere' does not exist as expected"]
    for action in (
        ["--describe"],
        ["--alter", "--partitions", "4"],
        ["--alter", "--config", "retention.ms=1000"],
        ["--delete"],
    ):
        assert topics(cluster, *action, "--topic", "nowhere") == (1, [], missing), action
        assert topics(cluster, *action, "--topic", "nowhere", "--if-exists") == (0, [], []), action
    # Deleted in between: the same line, not the DeleteTopics answer's own text.
    assert topics(cluster, "--create", "--topic", "brief")[0] == 0
    assert topics(cluster, "--delete", "--topic", "brief") == (0, ["Topic brief is deleted."], [])
    gone = [TOPIC_ERROR + "Topic 'brief' does not exist as expected"]
    assert topics(cluster, "--delete", "--topic", "brief") == (1, [], gone)


def test_impossible_counts_are_refused_in_kafkas_words(cluster: RunningCluster) -> None:
    for options, message in (
        (["--replication-factor", "0"], "Replication factor must be larger than 0."),
        (["--partitions", "0"], "Number of partitions must be larger than 0."),
        (["--replication-factor", "4"], "Replication factor: 4 larger than available brokers: 3."),
    ):
        assert topics(cluster, "--create", "--topic", "never", *options) == (1, [], [TOPIC_ERROR + message])
    assert "never" not in topics(cluster, "--list")[1]


def read_records(running: RunningCluster, topic: str, partition: int, query: str) -> tuple[int, Any]:
    # The JSON API takes the client user that cluster up wrote into client.properties.
    credential = resolve_credential(parse_properties((running.data_dir / "client.properties").read_text()))
    url = f"http://{running.bootstrap}/v1/topics/{topic}/partitions/{partition}/records?{query}"
    request = urllib.request.Request(url, headers={"Authorization": credential.authorization})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, orjson.loads(response.read())


def test_console_lines_stop_at_a_missing_key_and_do_not_block_json_reads(cluster: RunningCluster) -> None:
    assert topics(cluster, "--create", "--topic", "mixed", "--partitions", "1")[0] == 0
    b = cluster.bootstrap
    keyed = actorlog(cluster.workdir, "produce", "--bootstrap-server", b, "--topic", "mixed",
                     "--property", "parse.key=true", "--property", "key.separator=:",
                     stdin='a:{"n": 1}\nnot json and no key\nc:{"n": 3}\n')  # fmt: skip
    assert keyed.returncode == 1
    assert keyed.stderr.splitlines() == ["No key found on line 2: not json and no key"]
    plain = actorlog(cluster.workdir, "produce", "--bootstrap-server", b, "--topic", "mixed",
                     stdin='plain words\n{"n": 4}\n')  # fmt: skip
    assert plain.returncode == 0, plain.stderr

    status, body = read_records(cluster, "mixed", 0, "offset=0&timeout_ms=5000")
    assert status == 200
    first, foreign, last = body["records"]
    # The line before the bad one was sent; its key "a" is not JSON either, its value is.
    assert (first["value"], first["key_format"], base64.b64decode(first["key"])) == ({"n": 1}, "binary", b"a")
    assert "value_format" not in first
    assert foreign["key"] is None
    assert (foreign["value_format"], base64.b64decode(foreign["value"])) == ("binary", b"plain words")
    assert (last["key"], last["value"]) == (None, {"n": 4})
    assert not {"key_format", "value_format"} & set(last)


def test_dump_log_notes_the_active_segments_index_entries_are_in_memory(cluster: RunningCluster) -> None:
    assert topics(cluster, "--create", "--topic", "live", "--partitions", "1")[0] == 0
    lines = "".join(f"line {n} " + "x" * 200 + "\n" for n in range(40))  # beyond index.interval.bytes
    produced = actorlog(
        cluster.workdir, "produce", "--bootstrap-server", cluster.bootstrap, "--topic", "live", stdin=lines
    )
    assert produced.returncode == 0, produced.stderr
    segment: Path = cluster.data_dir / "broker-1" / "logs" / "live-0" / "00000000000000000000"
    dumped = actorlog(
        cluster.workdir, "dump-log", "--files", f"{segment}.index", f"{segment}.timeindex", f"{segment}.log"
    )
    assert dumped.returncode == 0, dumped.stdout + dumped.stderr
    notes = [line for line in dumped.stdout.splitlines() if line.startswith("Note: ")]
    assert [note.split(" holds ")[0] for note in notes] == [
        "Note: 00000000000000000000.index",
        "Note: 00000000000000000000.timeindex",
    ]
    assert all("the segment was never rolled or closed" in note for note in notes)
    assert sum(line.startswith("baseOffset: ") for line in dumped.stdout.splitlines()) >= 1
