"""The offline checker: a history (``ops/verify/history.py``) in, a verdict with its evidence out.

What it owns: ``check_history(history) -> CheckResult``, pure (no I/O, no clock), and the error
classes below. It follows Jepsen's Kafka queue checker (``jepsen/tests/kafka.clj``:
``version-orders``, ``lost-write-cases``, ``poll-skip+nonmonotonic-cases``, ``duplicate-cases``,
``g1a-cases``, ``unseen``) and adds what owning the brokers allows: the final read of every
partition (Kafka's ducktape ``validate_delivery``: acknowledged minus consumed must be empty) and
every replica's log.

The version order of a key (its log as clients saw it) is built from completions only: every
acknowledged send with an offset, every ``info`` send with an offset whose value some ``ok`` poll or
final read returned (it must have committed), and every (offset, value) an ``ok`` poll or a final
read returned. Offsets holding a value are numbered densely (the *index*): gaps between offsets are
legal (control records), so order is judged by index, not by offset arithmetic.

A key's final log is the union of its ``final-read`` events. A complete final read judges every
value of the key; an incomplete one (it stopped before the high watermark) only values at or below
the highest offset it returned.

The error classes, each counted, with the first examples kept:

* ``duplicate``: one value at two or more offsets of a key (a producer retry appended twice, or a
  replica re-appended).
* ``inconsistent-offsets``: two values at one offset of a key (the signature of divergent logs).
* ``G1a``: a value an ``ok`` poll or a final read returned whose send failed definitely (``fail``).
* ``dirty-read``: a value an ``ok`` poll returned that is absent from the final log of its key
  (it was visible, then went away: read beyond the high watermark, or truncated after commit).
* ``lost``: an acknowledged (``ok``) send whose value is absent from the final log of its key. The
  headline figure: lost acknowledged writes.
* ``lost-write``: Jepsen's bound rule, which needs no final read: with ``bound`` the highest index
  at which a value read by an ``ok`` poll or a final read first appears, every value of an
  acknowledged send whose last index is at or below ``bound`` must have been read by someone.
* ``unseen``: an acknowledged send whose value no ``ok`` poll or final read ever returned.
* ``no-final-read``: a key with acknowledged sends the final reads cannot judge (no final read of
  the key, or one that stopped before reaching them), one error per key: the run proved nothing
  about their survival.
* ``poll-skip`` / ``nonmonotonic-poll``: per process and key, the first value of an ``ok`` poll is
  more than one index past (skip) or not past (non-monotonic) the last value of that process's
  previous ``ok`` poll of the key. A completed ``assign`` (``ok`` or ``info``) forgets the keys it
  no longer names; ``fail``/``info`` polls do not move the position.
* ``int-poll-skip`` / ``int-nonmonotonic-poll``: the same between consecutive values of one key
  within one ``ok`` poll or one final read. Final reads are only judged within themselves: a
  runner may read a partition from its start more than once.
* ``nonmonotonic-send``: per process and key, in the order the process invoked them, an
  acknowledged send landing at an offset below the previous acknowledged send's. (Equal offsets
  are reported as ``inconsistent-offsets``.)
* ``replica-divergence``: after healing, a replica whose log differs from the leader's below
  ``min(its high watermark, the leader's high watermark)``, from its log start offset. The
  leader's log is the key's complete final log (else the ``replica-log`` marked ``leader``); the
  leader's high watermark is the marked leader's, else the final read's, else the highest a
  replica reported. One error per offset; what cannot be compared is said in the notes.

Validity: every class above invalidates the run. Jepsen's allowed classes do not arise or do not
apply: ``int-send-skip`` cannot occur (a send carries one value), and poll-skip and
nonmonotonic-poll are allowed only for readers that subscribe, while ours assign.

Figures: sends ``ok``/``info``/``fail`` (an invoke never completed counts as ``info``), distinct
values read, and unavailability: per key, a window opens when a send that did not succeed was
invoked (or at the key's last acknowledgement, if that came later) and closes at the next ``ok``
send completion of the key; a window still open when the history ends closes at the key's last
send event and is marked open. The longest window per key and overall are reported, with the
nemesis events (``fault``, ``heal``) around it.

Everything is a few passes over the events with dicts, plus one sort of each key's offsets: a
million sends check in seconds.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ops.verify.history import (
    ASSIGN,
    FAULT,
    FINAL_READ,
    HEAL,
    POLL,
    REPLICA_LOG,
    SEND,
    Event,
    History,
    collector_paused,
)

__all__ = [
    "ALLOWED_CLASSES",
    "ERROR_CLASSES",
    "SUMMARY_GROUPS",
    "CheckResult",
    "Window",
    "check_history",
]

ERROR_CLASSES: Final[tuple[str, ...]] = (
    "lost",
    "lost-write",
    "unseen",
    "no-final-read",
    "duplicate",
    "inconsistent-offsets",
    "G1a",
    "dirty-read",
    "poll-skip",
    "nonmonotonic-poll",
    "int-poll-skip",
    "int-nonmonotonic-poll",
    "nonmonotonic-send",
    "replica-divergence",
)
"""Every class the checker reports, in the order it prints them."""

ALLOWED_CLASSES: Final[frozenset[str]] = frozenset()
"""Classes that do not invalidate a run: none (see the module docstring)."""

SUMMARY_GROUPS: Final[Mapping[str, tuple[str, ...]]] = {
    "lost": ("lost",),
    "duplicated": ("duplicate",),
    "inconsistent": ("inconsistent-offsets",),
    "order": (
        "poll-skip",
        "nonmonotonic-poll",
        "int-poll-skip",
        "int-nonmonotonic-poll",
        "nonmonotonic-send",
    ),
    "dirty": ("G1a", "dirty-read"),
    "divergent": ("replica-divergence",),
    "unseen": ("unseen",),
}
"""The totals line's figures, each the sum of its classes."""

