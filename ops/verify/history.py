"""The history of a verification run: JSON Lines, one event per line, append-only.

What it owns: the format, ``HistoryWriter`` (what a campaign's clients call as they go) and
``read_history`` (what the checker reads, strictly).

The format is Jepsen's (``jepsen/tests/kafka.clj``) with one operation per event pair. Each line is
one JSON object:

* ``index``: the line's position, 0, 1, 2...; ``time_ns``: monotonic nanoseconds (only differences
  mean anything);
* ``type``: ``invoke``, then one completion: ``ok``, ``fail`` (definitely did not happen) or
  ``info`` (indeterminate: it may have happened); ``event`` for what is not an operation;
* ``process``: a logical client (an int, or a name such as ``"nemesis"`` for events); a crashed
  client comes back under a new process id;
* ``f``: what was done (below); ``value``; ``error`` (a Kafka error name such as
  ``NOT_ENOUGH_REPLICAS``, or an exception's text), only on failed or indeterminate completions;
* ``invoke``: on a completion, the index of its invoke. Jepsen pairs a completion with the
  process's one open operation; naming the invoke lets a process have several operations in
  flight, as the idempotent producer pipelines sends.

Keys are topic-partitions written ``"topic-partition"`` (``topic_partition("orders", 0)``);
values are strings, unique per key: a value appears twice only if the system wrote it twice.

* ``send``: invoke ``[key, value]``; completion ``[key, [offset, value]]``, offset ``null`` when
  unknown (a timeout). A process promises order: its acknowledged sends to one key must land in the
  order it invoked them (a writer that promises nothing, such as concurrent JSON API requests, uses
  one process per request in flight).
* ``poll``: a reader's fetch; the ``ok`` completion is ``{key: [[offset, value], ...]}``.
  Readers assign partitions (no consumer group), so every poll of a process continues where its
  previous one stopped; ``assign`` (invoke and completion: the list of keys) makes a process forget
  its position in keys no longer assigned.
* ``final-read`` (an event): after healing, one partition read from its log start:
  ``{"key", "records": [[offset, value], ...], "high_watermark", "complete"}``, ``complete`` false
  when the read stopped before the high watermark it aimed at (``high_watermark`` may be null when
  unknown). A key's final log is the union of its final reads.
* ``replica-log`` (an event): one per broker and partition after healing, read from the broker's
  files by the runner: ``{"broker", "key", "high_watermark", "log_end_offset", "records"}``
  (either offset null when unknown), optionally ``"leader": true`` and ``"log_start_offset"``.
* ``fault`` / ``heal`` (events): what the nemesis did, any JSON value, for the unavailability
  report and for people reading a run; ``note``: anything else worth keeping.

Rules kept here:

* One event is one ``write(2)`` of one line on an unbuffered file, so a crashed run keeps every
  event recorded before the crash, with at worst a torn last line. There is no fsync: a history
  survives its writer's crash, not the machine's.
* A history file is created, never appended to: two runs in one file would interleave.
* Writing is synchronous. On an asyncio loop (single thread) history order is call order, which is
  what the checker relies on; a small write costs microseconds.
* Reading is strict: a line that is not JSON, not an object, or whose fields have the wrong shape
  is an error naming its line number. The one exception is the crash case: a last line without its
  newline that does not parse is set aside and reported (``History.truncated_line``). Unknown
  extra fields are kept out of ``Event`` and ignored, so a runner can add its own.
* An invoke without its completion (the run ended first) stays open; the checker treats it as
  indeterminate, as Jepsen does.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import orjson

from runtime.clock import Clock, LoopClock

__all__ = [
    "ASSIGN",
    "COMPLETIONS",
    "EVENT_FUNCTIONS",
    "FAULT",
    "FINAL_READ",
    "HEAL",
    "NEMESIS",
    "NOTE",
    "OPERATION_FUNCTIONS",
    "POLL",
    "REPLICA_LOG",
    "SEND",
    "Event",
    "History",
    "HistoryError",
    "HistoryWriter",
    "Operation",
    "collector_paused",
    "parse_history",
    "read_history",
    "topic_partition",
]

SEND: Final = "send"
POLL: Final = "poll"
ASSIGN: Final = "assign"
FINAL_READ: Final = "final-read"
REPLICA_LOG: Final = "replica-log"
FAULT: Final = "fault"
HEAL: Final = "heal"
NOTE: Final = "note"

OPERATION_FUNCTIONS: Final = frozenset({SEND, POLL, ASSIGN})
"""Functions recorded as an invoke and a completion."""
EVENT_FUNCTIONS: Final = frozenset({FINAL_READ, REPLICA_LOG, FAULT, HEAL, NOTE})
"""Functions recorded as one ``event`` line."""
COMPLETIONS: Final = frozenset({"ok", "fail", "info"})
NEMESIS: Final = "nemesis"
"""The process of the events the runner records itself (faults, heals, replica logs)."""


def topic_partition(topic: str, partition: int) -> str:
    """The history's key for a topic-partition: ``orders``, 3 -> ``"orders-3"``."""
    return f"{topic}-{partition}"


