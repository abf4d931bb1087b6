"""The verification history: what ``HistoryWriter`` writes, what ``read_history`` accepts, and the
crash case (a torn last line) told apart from a malformed history."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ops.verify.history import (
    Event,
    HistoryError,
    HistoryWriter,
    parse_history,
    read_history,
    topic_partition,
)
from runtime.clock import ManualClock

KEY = topic_partition("orders", 0)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start_ms=1000)


def _lines(path: Path) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _write(path: Path, *lines: dict[str, object] | bytes) -> Path:
    path.write_bytes(
        b"".join(line if isinstance(line, bytes) else orjson.dumps(line) + b"\n" for line in lines)
    )
    return path


def _send(index: int, value: str = "a", process: int = 0) -> dict[str, object]:
    return {
        "index": index,
        "time_ns": index,
        "type": "invoke",
        "process": process,
        "f": "send",
        "value": [KEY, value],
    }


def _sent(
    index: int, invoke: int, offset: int | None, value: str = "a", process: int = 0
) -> dict[str, object]:
    return {
        "index": index,
        "time_ns": index,
        "type": "ok",
        "process": process,
        "f": "send",
        "value": [KEY, [offset, value]],
        "invoke": invoke,
    }


def test_topic_partition_keys() -> None:
    assert topic_partition("orders", 12) == "orders-12"
    assert topic_partition("my-topic", 0) == "my-topic-0"


def test_every_event_is_one_line_with_jepsens_fields(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, clock) as history:
        send = history.send(0, KEY, "0-1")
        clock.advance(5)
        history.send_ok(send, 7)
        poll = history.poll(1)
        history.ok(poll, {KEY: [(7, "0-1")]})
        history.fault({"kind": "kill-leader", "broker": 2})
    assert _lines(path) == [
        {
            "index": 0,
            "time_ns": 1_000_000_000,
            "type": "invoke",
            "process": 0,
            "f": "send",
            "value": [KEY, "0-1"],
        },
        {
            "index": 1,
            "time_ns": 1_005_000_000,
            "type": "ok",
            "process": 0,
            "f": "send",
            "value": [KEY, [7, "0-1"]],
            "invoke": 0,
        },
        {"index": 2, "time_ns": 1_005_000_000, "type": "invoke", "process": 1, "f": "poll", "value": None},
        {
            "index": 3,
            "time_ns": 1_005_000_000,
            "type": "ok",
            "process": 1,
            "f": "poll",
            "value": {KEY: [[7, "0-1"]]},
            "invoke": 2,
        },
        {
            "index": 4,
            "time_ns": 1_005_000_000,
            "type": "event",
            "process": "nemesis",
            "f": "fault",
            "value": {"kind": "kill-leader", "broker": 2},
        },
    ]


def test_what_is_written_reads_back_as_the_same_events(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "history.jsonl"
    written: list[Event] = []
    with HistoryWriter(path, clock) as history:
        first = history.send(0, KEY, "a")
        second = history.send(0, KEY, "b")  # two sends in flight in one process
        written += [history.send_ok(second, 1), first.info(error="REQUEST_TIMED_OUT")]
        third = history.send(3, KEY, "c")
        written.append(third.fail(error="NOT_ENOUGH_REPLICAS"))
        assign = history.assign(1, [KEY])
        written.append(assign.ok())
        written.append(history.final_read(2, KEY, [(1, "b")], high_watermark=2))
        written.append(
            history.replica_log(1, KEY, [(1, "b")], high_watermark=2, log_end_offset=2, leader=True)
        )
        written.append(history.note("healed"))
        assert history.open_operations == 0
    events = read_history(path).events
    assert [event for event in events if event.type != "invoke"] == written
    assert events[3].value == [KEY, [None, "a"]]  # an info completion without a value: offset unknown
    assert events[3].error == "REQUEST_TIMED_OUT"
    assert events[5].value == [KEY, [None, "c"]]
    assert events[7].value == [KEY]
    assert events[9].value["leader"] is True


def test_a_history_file_is_never_appended_to(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(b"")
    with pytest.raises(FileExistsError):
        HistoryWriter(path, clock)


def test_an_operation_completes_once(tmp_path: Path, clock: ManualClock) -> None:
    with HistoryWriter(tmp_path / "history.jsonl", clock) as history:
        send = history.send(0, KEY, "a")
        send.ok([KEY, [0, "a"]])
        with pytest.raises(ValueError, match="not open"):
            send.info(error="late")


def test_functions_are_operations_or_events_not_both(tmp_path: Path, clock: ManualClock) -> None:
    with HistoryWriter(tmp_path / "history.jsonl", clock) as history:
        with pytest.raises(ValueError, match="not an operation"):
            history.invoke(0, "fault")
        with pytest.raises(ValueError, match="not an event"):
            history.event(0, "send", [KEY, "a"])
        poll = history.poll(0)
        with pytest.raises(ValueError, match="ok poll"):
            poll.ok()


def test_an_empty_history_has_no_events(tmp_path: Path) -> None:
    history = read_history(_write(tmp_path / "h.jsonl"))
    assert history.events == []
    assert history.truncated_line is None


def test_a_torn_last_line_is_the_crash_case_tolerated_and_reported(tmp_path: Path) -> None:
    path = _write(tmp_path / "h.jsonl", _send(0), _sent(1, 0, 0), orjson.dumps(_send(2, "b"))[:25])
    history = read_history(path)
    assert [event.index for event in history.events] == [0, 1]
    assert history.truncated_line == 3


def test_a_whole_last_line_without_its_newline_is_an_event(tmp_path: Path) -> None:
    path = _write(tmp_path / "h.jsonl", _send(0), orjson.dumps(_sent(1, 0, 0)))
    history = read_history(path)
    assert len(history.events) == 2
    assert history.truncated_line is None


def test_an_open_invoke_stays_open(tmp_path: Path) -> None:
    assert len(read_history(_write(tmp_path / "h.jsonl", _send(0))).events) == 1


@pytest.mark.parametrize(
    ("lines", "line", "message"),
    [
        ([_send(0), b"{not json\n", _sent(2, 0, 0)], 2, "not JSON"),
        ([_send(0), b"\n", _sent(2, 0, 0)], 2, "not JSON"),
        ([_send(0), b"[1, 2]\n"], 2, "not a JSON object"),
        ([_send(0), _sent(2, 0, 0)], 2, "index 2, expected 1"),
        ([{**_send(0), "time_ns": "now"}], 1, "time_ns"),
        ([{**_send(0), "process": None}], 1, "process"),
        ([{**_send(0), "f": "txn"}], 1, "'txn' is not one of"),
        ([{**_send(0), "type": "ok"}], 1, "completion names invoke None"),
        ([{**_send(0), "type": "event"}], 1, "not invoke, ok, fail or info"),
        ([{**_send(0), "value": [KEY, 1]}], 1, "is not [key, value]"),
        ([_send(0), _sent(1, 0, 0, value="b")], 2, "is not ['orders-0', [offset, 'a']]"),
        ([_send(0), _sent(1, 0, -1)], 2, "[offset, 'a']"),
        ([_send(0), _sent(1, 0, 0, process=7)], 2, "a send by 0"),
        ([_send(0), _sent(1, 0, 0), _sent(2, 0, 1)], 3, "not an open operation"),
        (
            [{"index": 0, "time_ns": 0, "type": "invoke", "process": 1, "f": "poll", "value": None},
             {"index": 1, "time_ns": 0, "type": "ok", "process": 1, "f": "poll", "value": {KEY: [[0]]},
              "invoke": 0}],
            2,
            "ok poll's value",
        ),
        (
            [{"index": 0, "time_ns": 0, "type": "event", "process": 1, "f": "final-read",
              "value": {"key": KEY, "records": [[0, None]], "high_watermark": 1}}],
            1,
            "final-read's records",
        ),
        (
            [{"index": 0, "time_ns": 0, "type": "event", "process": "nemesis", "f": "replica-log",
              "value": {"key": KEY, "broker": 1, "records": [], "high_watermark": "3"}}],
            1,
            "high_watermark",
        ),
        (
            [{"index": 0, "time_ns": 0, "type": "invoke", "process": 1, "f": "fault", "value": None}],
            1,
            "not event",
        ),
    ],
)  # fmt: skip
def test_a_malformed_line_is_an_error_naming_its_number(
    tmp_path: Path, lines: list[dict[str, object] | bytes], line: int, message: str
) -> None:
    path = _write(tmp_path / "h.jsonl", *lines)
    with pytest.raises(HistoryError) as raised:
        read_history(path)
    assert raised.value.line == line
    assert message in str(raised.value)
    assert f"line {line}" in str(raised.value)


def test_a_malformed_last_line_with_its_newline_is_not_the_crash_case(tmp_path: Path) -> None:
    path = _write(tmp_path / "h.jsonl", _send(0), orjson.dumps(_send(1, "b"))[:25] + b"\n")
    with pytest.raises(HistoryError, match="line 2"):
        read_history(path)


def test_unknown_fields_are_ignored(tmp_path: Path) -> None:
    events = read_history(_write(tmp_path / "h.jsonl", {**_send(0), "node": "broker-2"})).events
    assert events[0].value == [KEY, "a"]


def test_a_missing_file_is_an_error_without_a_line(tmp_path: Path) -> None:
    with pytest.raises(HistoryError) as raised:
        read_history(tmp_path / "absent.jsonl")
    assert raised.value.line is None
    assert "cannot read" in str(raised.value)


def test_parse_history_takes_bytes() -> None:
    history = parse_history(orjson.dumps(_send(0)) + b"\n", "in-memory")
    assert history.path == "in-memory"
    assert history.events[0].f == "send"