_SKIPPED_SHOWN: Final = 10
_FAULTS_SHOWN: Final = 5


@dataclass(frozen=True)
class Window:
    """An unavailability window of one key: sends attempted, none acknowledged."""

    key: str
    start_ns: int
    end_ns: int
    failed_sends: int
    error: str | None
    """The first error of the window's failed sends."""
    open: bool
    """Still unavailable when the history ended."""
    faults: tuple[Mapping[str, Any], ...] = ()
    """The nemesis events around it: the last before it opened, and those during it."""

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9

    def as_json(self, origin_ns: int) -> dict[str, Any]:
        return {
            "key": self.key,
            "start_s": (self.start_ns - origin_ns) / 1e9,
            "end_s": (self.end_ns - origin_ns) / 1e9,
            "duration_s": self.duration_s,
            "failed_sends": self.failed_sends,
            "error": self.error,
            "open": self.open,
            "faults": list(self.faults),
        }


@dataclass(frozen=True)
class CheckResult:
    """The verdict over one history, with its figures and the first examples of each error."""

    path: str
    events: int
    sends_ok: int
    sends_info: int
    """Indeterminate sends, and sends invoked but never completed."""
    sends_fail: int
    values_read: int
    """Distinct (key, value) pairs returned by ok polls and final reads."""
    keys: int
    faults: int
    counts: Mapping[str, int]
    """Every class of ``ERROR_CLASSES``, zero included."""
    examples: Mapping[str, Sequence[Mapping[str, Any]]]
    valid: bool
    unavailability: Mapping[str, Window]
    """The longest window per key (keys that never were unavailable are absent)."""
    longest_unavailability: Window | None
    origin_ns: int
    """The first event's time: windows are printed relative to it."""
    truncated_line: int | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def violations(self) -> dict[str, int]:
        """The classes that invalidate the run, with their counts."""
        return {name: count for name, count in self.counts.items() if count and name not in ALLOWED_CLASSES}

    def group_count(self, group: str) -> int:
        return sum(self.counts[name] for name in SUMMARY_GROUPS[group])

    def as_json(self) -> dict[str, Any]:
        longest = self.longest_unavailability
        return {
            "history": self.path,
            "valid": self.valid,
            "events": self.events,
            "sends": {"ok": self.sends_ok, "info": self.sends_info, "fail": self.sends_fail},
            "values_read": self.values_read,
            "keys": self.keys,
            "faults": self.faults,
            "counts": dict(self.counts),
            "examples": {name: list(found) for name, found in self.examples.items() if found},
            "longest_unavailability": None if longest is None else longest.as_json(self.origin_ns),
            "unavailability": {
                key: window.as_json(self.origin_ns) for key, window in sorted(self.unavailability.items())
            },
            "truncated_line": self.truncated_line,
            "notes": list(self.notes),
        }