@dataclass(frozen=True, slots=True)
class Event:
    """One line of a history."""

    index: int
    time_ns: int
    type: str
    process: int | str
    f: str
    value: Any
    error: str | None = None
    invoke: int | None = None

    def as_json(self) -> dict[str, Any]:
        line: dict[str, Any] = {
            "index": self.index,
            "time_ns": self.time_ns,
            "type": self.type,
            "process": self.process,
            "f": self.f,
            "value": self.value,
        }
        if self.invoke is not None:
            line["invoke"] = self.invoke
        if self.error is not None:
            line["error"] = self.error
        return line


@dataclass(frozen=True, slots=True, eq=False)
class Operation:
    """An invoked operation waiting for its completion: what ``HistoryWriter.invoke`` returns.

    Complete it once, with ``ok``, ``fail`` or ``info`` (here or on the writer). A completion's
    ``value`` of None repeats the invoke's, reshaped for a send (``[key, [null, value]]``).
    """

    writer: HistoryWriter = field(repr=False)
    index: int
    process: int | str
    f: str
    value: Any

    def ok(self, value: Any = None) -> Event:
        return self.writer.ok(self, value)

    def fail(self, value: Any = None, *, error: str | None = None) -> Event:
        return self.writer.fail(self, value, error=error)

    def info(self, value: Any = None, *, error: str | None = None) -> Event:
        return self.writer.info(self, value, error=error)


