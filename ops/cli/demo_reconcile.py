"""The demo's last check: what its timeline saw against what the rollup computed from the events.

What it owns: matching each ISR state the demo watched appear in ZooKeeper (``Observation``: the
partition, the ISR it reached, the leader epoch when it matters, the wall-clock time the watch
fired) with the rollup's ``isr_intervals`` row for that state, and the demo's counter totals with
the rollup's ``state_change_totals``; the lines it prints; whether everything agreed.

Rules kept here:

* An interval matches an observation when it is the same partition and ISR (and leader epoch, when
  the observation names one) and starts no later than ``TOLERANCE_MS`` after the demo saw the state
  (the broker writes, then ZooKeeper's watch fires: the event comes first). Of several, the one that
  starts closest to the observation wins.
* Times agree within ``TOLERANCE_MS`` (one second); counts agree exactly. Anything else is a
  disagreement, and the demo fails: a report that contradicts what happened is a bug.
* Pure: rows in, lines out; the demo reads the tables and prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["TOLERANCE_MS", "Observation", "Reconciliation", "reconcile"]

TOLERANCE_MS: Final = 1_000


@dataclass(frozen=True, slots=True)
class Observation:
    """An ISR state the demo's timeline recorded (``what`` is its words for it)."""

    what: str
    topic: str
    partition: int
    isr: tuple[int, ...]
    seen_wall_ms: int
    leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class Reconciliation:
    lines: tuple[str, ...]
    agreed: bool


def _matching(observation: Observation, intervals: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    candidates = [
        row
        for row in intervals
        if row["topic"] == observation.topic
        and row["partition"] == observation.partition
        and sorted(row["isr"]) == sorted(observation.isr)
        and (observation.leader_epoch is None or row["leader_epoch"] == observation.leader_epoch)
        and row["start_ms"] <= observation.seen_wall_ms + TOLERANCE_MS
    ]
    return min(candidates, key=lambda row: abs(observation.seen_wall_ms - row["start_ms"]), default=None)


def reconcile(
    observations: Sequence[Observation],
    intervals: Sequence[Mapping[str, Any]],
    counted: Mapping[str, int],
    totals: Sequence[Mapping[str, Any]],
    started_wall_ms: int,
) -> Reconciliation:
    """``counted``: the demo's counter totals by event kind (``isr_shrink``, ``isr_expand``);
    ``totals``: the rollup's ``state_change_totals`` rows (broker, kind, events)."""
    lines: list[str] = []
    agreed = True

    def at(ms: int) -> str:
        return f"{(ms - started_wall_ms) / 1000:6.1f} s"

    for observation in observations:
        row = _matching(observation, intervals)
        if row is None:
            agreed = False
            lines.append(f"DIFFERS  {observation.what}: no ISR interval in the rollup")
            continue
        delta = row["start_ms"] - observation.seen_wall_ms
        ok = abs(delta) <= TOLERANCE_MS
        agreed &= ok
        end = "still open" if row["open"] else f"until {at(row['end_ms'])}"
        lines.append(
            f"{'agrees ' if ok else 'DIFFERS'}  {observation.what}: seen at {at(observation.seen_wall_ms)}, "
            f"rollup interval from {at(row['start_ms'])} {end} ({delta / 1000:+.2f} s, "
            f"{row['cause_kind']}{', ' + row['reason'] if row.get('reason') else ''})"
        )
    by_kind: dict[str, int] = {}
    for row in totals:
        by_kind[row["kind"]] = by_kind.get(row["kind"], 0) + int(row["events"])
    for kind, count in sorted(counted.items()):
        from_events = by_kind.get(kind, 0)
        ok = from_events == count
        agreed &= ok
        lines.append(
            f"{'agrees ' if ok else 'DIFFERS'}  {kind.replace('_', ' ')}s: {count} counted by the brokers' "
            f"metrics, {from_events} in the rollup's state-change events"
        )
    return Reconciliation(tuple(lines), agreed)