def check_history(history: History, *, max_examples: int = 10) -> CheckResult:
    """Judge ``history``: every error class, the figures, the verdict."""
    with collector_paused():
        return _check(history, max_examples)


def _check(history: History, max_examples: int) -> CheckResult:
    events = history.events
    errors = _Errors(max_examples)
    notes: list[str] = []
    if history.truncated_line is not None:
        notes.append(
            f"line {history.truncated_line} is truncated (the run crashed while writing it); "
            "the events before it were checked"
        )
    state = _collect(events)
    keys = state.keys
    for key in sorted(keys):
        _version_order(key, keys[key], errors)
    for key in sorted(keys):
        _lost_and_unseen(key, keys[key], errors)
    _read_order(events, keys, errors)
    _send_order(state.acknowledged, errors)
    _replica_divergence(state.replica_logs, keys, errors, notes)
    unavailability = _unavailability(events, state.nemesis)
    longest = max(unavailability.values(), key=lambda w: w.end_ns - w.start_ns, default=None)
    if state.open_operations:
        notes.append(f"{state.open_operations} operations were invoked but never completed")
    counts = {name: errors.counts.get(name, 0) for name in ERROR_CLASSES}
    return CheckResult(
        path=history.path,
        events=len(events),
        sends_ok=state.sends["ok"],
        sends_info=state.sends["info"] + state.sends["invoke"],
        sends_fail=state.sends["fail"],
        values_read=sum(len(key_state.read_by) for key_state in keys.values()),
        keys=len(keys),
        faults=sum(1 for event in state.nemesis if event.f == FAULT),
        counts=counts,
        examples={name: errors.examples.get(name, []) for name in ERROR_CLASSES},
        valid=not any(count and name not in ALLOWED_CLASSES for name, count in counts.items()),
        unavailability=unavailability,
        longest_unavailability=longest,
        origin_ns=events[0].time_ns if events else 0,
        truncated_line=history.truncated_line,
        notes=tuple(notes),
    )


# -- collection ---------------------------------------------------------------------------------