class HistoryError(Exception):
    """A history that cannot be read: unreadable file, or a malformed line (``line``, 1-based)."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        where = path if line is None else f"{path}, line {line}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line
        self.message = message


class HistoryWriter:
    """Records a run's history into a new file, one written line per event.

    ``clock`` is the Clock port (a ``LoopClock`` by default, a ``ManualClock`` in tests); only its
    ``now_ns`` is read. Use it as a context manager, or call ``close``.
    """

    def __init__(self, path: str | os.PathLike[str], clock: Clock | None = None) -> None:
        self.path = os.fspath(path)
        self._clock = clock if clock is not None else LoopClock()
        # Unbuffered: each event is one write(2), so a crash keeps what was recorded; "x": a
        # history is never appended to an existing file.
        self._file = Path(self.path).open("xb", buffering=0)  # noqa: SIM115 - closed by close()
        self._next_index = 0
        self._open: set[int] = set()

    # -- operations ---------------------------------------------------------------------------

    def invoke(self, process: int | str, f: str, value: Any = None) -> Operation:
        """Record the start of an operation; complete it with ``ok``, ``fail`` or ``info``."""
        if f not in OPERATION_FUNCTIONS:
            raise ValueError(f"{f!r} is not an operation (one of {sorted(OPERATION_FUNCTIONS)})")
        event = self._write("invoke", process, f, value)
        self._open.add(event.index)
        return Operation(self, event.index, process, f, value)

    def ok(self, operation: Operation, value: Any = None) -> Event:
        """It happened. ``value``: a send's ``[key, [offset, value]]`` (``send_ok`` builds it), a
        poll's ``{key: [[offset, value], ...]}``."""
        return self._complete(operation, "ok", value, None)

    def fail(self, operation: Operation, value: Any = None, *, error: str | None = None) -> Event:
        """It definitely did not happen (an answer that means nothing was appended)."""
        return self._complete(operation, "fail", value, error)

    def info(self, operation: Operation, value: Any = None, *, error: str | None = None) -> Event:
        """It may or may not have happened (a timeout, a lost connection, a crashed client)."""
        return self._complete(operation, "info", value, error)

    def send(self, process: int | str, key: str, value: str) -> Operation:
        """Invoke a send of ``value`` to ``key``."""
        return self.invoke(process, SEND, [key, value])

    def send_ok(self, operation: Operation, offset: int | None) -> Event:
        """A send acknowledged at ``offset``."""
        key, value = operation.value
        return self.ok(operation, [key, [offset, value]])

    def poll(self, process: int | str) -> Operation:
        return self.invoke(process, POLL)

    def assign(self, process: int | str, keys: Sequence[str]) -> Operation:
        return self.invoke(process, ASSIGN, list(keys))

    # -- events -------------------------------------------------------------------------------

    def event(self, process: int | str, f: str, value: Any = None) -> Event:
        """Record something that is not an operation (``final-read``, ``replica-log``, ``fault``,
        ``heal``, ``note``)."""
        if f not in EVENT_FUNCTIONS:
            raise ValueError(f"{f!r} is not an event (one of {sorted(EVENT_FUNCTIONS)})")
        return self._write("event", process, f, value)

    def fault(self, value: Any) -> Event:
        return self.event(NEMESIS, FAULT, value)

    def heal(self, value: Any) -> Event:
        return self.event(NEMESIS, HEAL, value)

    def note(self, value: Any) -> Event:
        return self.event(NEMESIS, NOTE, value)

    def final_read(
        self,
        process: int | str,
        key: str,
        records: Iterable[tuple[int, str]],
        *,
        high_watermark: int | None,
        complete: bool = True,
    ) -> Event:
        """One partition read after healing, from its log start towards ``high_watermark``."""
        value = {
            "key": key,
            "high_watermark": high_watermark,
            "complete": complete,
            "records": [[offset, record] for offset, record in records],
        }
        return self.event(process, FINAL_READ, value)

    def replica_log(
        self,
        broker: int,
        key: str,
        records: Iterable[tuple[int, str]],
        *,
        high_watermark: int | None,
        log_end_offset: int | None = None,
        leader: bool = False,
        log_start_offset: int = 0,
    ) -> Event:
        """One replica's log after healing, as read from its files: (offset, value) per record."""
        value: dict[str, Any] = {
            "broker": broker,
            "key": key,
            "high_watermark": high_watermark,
            "log_end_offset": log_end_offset,
            "records": [[offset, record] for offset, record in records],
        }
        if leader:
            value["leader"] = True
        if log_start_offset:
            value["log_start_offset"] = log_start_offset
        return self.event(NEMESIS, REPLICA_LOG, value)

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def open_operations(self) -> int:
        """Invoked operations not completed yet."""
        return len(self._open)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _complete(self, operation: Operation, type_: str, value: Any, error: str | None) -> Event:
        if operation.writer is not self or operation.index not in self._open:
            raise ValueError(
                f"operation {operation.index} ({operation.f} by {operation.process!r}) is not open here"
            )
        if operation.f == POLL and type_ == "ok" and not isinstance(value, dict):
            raise ValueError("an ok poll's value is {key: [[offset, value], ...]}")
        self._open.discard(operation.index)
        if value is None:
            value = _repeated(operation.f, operation.value)
        return self._write(type_, operation.process, operation.f, value, error=error, invoke=operation.index)

    def _write(
        self,
        type_: str,
        process: int | str,
        f: str,
        value: Any,
        *,
        error: str | None = None,
        invoke: int | None = None,
    ) -> Event:
        event = Event(self._next_index, self._clock.now_ns(), type_, process, f, value, error, invoke)
        self._file.write(orjson.dumps(event.as_json()) + b"\n")
        self._next_index += 1
        return event


def _repeated(f: str, invoked: Any) -> Any:
    """A completion's value when none is given: the invoke's (a send's with an unknown offset)."""
    if f == SEND:
        key, value = invoked
        return [key, [None, value]]
    return invoked


