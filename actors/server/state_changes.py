"""ISR state-change events: what a broker changed or learned about partition states, in order.

What it owns: the ``StateChange`` value and the ``StateChangeLog``, the bounded in-memory ring a
broker process keeps of them (docs/operations.md §5). The partition actors of a broker record their
own ISR writes (``isr_shrink``, ``isr_expand``), the broker records its ISR change notifications
(``propagation``), the controller running on that broker records what it wrote (``leader_election``,
``controller_isr_shrink``) and the partition states it read that it had not seen (``state_learned``:
a change whose writer died before its events were collected still reaches the history, with the time
the controller learned it). ``GET /v1/state-changes?since=`` serves the ring; the snapshot exporter
and a broker's own snapshot writer turn it into ``*.state-changes.parquet`` files for the rollup.

Rules kept here:

* It is an observability sink, like a logger or a metric: recording never sends a message, never
  blocks and never fails, and nothing in the actors reads it back, so it cannot change behaviour
  (the simulation's schedules are the same with or without it).
* Time enters as an argument (``ts_ms``, the caller's ``ctx.wall_clock_ms``): events are compared
  with wall-clock scrapes and with what people saw.
* ``(incarnation, sequence)`` orders and identifies events: the incarnation is the recording
  process's start time, the sequence counts from 1. A reader asks for what follows the last
  sequence it has; when the ring has already dropped some of those, the answer says how many
  (``dropped``), so a lost event is counted, never silent.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from actors.common.types import BrokerId, TopicPartition

__all__ = ["DEFAULT_STATE_CHANGE_CAPACITY", "StateChange", "StateChangeLog", "StateChangesSince"]

DEFAULT_STATE_CHANGE_CAPACITY: Final = 100_000


@dataclass(frozen=True, slots=True)
class StateChange:
    """One change of a partition state (or one ISR change notification), as the schema's columns
    (``ops/rollup/schema.py``); fields that do not apply are None."""

    ts_ms: int
    kind: str
    tp: TopicPartition | None = None
    leader: BrokerId | None = None
    leader_epoch: int | None = None
    zk_version: int | None = None
    isr: tuple[BrokerId, ...] | None = None
    previous_isr: tuple[BrokerId, ...] | None = None
    replicas: tuple[BrokerId, ...] | None = None
    min_insync_replicas: int | None = None
    reason: str | None = None
    partitions: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True, slots=True)
class StateChangesSince:
    """An answer to ``since``: the events after it, and how many of those the ring already dropped."""

    broker: BrokerId
    incarnation: int
    last_sequence: int
    dropped: int
    events: tuple[tuple[int, StateChange], ...]

    def document(self) -> dict[str, Any]:
        """The JSON body of ``GET /v1/state-changes``."""
        return {
            "broker": self.broker,
            "incarnation": self.incarnation,
            "last_sequence": self.last_sequence,
            "dropped": self.dropped,
            "events": [
                _event_document(self.broker, self.incarnation, sequence, change)
                for sequence, change in self.events
            ],
        }


def _members(members: Iterable[BrokerId] | None) -> list[int] | None:
    return None if members is None else list(members)


def _event_document(broker: BrokerId, incarnation: int, sequence: int, change: StateChange) -> dict[str, Any]:
    tp = change.tp
    return {
        "ts": change.ts_ms,
        "broker": str(broker),
        "incarnation": incarnation,
        "sequence": sequence,
        "kind": change.kind,
        "topic": None if tp is None else tp.topic,
        "partition": None if tp is None else tp.partition,
        "leader": change.leader,
        "leader_epoch": change.leader_epoch,
        "zk_version": change.zk_version,
        "isr": _members(change.isr),
        "previous_isr": _members(change.previous_isr),
        "replicas": _members(change.replicas),
        "min_insync_replicas": change.min_insync_replicas,
        "reason": change.reason,
        "partitions": None if change.partitions is None else [str(p) for p in change.partitions],
    }


class StateChangeLog:
    """The bounded ring of one broker process's state-change events (module docstring)."""

    def __init__(
        self, broker: BrokerId, incarnation: int, capacity: int = DEFAULT_STATE_CHANGE_CAPACITY
    ) -> None:
        if capacity < 1:
            raise ValueError(f"a state-change log holds at least one event, not {capacity}")
        self.broker = broker
        self.incarnation = incarnation
        self._events: deque[tuple[int, StateChange]] = deque(maxlen=capacity)
        self._last_sequence = 0

    @property
    def last_sequence(self) -> int:
        return self._last_sequence

    def record(self, change: StateChange) -> None:
        self._last_sequence += 1
        self._events.append((self._last_sequence, change))

    def since(
        self, sequence: int, incarnation: int | None = None, limit: int | None = None
    ) -> StateChangesSince:
        """The events after ``sequence`` of ``incarnation`` (oldest first, at most ``limit``). A reader
        that names another incarnation (the process restarted) gets everything held."""
        if incarnation is not None and incarnation != self.incarnation:
            sequence = 0
        sequence = max(0, min(sequence, self._last_sequence))
        first_held = self._events[0][0] if self._events else self._last_sequence + 1
        dropped = max(0, first_held - sequence - 1)
        start = max(0, sequence + 1 - first_held)  # sequences in the ring are contiguous
        stop = len(self._events) if limit is None else min(len(self._events), start + max(0, limit))
        selected = tuple(itertools.islice(self._events, start, stop))
        last = selected[-1][0] if selected else self._last_sequence
        return StateChangesSince(self.broker, self.incarnation, last, dropped, selected)