class _Errors:
    """Counts per class and the first ``limit`` examples of each."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list[dict[str, Any]]] = {}

    def add(self, name: str, example: dict[str, Any]) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1
        found = self.examples.setdefault(name, [])
        if len(found) < self.limit:
            found.append(example)


class _Key:
    """What the history says about one key."""

    __slots__ = (
        "acknowledged",
        "conflicts",
        "final",
        "final_complete",
        "final_high_watermark",
        "final_reached",
        "first_offset",
        "index_of",
        "log",
        "more_offsets",
        "offsets",
        "polled",
        "read_by",
        "writer",
    )

    def __init__(self) -> None:
        self.log: dict[int, str] = {}
        """offset -> the first value seen there."""
        self.conflicts: dict[int, set[str]] = {}
        """offset -> every value seen there, for offsets with more than one."""
        self.first_offset: dict[str, int] = {}
        """value -> the first offset it was seen at."""
        self.more_offsets: dict[str, set[int]] = {}
        """value -> its other offsets, for values seen at more than one."""
        self.read_by: dict[str, int] = {}
        """value -> the first ok poll or final read (event index) that returned it."""
        self.polled: dict[str, tuple[int, int]] = {}
        """value -> (offset, event index) of the first ok poll that returned it."""
        self.final: dict[int, str] | None = None
        """offset -> value in the key's final reads; None if the key had none."""
        self.final_complete = False
        self.final_high_watermark: int | None = None
        self.final_reached = -1
        """The highest offset the final reads returned."""
        self.writer: dict[str, Event] = {}
        """value -> its send's completion (the invoke if it never completed)."""
        self.acknowledged: list[Event] = []
        """The key's ok send completions, in history order."""
        self.offsets: list[int] = []
        """Offsets holding a value, sorted (position = index)."""
        self.index_of: dict[int, int] = {}

    def add(self, offset: int, value: str) -> None:
        seen = self.log.get(offset)
        if seen is None:
            self.log[offset] = value
        elif seen != value:
            self.conflicts.setdefault(offset, {seen}).add(value)
        first = self.first_offset.get(value)
        if first is None:
            self.first_offset[value] = offset
        elif first != offset:
            self.more_offsets.setdefault(value, set()).add(offset)

    def value_offsets(self, value: str) -> list[int]:
        more = self.more_offsets.get(value)
        first = self.first_offset[value]
        return [first] if more is None else sorted({first, *more})

    def judged_by_final_read(self, offset: int | None) -> bool:
        """Whether the final read can say if a value at ``offset`` survived: always after a
        complete read; after an incomplete one, only below the last offset it reached."""
        if self.final is None:
            return False
        if self.final_complete:
            return True
        return offset is not None and offset <= self.final_reached


@dataclass
class _State:
    keys: dict[str, _Key] = field(default_factory=dict)
    sends: dict[str, int] = field(default_factory=lambda: {"invoke": 0, "ok": 0, "info": 0, "fail": 0})
    acknowledged: list[Event] = field(default_factory=list)
    replica_logs: list[Event] = field(default_factory=list)
    nemesis: list[Event] = field(default_factory=list)
    open_operations: int = 0


def _collect(events: Sequence[Event]) -> _State:
    """One pass: each key's log as clients saw it, reads, writers, final reads."""
    state = _State()
    keys = state.keys
    maybe_committed: list[tuple[_Key, int, str]] = []
    open_operations = 0
    for event in events:
        f = event.f
        type_ = event.type
        if f == SEND:
            if type_ == "invoke":
                open_operations += 1
                key, value = event.value
                key_state = keys.get(key) or keys.setdefault(key, _Key())
                key_state.writer[value] = event
                state.sends["invoke"] += 1
                continue
            open_operations -= 1
            key, (offset, value) = event.value
            key_state = keys[key]
            key_state.writer[value] = event
            state.sends["invoke"] -= 1
            state.sends[type_] += 1
            if type_ == "ok":
                key_state.acknowledged.append(event)
                state.acknowledged.append(event)
                if offset is not None:
                    key_state.add(offset, value)
            elif type_ == "info" and offset is not None:
                maybe_committed.append((key_state, offset, value))
        elif f == POLL:
            if type_ == "invoke":
                open_operations += 1
                continue
            open_operations -= 1
            if type_ != "ok":
                continue
            for key, pairs in event.value.items():
                key_state = keys.get(key) or keys.setdefault(key, _Key())
                read_by = key_state.read_by
                polled = key_state.polled
                for offset, value in pairs:
                    key_state.add(offset, value)
                    if value not in read_by:
                        read_by[value] = event.index
                    if value not in polled:
                        polled[value] = (offset, event.index)
        elif f == FINAL_READ:
            read = event.value
            key_state = keys.get(read["key"]) or keys.setdefault(read["key"], _Key())
            if key_state.final is None:
                key_state.final = {}
            final_log = key_state.final
            read_by = key_state.read_by
            for offset, value in read["records"]:
                key_state.add(offset, value)
                final_log.setdefault(offset, value)
                if value not in read_by:
                    read_by[value] = event.index
                if offset > key_state.final_reached:
                    key_state.final_reached = offset
            key_state.final_complete = key_state.final_complete or read.get("complete", True)
            high_watermark = read.get("high_watermark")
            if high_watermark is not None:
                key_state.final_high_watermark = max(high_watermark, key_state.final_high_watermark or 0)
        elif f == ASSIGN:
            open_operations += 1 if type_ == "invoke" else -1
        elif f == REPLICA_LOG:
            state.replica_logs.append(event)
        elif f in (FAULT, HEAL):
            state.nemesis.append(event)
    # An indeterminate send whose value was read must have happened: its offset joins the log.
    for key_state, offset, value in maybe_committed:
        if value in key_state.read_by:
            key_state.add(offset, value)
    state.open_operations = open_operations
    return state