# -- reading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class History:
    """A history read back: its events in order, and the torn last line set aside, if any."""

    path: str
    events: list[Event] = field(default_factory=list)
    truncated_line: int | None = None
    """The 1-based number of a last line without its newline that did not parse (a crashed run)."""


def read_history(path: str | os.PathLike[str]) -> History:
    """Read a history file strictly (see the module's rules); ``HistoryError`` when it cannot be."""
    name = os.fspath(path)
    try:
        with Path(name).open("rb") as lines, collector_paused():
            return _parse(lines, name)
    except OSError as error:
        raise HistoryError(name, None, f"cannot read: {error.strerror or error}") from error


def parse_history(data: bytes, path: str = "<history>") -> History:
    """Parse a history's bytes (what ``read_history`` does with a file's lines)."""
    with collector_paused():
        return _parse(io.BytesIO(data), path)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector: reading and checking a history allocate millions of
    containers that all live on, and every allocation burst would start a collection that walks them
    again (both ran 2-3 times slower). Parsed JSON and the checker's tables hold no reference
    cycles, so the collector has nothing to find meanwhile; reference counting still frees memory."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _parse(lines: Iterable[bytes], path: str) -> History:
    """Lines one at a time (a history can be larger than is worth holding twice): every line but
    the last ends with its newline, so a line without one is the last, perhaps torn."""
    reader = _Reader(path)
    truncated: int | None = None
    for number, line in enumerate(lines, 1):
        if line.endswith(b"\n"):
            try:
                parsed = orjson.loads(line)
            except orjson.JSONDecodeError as error:
                raise HistoryError(path, number, f"not JSON ({error})") from error
        else:
            try:
                parsed = orjson.loads(line)
            except orjson.JSONDecodeError:
                truncated = number  # the crash case: the writer died in the middle of this line
                break
        reader.add(parsed, number)
    return History(path, reader.events, truncated)


def _is_offset(value: object, *, nullable: bool = False) -> bool:
    return (type(value) is int and value >= 0) or (nullable and value is None)


def _is_records(items: object) -> bool:
    """``[[offset, value], ...]``: non-negative int offsets, string values."""
    if type(items) is not list:
        return False
    for item in items:  # a plain loop: final reads and replica logs hold whole logs
        if type(item) is not list or len(item) != 2:
            return False
        offset, value = item
        if type(offset) is not int or offset < 0 or type(value) is not str:
            return False
    return True


def _is_reads(value: object) -> bool:
    """``{key: [[offset, value], ...]}``."""
    return type(value) is dict and all(
        type(key) is str and _is_records(pairs) for key, pairs in value.items()
    )


def _is_keys(value: object) -> bool:
    return type(value) is list and all(type(key) is str for key in value)


class _Reader:
    """Turns parsed lines into events, checking each line's shape and its place in the history."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.events: list[Event] = []
        self._open: dict[int, Event] = {}

    def _error(self, number: int, message: str) -> HistoryError:
        return HistoryError(self.path, number, message)

    def add(self, line: Any, number: int) -> None:
        if type(line) is not dict:
            raise self._error(number, "not a JSON object")
        index = line.get("index")
        time_ns = line.get("time_ns")
        type_ = line.get("type")
        process = line.get("process")
        f = line.get("f")
        value = line.get("value")
        error = line.get("error")
        invoke = line.get("invoke")
        if type(index) is not int or index != len(self.events):
            raise self._error(number, f"index {index!r}, expected {len(self.events)} (its position)")
        if type(time_ns) is not int:
            raise self._error(number, f"time_ns {time_ns!r} is not an integer")
        if type(process) is not int and type(process) is not str:
            raise self._error(number, f"process {process!r} is neither an integer nor a name")
        if error is not None and type(error) is not str:
            raise self._error(number, f"error {error!r} is not a string")
        if f in OPERATION_FUNCTIONS:
            if type_ == "invoke":
                if invoke is not None:
                    raise self._error(number, "an invoke names no invoke")
                self._check_invoke(f, value, number)
                event = Event(index, time_ns, type_, process, f, value, error, None)
                self._open[index] = event
            elif type_ in COMPLETIONS:
                value = self._check_completion(f, type_, process, value, invoke, number)
                event = Event(index, time_ns, type_, process, f, value, error, invoke)
            else:
                raise self._error(number, f"type {type_!r} of a {f} is not invoke, ok, fail or info")
        elif f in EVENT_FUNCTIONS:
            if type_ != "event":
                raise self._error(number, f"type {type_!r} of a {f} is not event")
            if f == FINAL_READ:
                self._check_final_read(value, number)
            elif f == REPLICA_LOG:
                self._check_replica_log(value, number)
            event = Event(index, time_ns, type_, process, f, value, error, None)
        else:
            known = sorted(OPERATION_FUNCTIONS | EVENT_FUNCTIONS)
            raise self._error(number, f"f {f!r} is not one of {known}")
        self.events.append(event)

    def _check_invoke(self, f: str, value: Any, number: int) -> None:
        if f == SEND:
            if not (type(value) is list and len(value) == 2 and all(type(v) is str for v in value)):
                raise self._error(number, f"a send's invoke value {value!r} is not [key, value]")
        elif f == ASSIGN and not _is_keys(value):
            raise self._error(number, f"an assign's value {value!r} is not a list of keys")

    def _check_completion(
        self, f: str, type_: str, process: Any, value: Any, invoke: Any, number: int
    ) -> Any:
        """The completion's value, checked (a null value repeats the invoke's)."""
        started = self._open.pop(invoke, None) if type(invoke) is int else None
        if started is None:
            raise self._error(number, f"a completion names invoke {invoke!r}, which is not an open operation")
        if started.process != process or started.f != f:
            raise self._error(
                number,
                f"completion by {process!r} of a {f} names invoke {invoke} "
                f"(a {started.f} by {started.process!r})",
            )
        if value is None:
            value = _repeated(f, started.value)
        if f == SEND:
            key, sent = started.value
            if not (
                type(value) is list
                and len(value) == 2
                and value[0] == key
                and type(value[1]) is list
                and len(value[1]) == 2
                and _is_offset(value[1][0], nullable=True)
                and value[1][1] == sent
            ):
                raise self._error(
                    number, f"a send's completion value {value!r} is not [{key!r}, [offset, {sent!r}]]"
                )
        elif f == POLL:
            if type_ == "ok" and not _is_reads(value):
                raise self._error(
                    number, f"an ok poll's value is not {{key: [[offset, value], ...]}}: {value!r:.200}"
                )
        elif f == ASSIGN and not _is_keys(value):
            raise self._error(number, f"an assign's value {value!r} is not a list of keys")
        return value

    def _check_final_read(self, value: Any, number: int) -> None:
        if type(value) is not dict or type(value.get("key")) is not str:
            raise self._error(number, f"a final-read's value {value!r:.200} is not an object with a key")
        if not _is_records(value.get("records")):
            raise self._error(number, "a final-read's records are not [[offset, value], ...]")
        if not _is_offset(value.get("high_watermark"), nullable=True):
            raise self._error(number, "a final-read's high_watermark is not an offset or null")
        if type(value.get("complete", True)) is not bool:
            raise self._error(number, "a final-read's 'complete' is not true or false")

    def _check_replica_log(self, value: Any, number: int) -> None:
        if type(value) is not dict or type(value.get("key")) is not str:
            raise self._error(number, f"a replica-log's value {value!r:.200} is not an object with a key")
        if type(value.get("broker")) is not int:
            raise self._error(number, "a replica-log's broker is not an integer")
        if not _is_records(value.get("records")):
            raise self._error(number, "a replica-log's records are not [[offset, value], ...]")
        for name in ("high_watermark", "log_end_offset"):
            if not _is_offset(value.get(name), nullable=True):
                raise self._error(number, f"a replica-log's {name} is not an offset or null")
        if not _is_offset(value.get("log_start_offset", 0)):
            raise self._error(number, "a replica-log's log_start_offset is not an offset")
        if type(value.get("leader", False)) is not bool:
            raise self._error(number, "a replica-log's 'leader' is not true or false")