# -- the version order: duplicates and inconsistent offsets -------------------------------------


def _version_order(key: str, state: _Key, errors: _Errors) -> None:
    state.offsets = sorted(state.log)
    state.index_of = {offset: index for index, offset in enumerate(state.offsets)}
    for offset in sorted(state.conflicts):
        errors.add(
            "inconsistent-offsets",
            {
                "key": key,
                "offset": offset,
                "index": state.index_of[offset],
                "values": sorted(state.conflicts[offset]),
            },
        )
    for value in sorted(state.more_offsets, key=lambda v: state.first_offset[v]):
        offsets = state.value_offsets(value)
        errors.add("duplicate", {"key": key, "value": value, "count": len(offsets), "offsets": offsets})


# -- lost, lost-write, unseen, no final read, G1a, dirty reads ----------------------------------


def _lost_and_unseen(key: str, state: _Key, errors: _Errors) -> None:
    read_by = state.read_by
    index_of = state.index_of
    first_offset = state.first_offset
    more_offsets = state.more_offsets

    def first_index(value: str) -> int:
        if value in more_offsets:
            return index_of[state.value_offsets(value)[0]]
        return index_of[first_offset[value]]

    def last_index(value: str) -> int:
        if value in more_offsets:
            return index_of[state.value_offsets(value)[-1]]
        return index_of[first_offset[value]]

    bound = -1
    bound_read: dict[str, Any] = {}
    for value, reader in read_by.items():
        index = first_index(value)
        if index > bound:
            bound, bound_read = index, {"value": value, "reader": reader}
    final_values = set(state.final.values()) if state.final is not None else set()
    unjudged = 0
    for event in state.acknowledged:
        _, (offset, value) = event.value
        written = {"key": key, "value": value, "offset": offset, "writer": event.index}
        if value not in read_by:
            errors.add("unseen", written)
            if value in first_offset and last_index(value) <= bound:
                errors.add(
                    "lost-write",
                    {**written, "index": last_index(value), "max_read_index": bound, "max_read": bound_read},
                )
        if value in final_values:
            continue
        if state.judged_by_final_read(offset):
            errors.add("lost", written)
        else:
            unjudged += 1
    if unjudged:
        reason = "no final read" if state.final is None else "the final read stopped early"
        errors.add(
            "no-final-read",
            {
                "key": key,
                "acknowledged": len(state.acknowledged),
                "unjudged": unjudged,
                "reason": reason,
                "read_up_to": state.final_reached if state.final else None,
                "high_watermark": state.final_high_watermark,
            },
        )
    for value, reader in read_by.items():
        writer = state.writer.get(value)
        if writer is not None and writer.type == "fail":
            errors.add(
                "G1a",
                {"key": key, "value": value, "writer": writer.index, "error": writer.error, "reader": reader},
            )
    for value, (offset, reader) in state.polled.items():
        if value not in final_values and state.judged_by_final_read(offset):
            errors.add("dirty-read", {"key": key, "value": value, "offset": offset, "reader": reader})


# -- order: reads and sends ---------------------------------------------------------------------


def _read_order(events: Sequence[Event], keys: Mapping[str, _Key], errors: _Errors) -> None:
    # process -> key -> (index of the last value read, the poll that read it)
    positions: dict[int | str, dict[str, tuple[int, int]]] = {}
    for event in events:
        f = event.f
        if f == FINAL_READ:
            read = event.value
            _within_one_read(event, read["key"], read["records"], keys[read["key"]], errors)
            continue  # final reads may start over: judged within themselves only
        if f == ASSIGN and event.type in ("ok", "info"):
            position = positions.get(event.process)
            if position is not None:
                assigned = set(event.value)
                for key in [key for key in position if key not in assigned]:
                    del position[key]
            continue
        if f != POLL or event.type != "ok":
            continue
        position = positions.setdefault(event.process, {})
        for key, pairs in event.value.items():
            if not pairs:
                continue
            state = keys[key]
            _within_one_read(event, key, pairs, state, errors)
            index_of = state.index_of
            last = position.get(key)
            first_offset, first_value = pairs[0]
            if last is not None:
                index = index_of[first_offset]
                delta = index - last[0]
                if delta != 1:
                    errors.add(
                        "poll-skip" if delta > 1 else "nonmonotonic-poll",
                        {
                            "key": key,
                            "process": event.process,
                            "reader": event.index,
                            "previous_reader": last[1],
                            "value": first_value,
                            "offset": first_offset,
                            "delta": delta,
                            **_skipped(state, last[0], index),
                        },
                    )
            position[key] = (index_of[pairs[-1][0]], event.index)


def _within_one_read(
    event: Event, key: str, pairs: Sequence[Sequence[Any]], state: _Key, errors: _Errors
) -> None:
    """Consecutive values of one key in one read must be consecutive in the key's version order."""
    if not pairs:
        return
    index_of = state.index_of
    previous = index_of[pairs[0][0]]
    for offset, value in pairs[1:]:
        index = index_of[offset]
        delta = index - previous
        if delta != 1:
            errors.add(
                "int-poll-skip" if delta > 1 else "int-nonmonotonic-poll",
                {
                    "key": key,
                    "process": event.process,
                    "reader": event.index,
                    "value": value,
                    "offset": offset,
                    "delta": delta,
                    **_skipped(state, previous, index),
                },
            )
        previous = index


def _skipped(state: _Key, previous: int, index: int) -> dict[str, Any]:
    """The values between two indexes a read jumped over (a few), for a skip's example."""
    if index - previous <= 1:
        return {}
    between = state.offsets[previous + 1 : min(index, previous + 1 + _SKIPPED_SHOWN)]
    return {"skipped": [[offset, state.log[offset]] for offset in between]}


def _send_order(acknowledged: Iterable[Event], errors: _Errors) -> None:
    """Per process and key, acknowledged sends in invoke order must land at rising offsets."""
    by_writer: dict[tuple[int | str, str], list[tuple[int, int, str, int]]] = {}
    for event in acknowledged:
        key, (offset, value) = event.value
        if offset is not None and event.invoke is not None:
            by_writer.setdefault((event.process, key), []).append((event.invoke, offset, value, event.index))
    for (process, key), sends in by_writer.items():
        sends.sort()
        previous_offset, previous_value = -1, ""
        for _, offset, value, completion in sends:
            if offset < previous_offset:
                errors.add(
                    "nonmonotonic-send",
                    {
                        "key": key,
                        "process": process,
                        "value": value,
                        "offset": offset,
                        "writer": completion,
                        "previous_value": previous_value,
                        "previous_offset": previous_offset,
                    },
                )
            previous_offset, previous_value = offset, value


# -- replicas -----------------------------------------------------------------------------------


def _replica_divergence(
    replica_logs: Sequence[Event], keys: Mapping[str, _Key], errors: _Errors, notes: list[str]
) -> None:
    by_key: dict[str, list[Mapping[str, Any]]] = {}
    for event in replica_logs:
        by_key.setdefault(event.value["key"], []).append(event.value)
    for key in sorted(by_key):
        replicas = by_key[key]
        leader = next((replica for replica in replicas if replica.get("leader", False)), None)
        state = keys.get(key)
        reference: Mapping[int, str]
        if state is not None and state.final is not None and state.final_complete:
            reference, source = state.final, "final read"
        elif leader is not None:
            reference, source = dict(leader["records"]), f"broker {leader['broker']}'s log"
        else:
            notes.append(f"{key}: replica logs not compared (no complete final read, no leader's log)")
            continue
        known = [r["high_watermark"] for r in replicas if r["high_watermark"] is not None]
        if leader is not None and leader["high_watermark"] is not None:
            leader_high_watermark: int | None = leader["high_watermark"]
        elif state is not None and state.final_high_watermark is not None:
            leader_high_watermark = state.final_high_watermark
        else:
            leader_high_watermark = max(known, default=None)
        if leader_high_watermark is None:
            notes.append(f"{key}: replica logs not compared (no high watermark known)")
            continue
        reference_offsets = sorted(reference)
        for replica in replicas:
            if replica["high_watermark"] is None:
                notes.append(
                    f"{key}: broker {replica['broker']}'s log not compared (its high watermark is unknown)"
                )
                continue
            bound = min(replica["high_watermark"], leader_high_watermark)
            start = replica.get("log_start_offset", 0)
            log = {offset: value for offset, value in replica["records"] if start <= offset < bound}
            low = bisect.bisect_left(reference_offsets, start)
            high = bisect.bisect_left(reference_offsets, bound)
            for offset in sorted(set(log).union(reference_offsets[low:high])):
                expected = reference.get(offset)
                found = log.get(offset)
                if expected != found:
                    errors.add(
                        "replica-divergence",
                        {
                            "key": key,
                            "broker": replica["broker"],
                            "offset": offset,
                            "leader_value": expected,
                            "replica_value": found,
                            "high_watermark": replica["high_watermark"],
                            "leader_high_watermark": leader_high_watermark,
                            "compared_with": source,
                        },
                    )


# -- unavailability -----------------------------------------------------------------------------


def _unavailability(events: Sequence[Event], nemesis: Sequence[Event]) -> dict[str, Window]:
    """The longest window per key during which sends were attempted and none was acknowledged."""
    last_ok: dict[str, int] = {}
    last_send: dict[str, int] = {}
    opened: dict[str, tuple[int, int, str | None]] = {}  # key -> (start_ns, failed sends, first error)
    longest: dict[str, Window] = {}
    nemesis_times = [event.time_ns for event in nemesis]

    def close(key: str, end_ns: int, *, still_open: bool) -> None:
        start_ns, failed, error = opened.pop(key)
        best = longest.get(key)
        if best is None or end_ns - start_ns > best.end_ns - best.start_ns:
            faults = _faults_around(nemesis, nemesis_times, start_ns, end_ns)
            longest[key] = Window(key, start_ns, end_ns, failed, error, still_open, faults)

    for event in events:
        if event.f != SEND:
            continue
        key = event.value[0]
        now = event.time_ns
        last_send[key] = now
        if event.type == "invoke":
            continue
        if event.type == "ok":
            if key in opened:
                close(key, now, still_open=False)
            last_ok[key] = now
            continue
        window = opened.get(key)
        if window is None:
            invoked = events[event.invoke].time_ns if event.invoke is not None else now
            opened[key] = (max(invoked, last_ok.get(key, invoked)), 1, event.error)
        else:
            opened[key] = (window[0], window[1] + 1, window[2])
    for key in list(opened):
        close(key, last_send[key], still_open=True)
    return longest


def _faults_around(
    nemesis: Sequence[Event], times: Sequence[int], start_ns: int, end_ns: int
) -> tuple[Mapping[str, Any], ...]:
    """The last nemesis event at or before ``start_ns`` and those up to ``end_ns`` (a few)."""
    first = max(bisect.bisect_right(times, start_ns) - 1, 0)
    last = bisect.bisect_right(times, end_ns)
    chosen = nemesis[first:last][:_FAULTS_SHOWN]
    return tuple({"index": e.index, "time_ns": e.time_ns, "f": e.f, "value": e.value} for e in chosen)
